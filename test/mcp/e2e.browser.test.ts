/**
 * End to end, as a desktop MCP client connects: the SDK's own client (`@modelcontextprotocol/client`
 * 2.4.0, `Client` + `StreamableHTTPClientTransport` with an `OAuthClientProvider`) against the real
 * service, a person approving in headless Chromium, on each database.
 *
 * 1. Dynamic client registration: the client calls /v1/mcp without a token, gets the 401 challenge,
 *    discovers the protected resource metadata (RFC 9728) and the authorization server's metadata
 *    (RFC 8414), registers itself (RFC 7591) and sends the person's browser to the authorization URL
 *    (PKCE S256, `resource`). Chromium lands on the consent page signed out, signs in by e-mail (the
 *    link read from a real SMTP server, opened in the same browser), approves personal access for the
 *    customers toolset, and is sent back to the client's loopback redirect with a code and `iss`; the
 *    client exchanges it. Then: tools/list is exactly the granted tools (listingFor of the connection's
 *    frozen operations), a query and a command called as tools (the command seen over HTTP), a
 *    refused call (a tool outside the grant), refresh (rotated), refresh replay (the family revoked:
 *    the newest tokens die too), and the same over revision 2026-07-28 (version pinned).
 * 2. Client ID metadata document: the client's id is an https URL served by a local HTTPS server
 *    (test CA, the egress test relaxations for that one address), no registration call; workspace
 *    access approved by the owner; tools answer; revocation (RFC 7009) ends the token on the next call.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  auth,
  Client,
  type OAuthClientInformationMixed,
  type OAuthClientMetadata,
  type OAuthClientProvider,
  type OAuthTokens,
  StreamableHTTPClientTransport,
  UnauthorizedError,
} from '@modelcontextprotocol/client';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { ApplyResult } from '../../server/admin.ts';
import { mailConfigFromEnv } from '../../server/mailer.ts';
import { listingFor, META_TOOLS } from '../../handlers/mcp/listing.ts';
import { announceBrowser, launchBrowser } from '../support/browser.ts';
import { acme, createPipeline } from '../support/fixtures.ts';
import { testCertificates } from '../support/receiver.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { freePort, type MailServer, startMailServer } from '../support/smtp.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const shots = path.join(root, 'test-output');
const REDIRECT = 'http://127.0.0.1:33418/callback';
/** What the owner grants the workspace connection on the consent page. */
const GRANTED = ['customers.CreateSalesPipeline', 'customers.GetSalesPipeline', 'customers.ListSalesPipelines'];

announceBrowser('the MCP end-to-end test');

// The SDK client runs unchanged: its dynamic registration carries `scope: "mcp"` (from the protected
// resource metadata), which the authorization server accepts.

/** An OAuth client provider as a desktop client keeps it: in memory, one registration, one token set. */
class DesktopProvider implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  authorizationUrl: URL | undefined;
  constructor(
    private readonly name: string,
    readonly clientMetadataUrl?: string,
  ) {}
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: this.name, redirect_uris: [REDIRECT], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none', application_type: 'native' } as OAuthClientMetadata;
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  discovery: unknown;
  saveDiscoveryState(state: unknown) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery as never;
  }
}

/** Waits (real time: the mail is sent after the answer) for the n-th mail to an address. */
async function mailTo(mail: MailServer, address: string, count: number) {
  for (let i = 0; i < 400 && mail.to(address).length < count; i++) await new Promise((r) => setTimeout(r, 25));
  const got = mail.to(address);
  assert.equal(got.length, count, `${address} received ${got.length} mails, expected ${count}`);
  return got[count - 1]!;
}

interface Ctx {
  svc: TestService;
  ws: ApplyResult;
  mail: MailServer;
  browser: Browser;
  mcpUrl: URL;
}

/**
 * The person's side: opens the authorization URL in `context`, signs in by e-mail when the consent page
 * asks (`email`), lets `choose` fill the form, approves, and answers the callback's query.
 */
async function consent(c: Ctx, context: BrowserContext, authorizationUrl: URL, email: string, shot: string, choose: (page: Page) => Promise<void>): Promise<URLSearchParams> {
  let callback: URL | undefined;
  await context.route(`${new URL(REDIRECT).origin}/**`, async (route) => {
    callback = new URL(route.request().url());
    await route.fulfill({ status: 200, contentType: 'text/html', body: '<p>You can close this window.</p>' });
  });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(err.message));
  await page.goto(authorizationUrl.href);
  assert.match(new URL(page.url()).pathname, /^\/oauth\/consent\/[A-Za-z0-9_-]+$/);
  const consentPath = new URL(page.url()).pathname;
  if ((await page.locator('main a:has-text("Sign in")').count()) > 0) {
    await page.screenshot({ path: path.join(shots, `mcp-e2e-${shot}-1-signed-out.png`) });
    const before = c.mail.to(email).length;
    await page.click('main a:has-text("Sign in")');
    await page.fill('#signin-email', email);
    await Promise.all([page.waitForNavigation(), page.click('button:has-text("Send me a sign-in link")')]);
    const received = await mailTo(c.mail, email, before + 1);
    const link = /\S+\/signin\/[A-Za-z0-9_-]{43}/.exec(received.mail.text!)![0]!;
    assert.equal(new URL(link).origin, c.mcpUrl.origin, 'the mailed link is on PUBLIC_URL');
    await page.goto(link);
    assert.equal(new URL(page.url()).pathname, consentPath, 'the sign-in link brings the person back to the consent page');
  }
  await page.screenshot({ path: path.join(shots, `mcp-e2e-${shot}-2-consent.png`), fullPage: true });
  await choose(page);
  await page.click('[data-approve]');
  for (let i = 0; i < 200 && !callback; i++) await new Promise((r) => setTimeout(r, 25));
  assert.ok(callback, `the browser did not come back to the client (at ${page.url()})`);
  assert.deepEqual(problems, []);
  await page.close();
  return callback.searchParams;
}

/** Connects a fresh client with the provider's tokens (no interaction expected). */
async function connected(c: Ctx, provider: DesktopProvider, options: { pin?: '2026-07-28'; headers?: Record<string, string> } = {}) {
  const transport = new StreamableHTTPClientTransport(c.mcpUrl, { authProvider: provider, ...(options.headers ? { requestInit: { headers: options.headers } } : {}) });
  const client = new Client({ name: 'e2e', version: '1.0.0' }, options.pin ? { versionNegotiation: { mode: { pin: options.pin } } } : {});
  await client.connect(transport);
  return client;
}

/** A raw POST to the token endpoint (replay and revocation need requests the SDK would not send). */
async function form(c: Ctx, pathname: string, fields: Record<string, string>) {
  const res = await fetch(new URL(pathname, c.mcpUrl.origin), { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields).toString() });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** A tools/list through a bare POST with a given token: its HTTP status and challenge. */
async function rawList(c: Ctx, token: string) {
  const res = await fetch(c.mcpUrl, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
  await res.arrayBuffer();
  return { status: res.status, challenge: res.headers.get('www-authenticate') ?? '' };
}

for (const database of databases) {
  describe(`MCP end to end with the SDK client, OAuth and the consent page in Chromium [${database.name}]`, function () {
    this.timeout(120_000);
    const c = {} as Ctx;
    let cimd: https.Server | undefined;
    let cimdUrl = '';

    before(async function () {
      c.browser = await launchBrowser(this);
      fs.mkdirSync(shots, { recursive: true });
      c.mail = await startMailServer();
      const certs = testCertificates();
      cimd = https.createServer({ key: certs.keyPem, cert: certs.certPem }, (req, res) => {
        if (req.url !== '/mcp-client.json') return void res.writeHead(404).end();
        res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'max-age=60' });
        res.end(JSON.stringify({ client_id: cimdUrl, client_name: 'Metadata Desktop', redirect_uris: [REDIRECT], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' }));
      });
      await new Promise<void>((resolve) => cimd!.listen(0, '127.0.0.1', resolve));
      const cimdPort = (cimd.address() as AddressInfo).port;
      cimdUrl = `https://127.0.0.1:${cimdPort}/mcp-client.json`;
      const port = await freePort();
      c.svc = await startTestService(database.url(), {
        port,
        publicUrl: `http://localhost:${port}`,
        mail: mailConfigFromEnv({ SMTP_URL: c.mail.url, MAIL_FROM: 'Acme Operations <ops@acme.example>' }),
        egress: { allowedPorts: [cimdPort], allowDestinations: [{ host: '127.0.0.1', port: cimdPort }], testCa: certs.caPem },
      });
      // oidc-provider stamps tokens with the real time; the service's checks read its (fake) clock.
      c.svc.clock.set(Date.now());
      c.ws = await c.svc.apply(acme());
      c.mcpUrl = new URL(`http://localhost:${port}/v1/mcp`);
    });
    after(async () => {
      await c.browser?.close();
      await c.svc?.close();
      await c.mail?.close();
      cimd?.closeAllConnections();
      await new Promise((resolve) => (cimd ? cimd.close(resolve) : resolve(undefined)));
    });

    describe('a client that registers itself (DCR), personal access', () => {
      const provider = new DesktopProvider('Desktop E2E');
      let context: BrowserContext;
      let connectionOps: string[] = [];

      it('discovers, registers, sends the person to consent; Chromium signs in by e-mail and approves; the code is exchanged', async () => {
        const transport = new StreamableHTTPClientTransport(c.mcpUrl, { authProvider: provider });
        const client = new Client({ name: 'e2e', version: '1.0.0' });
        await assert.rejects(client.connect(transport), (err: unknown) => err instanceof UnauthorizedError);
        assert.ok(provider.info?.client_id.startsWith('mcl_'), `registered: ${JSON.stringify(provider.info)}`);
        const url = provider.authorizationUrl!;
        assert.ok(url, 'the client was sent to the authorization endpoint');
        assert.equal(url.searchParams.get('code_challenge_method'), 'S256');
        assert.equal(url.searchParams.get('resource'), c.mcpUrl.href);
        context = await c.browser.newContext({ viewport: { width: 1000, height: 900 }, deviceScaleFactor: 1 });
        const back = await consent(c, context, url, 'olga@acme.test', `dcr-${database.name}`, async (page) => {
          await page.check('input[name="access"][value="personal"]');
          for (const box of await page.locator('input[name="toolset"]').all()) {
            if ((await box.getAttribute('value')) === 'customers') await box.check();
            else await box.uncheck();
          }
        });
        assert.ok(back.get('code'));
        assert.equal(back.get('iss'), c.mcpUrl.origin, 'RFC 9207 iss');
        await transport.finishAuth(back);
        assert.ok(provider.saved?.access_token);
        assert.ok(provider.saved?.refresh_token);
        const row = (await c.svc.db.sql.one<{ access: string; member_id: string; operations: string }>(`SELECT access, member_id, operations FROM mcp_connections WHERE workspace_id = ? AND client_name = ?`, [c.ws.workspace_id, 'Desktop E2E']))!;
        assert.equal(row.access, 'personal');
        assert.equal(row.member_id, c.ws.members.olga);
        connectionOps = JSON.parse(row.operations) as string[];
      });

      it('tools/list is exactly the granted tools (the customers toolset of the owner), a query and a command work, a tool outside the grant is refused', async () => {
        const client = await connected(c, provider);
        const listed = (await client.listTools()).tools.map((t) => t.name);
        // Approved with the consent page's default listing: compact (the meta tools, then lean tools within the budget).
        const expected = listingFor(connectionOps, { toolsets: ['customers'], listing: 'compact' }).map((t) => t.name);
        assert.deepEqual(listed, expected);
        assert.deepEqual(listed.slice(0, 3), META_TOOLS);
        assert.ok(listed.length > 5 && listed.slice(3).every((n) => n.startsWith('customers_')));
        const created = await client.callTool({ name: 'customers_CreateSalesPipeline', arguments: { ...createPipeline('Made by an agent') } });
        assert.ok(!created.isError, JSON.stringify(created));
        const id = (created.structuredContent as { item: { id: string } }).item.id;
        const listedPipelines = await client.callTool({ name: 'customers_ListSalesPipelines', arguments: {} });
        assert.ok(!listedPipelines.isError);
        assert.ok(JSON.stringify(listedPipelines.structuredContent).includes(id));
        const viaHttp = await c.svc.client(c.ws.keys.sales!.secret).customers.GetSalesPipeline({ id });
        assert.equal(viaHttp.data?.item.data.name, 'Made by an agent');
        await assert.rejects(client.callTool({ name: 'signing_ListSigningRequests', arguments: {} }), /-32602|Unknown tool|not found/i);
        const invalid = await client.callTool({ name: 'customers_GetSalesPipeline', arguments: { id: 42 } });
        assert.equal(invalid.isError, true);
        assert.equal(invalid.structuredContent, undefined);
        await client.close();
      });

      it('the same over revision 2026-07-28 (pinned)', async () => {
        const client = await connected(c, provider, { pin: '2026-07-28' });
        const listed = (await client.listTools()).tools.map((t) => t.name);
        assert.deepEqual(listed, listingFor(connectionOps, { toolsets: ['customers'], listing: 'compact' }).map((t) => t.name));
        const answer = await client.callTool({ name: 'customers_ListSalesPipelines', arguments: {} });
        assert.ok(!answer.isError, JSON.stringify(answer));
        await client.close();
      });

      it('refresh rotates the tokens; replaying the old refresh token revokes the family (the newest tokens die too)', async () => {
        const first = provider.saved!;
        const result = await auth(provider, { serverUrl: c.mcpUrl });
        assert.equal(result, 'AUTHORIZED');
        const second = provider.saved!;
        assert.notEqual(second.access_token, first.access_token);
        assert.notEqual(second.refresh_token, first.refresh_token);
        assert.equal((await rawList(c, second.access_token)).status, 200);
        const replay = await form(c, '/oauth/token', { grant_type: 'refresh_token', refresh_token: first.refresh_token!, client_id: provider.info!.client_id });
        assert.equal(replay.status, 400);
        assert.equal(replay.body.error, 'invalid_grant');
        const dead = await rawList(c, second.access_token);
        assert.equal(dead.status, 401);
        assert.match(dead.challenge, /error="invalid_token"/);
        const again = await form(c, '/oauth/token', { grant_type: 'refresh_token', refresh_token: second.refresh_token!, client_id: provider.info!.client_id });
        assert.equal(again.body.error, 'invalid_grant');
        await context.close();
      });
    });

    describe('a client with a metadata document (CIMD), workspace access', () => {
      const provider = new DesktopProvider('Metadata Desktop');
      let transport: StreamableHTTPClientTransport;
      let back: URLSearchParams | undefined;
      let context: BrowserContext | undefined;
      after(async () => context?.close());

      it('discovers from the 401 challenge (RFC 9728, RFC 8414), uses its https client id without registering; Chromium signs the owner in by e-mail, who approves workspace access with chosen grants; the browser returns to the client with code, state and iss', async () => {
        Object.defineProperty(provider, 'clientMetadataUrl', { value: cimdUrl });
        const discovered: string[] = [];
        const watching = async (input: string | URL | Request, init?: RequestInit) => {
          discovered.push(`${init?.method ?? 'GET'} ${new URL(String(input instanceof Request ? input.url : input)).pathname}`);
          return fetch(input, init);
        };
        transport = new StreamableHTTPClientTransport(c.mcpUrl, { authProvider: provider, fetch: watching });
        const client = new Client({ name: 'e2e', version: '1.0.0' });
        await assert.rejects(client.connect(transport), (err: unknown) => err instanceof UnauthorizedError);
        assert.ok(discovered.includes('GET /.well-known/oauth-protected-resource/v1/mcp'), discovered.join(', '));
        assert.ok(discovered.includes('GET /.well-known/oauth-authorization-server'), discovered.join(', '));
        assert.ok(!discovered.some((d) => d.endsWith('/oauth/register')), 'no registration for a metadata-document client');
        const url = provider.authorizationUrl!;
        assert.equal(url.origin + url.pathname, `${c.mcpUrl.origin}/oauth/authorize`);
        assert.equal(url.searchParams.get('client_id'), cimdUrl);
        assert.equal(url.searchParams.get('code_challenge_method'), 'S256');
        assert.equal(url.searchParams.get('resource'), c.mcpUrl.href);
        context = await c.browser.newContext({ viewport: { width: 1000, height: 1400 }, deviceScaleFactor: 1 });
        {
          back = await consent(c, context, url, 'olga@acme.test', `cimd-${database.name}`, async (page) => {
            assert.match((await page.textContent('[data-client-name]'))!, /Metadata Desktop/);
            await page.check('input[name="access"][value="workspace"]');
            for (const box of await page.locator('input[name="toolset"]').all()) {
              if ((await box.getAttribute('value')) === 'customers') await box.check();
              else await box.uncheck();
            }
            const customers = page.locator('[data-workspace-grants] fieldset[data-namespace="customers"]');
            await customers.locator('input[value="some"]').check();
            await customers.locator('summary').click();
            for (const op of GRANTED) await customers.locator(`input[value="${op}"]`).check();
            await page.locator('tr[data-resource="core:SalesPipeline"] input[value="core:SalesPipeline=read"]').check();
            await page.locator('tr[data-resource="core:SalesPipeline"] input[value="core:SalesPipeline=write"]').check();
            await page.locator('[data-workspace-grants] input[name="delegation"][value="selected"]').check();
            await page.locator(`[data-workspace-grants] input[name="delegate"][value="${c.ws.members.ada}"]`).check();
          });
        }
        assert.ok(back.get('code'));
        assert.equal(back.get('state'), url.searchParams.get('state'));
        assert.equal(back.get('iss'), c.mcpUrl.origin, 'RFC 9207 iss');
        const row = (await c.svc.db.sql.one<{ access: string; operations: string; delegation: string }>(`SELECT access, operations, delegation FROM mcp_connections WHERE workspace_id = ? AND client_id = ?`, [c.ws.workspace_id, cimdUrl]))!;
        assert.equal(row.access, 'workspace');
        assert.deepEqual(JSON.parse(row.operations), [...GRANTED].sort());
        assert.equal(row.delegation, 'selected');
      });

      it('exchanges the code; tools/list = the chosen operations (both revisions); a command and a query as the connection; a tool outside the grant refused (-32602); acting for a delegated member (Service-Act-As) within her own role; not for another member', async () => {
        assert.ok(back, 'the consent step did not run');
        await transport.finishAuth(back);
        const row = (await c.svc.db.sql.one<{ access: string; operations: string }>(`SELECT access, operations FROM mcp_connections WHERE workspace_id = ? AND client_id = ?`, [c.ws.workspace_id, cimdUrl]))!;
        assert.equal(row.access, 'workspace');
        assert.deepEqual(JSON.parse(row.operations), [...GRANTED].sort());

        // Workspace access: exactly the chosen operations; acting for a delegated member with Service-Act-As, not for others.
        const shared = await connected(c, provider);
        assert.deepEqual((await shared.listTools()).tools.map((t) => t.name), [...META_TOOLS, ...GRANTED.map((id) => id.replace('.', '_')).sort()]);
        const own = await shared.callTool({ name: 'customers_CreateSalesPipeline', arguments: { ...createPipeline('Shared integration') } });
        assert.ok(!own.isError, JSON.stringify(own));
        const id = (own.structuredContent as { item: { id: string } }).item.id;
        const got = await shared.callTool({ name: 'customers_GetSalesPipeline', arguments: { id } });
        assert.equal((got.structuredContent as { item: { data: { name: string } } }).item.data.name, 'Shared integration');
        // A tool outside the grant is a protocol error (-32602), not a tool result.
        await assert.rejects(shared.callTool({ name: 'customers_DeleteSalesPipeline', arguments: { id } }), /-32602|Unknown tool/i);
        await shared.close();
        // The same connection over revision 2026-07-28 (pinned): the same tools, the same answers.
        const modern = await connected(c, provider, { pin: '2026-07-28' });
        assert.deepEqual((await modern.listTools()).tools.map((t) => t.name), [...META_TOOLS, ...GRANTED.map((gid) => gid.replace('.', '_')).sort()]);
        const again = await modern.callTool({ name: 'customers_GetSalesPipeline', arguments: { id } });
        assert.deepEqual(again.structuredContent, got.structuredContent);
        await modern.close();
        // Acting for Ada: the connection's grants and Ada's own role both apply (she reads pipelines, a member may not change shared ones).
        const asAda = await connected(c, provider, { headers: { 'Service-Act-As': c.ws.members.ada! } });
        const read = await asAda.callTool({ name: 'customers_ListSalesPipelines', arguments: {} });
        assert.ok(!read.isError, JSON.stringify(read));
        assert.ok(JSON.stringify(read.structuredContent).includes('Shared integration'));
        const notHers = await asAda.callTool({ name: 'customers_CreateSalesPipeline', arguments: { ...createPipeline('For Ada') } });
        assert.equal(notHers.isError, true);
        assert.equal(notHers.structuredContent, undefined);
        assert.equal((JSON.parse((notHers.content as Array<{ text: string }>)[0]!.text) as { error: string }).error, 'forbidden');
        await asAda.close();
        const asBob = await connected(c, provider, { headers: { 'Service-Act-As': c.ws.members.bob! } });
        const refused = await asBob.callTool({ name: 'customers_ListSalesPipelines', arguments: {} });
        assert.equal(refused.isError, true);
        assert.match(JSON.stringify(refused.content), /403|forbidden|act/i);
        await asBob.close();

      });

      it('refresh rotates the refresh token; replaying the old one revokes the family: the newest tokens die too', async () => {
        const first = provider.saved!;
        assert.equal(await auth(provider, { serverUrl: c.mcpUrl }), 'AUTHORIZED');
        const second = provider.saved!;
        assert.notEqual(second.access_token, first.access_token);
        assert.ok(second.refresh_token && second.refresh_token !== first.refresh_token, 'the refresh token was rotated');
        assert.equal((await rawList(c, second.access_token)).status, 200);
        const replay = await form(c, '/oauth/token', { grant_type: 'refresh_token', refresh_token: first.refresh_token!, client_id: cimdUrl });
        assert.equal(replay.status, 400);
        assert.equal(replay.body.error, 'invalid_grant');
        const dead = await rawList(c, second.access_token);
        assert.equal(dead.status, 401);
        assert.match(dead.challenge, /error="invalid_token"/);
        const again = await form(c, '/oauth/token', { grant_type: 'refresh_token', refresh_token: second.refresh_token!, client_id: cimdUrl });
        assert.equal(again.status, 400);
        assert.equal(again.body.error, 'invalid_grant');
      });

      it('connects again (same browser, still signed in: a new personal connection) and revocation (RFC 7009) ends the token on the next call', async () => {
        provider.saved = undefined;
        provider.authorizationUrl = undefined;
        const again = new StreamableHTTPClientTransport(c.mcpUrl, { authProvider: provider });
        await assert.rejects(new Client({ name: 'e2e', version: '1.0.0' }).connect(again), (err: unknown) => err instanceof UnauthorizedError);
        const answer = await consent(c, context!, provider.authorizationUrl!, 'olga@acme.test', `cimd-again-${database.name}`, async () => {});
        await again.finishAuth(answer);
        const token = provider.saved!.access_token;
        const client = await connected(c, provider);
        assert.ok((await client.listTools()).tools.length > GRANTED.length, 'personal access: the owner\'s tools');
        await client.close();
        const revoked = await form(c, '/oauth/revoke', { token, client_id: cimdUrl });
        assert.equal(revoked.status, 200);
        const after = await rawList(c, token);
        assert.equal(after.status, 401);
        assert.match(after.challenge, /error="invalid_token"/);
        assert.match(after.challenge, /resource_metadata="[^"]+\/\.well-known\/oauth-protected-resource\/v1\/mcp"/);
        const rows = await c.svc.db.sql.all<{ access: string }>(`SELECT access FROM mcp_connections WHERE workspace_id = ? AND client_id = ? ORDER BY created_at, id`, [c.ws.workspace_id, cimdUrl]);
        assert.deepEqual(rows.map((r) => r.access).sort(), ['personal', 'workspace']);
      });
    });
  });
}
