/**
 * The consent page (handlers/mcp/consent.ts) and the agent connections page (handlers/mcp/connectionsPage.ts)
 * in headless Chromium against the real authorization server (handlers/mcp/oauth), on both databases: a
 * client registered by DCR starts the authorization code flow with PKCE S256 and the resource; a
 * signed-out browser is sent to sign in (same browser) and comes back; a plain member approves personal
 * access (toolsets narrowed) and cannot choose workspace access; an admin approves workspace access
 * with chosen operations, resource access and delegation; deny answers access_denied; an ended request
 * is a 410 page. The client gets its code (and exchanges it for a token naming the connection). The
 * connections page lists them in words; revoking (a member their own, an owner any) deletes the
 * grant's tokens and is in the audit log; the admin CLI lists and revokes. Framing is forbidden.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { type ApplyResult, setApiKeyAccess } from '../../server/admin.ts';
import { readAudit } from '../../server/audit.ts';
import { sha256Hex } from '../../server/ids.ts';
import { memberOperations, narrowOperations } from '../../handlers/mcp/connections.ts';
import { listingFor } from '../../handlers/mcp/listing.ts';
import { createSigninLink } from '../../server/signin.ts';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { admin } from '../support/cli.ts';
import { acme } from '../support/fixtures.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { modern, rawPost } from './tokens.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const shots = path.join(root, 'test-output');
const CONNECTIONS = '/settings/connections';

announceBrowser('the consent and connections pages browser test');

async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

interface ConnectionRow {
  id: string;
  access: string;
  member_id: string | null;
  member_role: string | null;
  operations: string;
  resources: string;
  toolsets: string;
  read_only: boolean | number;
  tool_listing: string;
  delegation: string;
  grant_id: string | null;
  created_by: string;
  revoked_at: number | null;
  client_name: string;
  redirect_uri: string;
}

for (const database of databases) {
  describe(`the consent and agent connections pages [${database.name}]`, function () {
    this.timeout(120_000);
    let svc: TestService;
    let ws: ApplyResult;
    let browser: Browser;
    let clientId: string;
    let resource: string;
    const contexts: BrowserContext[] = [];
    // The client's loopback listener (RFC 8252): where the browser is sent back with the code.
    let REDIRECT = '';
    let receiver: http.Server;
    const arrivals: URL[] = [];

    /** The client side of the flow: PKCE, state, the authorize URL. */
    const start = () => {
      const verifier = crypto.randomBytes(32).toString('base64url');
      const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
      const state = crypto.randomBytes(8).toString('hex');
      const q = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, scope: 'mcp', state, code_challenge: challenge, code_challenge_method: 'S256', resource });
      return { verifier, state, url: `${svc.origin}/oauth/authorize?${q}` };
    };

    /** What the client's listener receives from now on (answers reaching it through the browser). */
    const listen = () => {
      const from = arrivals.length;
      return () => arrivals.slice(from);
    };

    const member = async (who: string, next = '/') => {
      const s = await signedInPage(browser, svc, { workspaceId: ws.workspace_id, memberId: ws.members[who]! }, next);
      contexts.push(s.context);
      const arrived = listen();
      return { ...s, arrived };
    };

    /** Opens the authorize URL in a signed-in page: it lands on the consent page. */
    const consent = async (page: Page) => {
      const flow = start();
      const res = await page.goto(flow.url);
      assert.equal(res!.status(), 200);
      assert.match(page.url(), /\/oauth\/consent\/[A-Za-z0-9_-]+$/);
      return { ...flow, uid: page.url().split('/').pop()!, headers: res!.headers() };
    };

    const exchange = async (code: string, verifier: string) => {
      const res = await fetch(`${svc.origin}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier, client_id: clientId, resource }).toString(),
      });
      return { status: res.status, json: (await res.json()) as { access_token: string; refresh_token?: string } };
    };

    const connections = () => svc.db.sql.all<ConnectionRow>(`SELECT * FROM mcp_connections WHERE workspace_id = ? ORDER BY created_at, id`, [ws.workspace_id]);
    const audit = (action: string) =>
      svc.db.sql.all<{ actor_type: string; actor_id: string | null; subject_id: string | null; details: string }>(
        `SELECT actor_type, actor_id, subject_id, details FROM audit_log WHERE workspace_id = ? AND action = ? ORDER BY at, id`,
        [ws.workspace_id, action],
      );
    const toolsList = (token: string) => {
      const m = modern('tools/list');
      return rawPost(svc, m.body, { ...m.headers, Authorization: `Bearer ${token}` });
    };
    const grantRecords = (grantId: string) => svc.db.sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM oauth_records WHERE grant_id = ?`, [grantId]).then((r) => Number(r!.n));

    before(async function () {
      fs.mkdirSync(shots, { recursive: true });
      browser = await launchBrowser(this);
      receiver = http.createServer((req, res) => {
        const url = new URL(req.url ?? '/', REDIRECT);
        if (url.pathname === '/cb') arrivals.push(url);
        res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>Client</title><p>The client received the answer.</p>');
      });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      REDIRECT = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/cb`;
      const port = await freePort();
      svc = await startTestService(database.url(), { port, publicUrl: `http://127.0.0.1:${port}` });
      resource = `${svc.origin}/v1/mcp`;
      ws = await svc.apply(acme());
      const reg = await fetch(`${svc.origin}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client_name: 'Desk Agent', client_uri: 'https://agent.example', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', application_type: 'native', grant_types: ['authorization_code', 'refresh_token'] }),
      });
      const body = (await reg.json()) as { client_id: string };
      assert.equal(reg.status, 201, JSON.stringify(body));
      clientId = body.client_id;
    });
    after(async () => {
      for (const c of contexts) await c.close().catch(() => undefined);
      await browser?.close();
      await svc?.close();
      receiver?.closeAllConnections();
      await new Promise((resolve) => receiver?.close(resolve));
    });

    let personal = { id: '', token: '', grantId: '' };
    let shared = { id: '' };

    it('signed out: a 401 page links to sign-in with next= the consent page and says to open the mail in the same browser; the sign-in link brings the member back', async () => {
      const context = await browser.newContext({ viewport: { width: 1000, height: 800 } });
      contexts.push(context);
      const arrived = listen();
      const page = await context.newPage();
      const flow = start();
      const res = await page.goto(flow.url);
      assert.equal(res!.status(), 401);
      const uid = page.url().split('/').pop()!;
      assert.match(page.url(), /\/oauth\/consent\//);
      const text = (await page.locator('main').textContent())!;
      assert.match(text, /Sign in to approve this connection/);
      assert.match(text, /Desk Agent asks to connect/);
      assert.match(text, /Open that link in this same browser/);
      const href = await page.locator('a:has-text("Sign in")').getAttribute('href');
      assert.equal(href, `/signin?next=${encodeURIComponent(`/oauth/consent/${uid}`)}`);
      await page.screenshot({ path: path.join(shots, `consent-1-signed-out-${database.name}.png`), fullPage: true });
      // The sign-in form keeps next (handlers/signin/byEmail.ts); the mailed link for it, opened here, comes back.
      await page.locator('a:has-text("Sign in")').click();
      assert.equal(await page.locator('input[name="next"]').inputValue(), `/oauth/consent/${uid}`);
      const { url } = await createSigninLink(svc.db, svc.clock, { workspaceId: ws.workspace_id, memberId: ws.members.ada!, next: `/oauth/consent/${uid}`, baseUrl: svc.origin });
      await page.goto(url);
      await page.waitForURL(`${svc.origin}/oauth/consent/${uid}`);
      assert.match((await page.locator('h1').textContent())!, /Connect Desk Agent to Acme\?/);
      // Denied here: the client hears access_denied with its state, and nothing is connected.
      await Promise.all([page.waitForURL((u) => u.href.startsWith(REDIRECT)), page.locator('[data-deny]').click()]);
      assert.equal(arrived().length, 1);
      assert.equal(arrived()[0]!.searchParams.get('error'), 'access_denied');
      assert.equal(arrived()[0]!.searchParams.get('state'), flow.state);
      assert.equal(arrived()[0]!.searchParams.get('code'), null);
      assert.equal((await connections()).length, 0);
    });

    it('a plain member approves personal access: the page shows the client, its redirect host in bold and what it asks; framing is forbidden; workspace access is not theirs to choose', async () => {
      const { page, arrived, problems, cookie } = await member('ada');
      const flow = await consent(page);
      // Form posts need the page's CSRF token and this origin (the page kit's protectForm).
      const forged = (headers: Record<string, string>) =>
        fetch(`${svc.origin}/oauth/consent/${flow.uid}`, { method: 'POST', redirect: 'manual', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: 'decision=approve&access=personal&toolset=customers' });
      assert.equal((await forged({})).status, 403);
      assert.equal((await forged({ origin: 'https://evil.example' })).status, 403);
      assert.match(flow.headers['content-security-policy']!, /frame-ancestors 'none'/);
      assert.equal(flow.headers['x-frame-options'], 'DENY');
      assert.equal(flow.headers['cache-control'], 'no-store');
      assert.equal((await page.locator('[data-client-name] strong').textContent())!.trim(), 'Desk Agent');
      assert.equal(await page.locator('[data-redirect] strong').textContent(), new URL(REDIRECT).host);
      assert.equal((await page.locator('[data-redirect] code').textContent())!, REDIRECT);
      assert.match((await page.locator('[data-asks]').textContent())!, new RegExp(`${resource.replace(/[.]/g, '\\.')}.*scope mcp`));
      assert.equal(await page.locator('input[name="access"][value="workspace"]').isDisabled(), true);
      assert.match((await page.locator('[data-workspace-refused]').textContent())!, /Only owners and admins/);
      assert.equal(await page.locator('[data-workspace-grants]').count(), 0);
      assert.equal(await page.locator('input[name="access"][value="personal"]').isChecked(), true);
      // Default toolsets: those where the member's role gives something.
      for (const t of ['customers', 'analytics', 'workspace']) assert.equal(await page.locator(`[data-toolset="${t}"] input`).isChecked(), true, t);
      await page.screenshot({ path: path.join(shots, `consent-2-personal-${database.name}.png`), fullPage: true });

      // A forged workspace choice is refused (403), the page stays usable.
      await page.evaluate(() => {
        const input = document.querySelector<HTMLInputElement>('input[name="access"][value="workspace"]')!;
        input.disabled = false;
        input.checked = true;
      });
      const refused = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST'), page.locator('[data-approve]').click()]);
      assert.equal(refused[0].status(), 403);
      await page.waitForLoadState();
      assert.match((await page.locator('.problem').textContent())!, /Only owners and admins approve workspace access/);
      problems.length = 0; // the 403 answer's console line
      await page.screenshot({ path: path.join(shots, `consent-3-member-workspace-refused-${database.name}.png`), fullPage: true });
      assert.equal((await connections()).length, 0);

      // Personal access to customers and workspace only.
      for (const t of ['analytics', 'automation', 'documents', 'signing', 'webhooks']) await page.locator(`[data-toolset="${t}"] input`).uncheck();
      await Promise.all([page.waitForURL((u) => u.href.startsWith(REDIRECT)), page.locator('[data-approve]').click()]);
      const answer = arrived().at(-1)!;
      assert.equal(answer.searchParams.get('state'), flow.state);
      assert.equal(answer.searchParams.get('iss'), svc.origin);
      const code = answer.searchParams.get('code');
      assert.ok(code, answer.toString());
      const [row] = await connections();
      assert.equal(row!.access, 'personal');
      assert.equal(row!.member_id, ws.members.ada);
      assert.equal(row!.member_role, 'member');
      assert.equal(row!.client_name, 'Desk Agent');
      assert.equal(row!.redirect_uri, REDIRECT);
      assert.deepEqual(JSON.parse(row!.toolsets), ['customers', 'workspace']);
      const ops = JSON.parse(row!.operations) as string[];
      assert.deepEqual(ops, narrowOperations(memberOperations('member'), ['customers', 'workspace'], false));
      assert.ok(ops.includes('customers.UpdateDeal') && ops.includes('customers.ListSalesPipelines') && ops.includes('workspace.ListApps'));
      assert.ok(!ops.includes('customers.CreateSalesPipeline'), 'a member only reads pipelines');
      assert.deepEqual(JSON.parse(row!.resources), {});
      assert.equal(row!.delegation, 'none');
      assert.equal(row!.tool_listing, 'compact', 'the default listing');
      assert.ok(row!.grant_id);
      const [approved] = await audit('connection.approved');
      assert.equal(approved!.actor_id, ws.members.ada);
      assert.equal(approved!.subject_id, row!.id);
      personal = { id: row!.id, token: '', grantId: row!.grant_id! };
      // The code is the client's: exchanged for a token naming the connection.
      const t = await exchange(code!, flow.verifier);
      assert.equal(t.status, 200, JSON.stringify(t.json));
      const record = await svc.db.sql.one<{ payload: string; grant_id: string }>(`SELECT payload, grant_id FROM oauth_records WHERE model = 'AccessToken' AND id_hash = ?`, [sha256Hex(t.json.access_token)]);
      assert.equal(JSON.parse(record!.payload).accountId, row!.id);
      assert.equal(record!.grant_id, row!.grant_id);
      personal = { id: row!.id, token: t.json.access_token, grantId: row!.grant_id! };
      // /v1/mcp lists exactly the approved tools for it.
      const list = await toolsList(personal.token);
      assert.equal(list.status, 200, list.text);
      assert.deepEqual(
        (list.body.result.tools as Array<{ name: string }>).map((x) => x.name),
        listingFor(ops, { toolsets: ['customers', 'workspace'], listing: 'compact' }).map((x) => x.name),
      );
      assert.deepEqual(problems, []);
    });

    it('an admin approves workspace access with chosen operations, resource access and delegation (choices kept when something is missing)', async () => {
      svc.clock.advance(1000);
      const { page, arrived, problems } = await member('bob');
      // While the operator has the workspace's API keys off, workspace access (a workspace credential like a key) is not offered.
      await setApiKeyAccess(svc.db, svc.clock, ws.workspace_id, 'off');
      await consent(page);
      assert.equal(await page.locator('input[name="access"][value="workspace"]').isDisabled(), true);
      assert.match((await page.locator('[data-workspace-refused]').textContent())!, /Not available: the operator has not turned API keys on for this workspace/);
      await setApiKeyAccess(svc.db, svc.clock, ws.workspace_id, 'on');
      const flow = await consent(page);
      assert.equal(await page.locator('input[name="access"][value="workspace"]').isDisabled(), false);
      await page.locator('input[name="access"][value="workspace"]').check();
      // Nothing chosen: refused in words, choices kept.
      await page.locator('input[name="read_only"]').check();
      await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST'), page.locator('[data-approve]').click()]);
      await page.waitForLoadState();
      assert.match((await page.locator('.problem').textContent())!, /Choose at least one operation the connection may call/);
      problems.length = 0; // the 400 answer's console line
      assert.equal(await page.locator('input[name="access"][value="workspace"]').isChecked(), true);
      assert.equal(await page.locator('input[name="read_only"]').isChecked(), true);
      await page.locator('input[name="read_only"]').uncheck();

      const customers = page.locator('[data-workspace-grants] fieldset[data-namespace="customers"]');
      await customers.locator('input[value="some"]').check();
      await customers.locator('summary').click();
      await customers.locator('input[value="customers.ListSalesPipelines"]').check();
      await customers.locator('input[value="customers.UpdateSalesPipeline"]').check();
      await page.locator('[data-workspace-grants] fieldset[data-namespace="workspace"] input[value="all"]').check();
      await page.locator('[data-workspace-grants] fieldset[data-namespace="analytics"] input[value="all"]').check();
      await page.locator('tr[data-resource="core:SalesPipeline"] input[value="core:SalesPipeline=read"]').check();
      await page.locator('tr[data-resource="core:SalesPipeline"] input[value="core:SalesPipeline=write"]').check();
      await page.locator('[data-workspace-grants] input[name="delegation"][value="selected"]').check();
      await page.locator(`[data-workspace-grants] input[name="delegate"][value="${ws.members.ada}"]`).check();
      // Toolsets narrow the grants: analytics is left out.
      for (const t of ['analytics', 'automation', 'documents', 'signing', 'webhooks']) await page.locator(`[data-toolset="${t}"] input`).uncheck();
      // Every tool in full, not the compact default.
      assert.equal(await page.locator('input[name="tool_listing"][value="compact"]').isChecked(), true);
      await page.locator('input[name="tool_listing"][value="full"]').check();
      await page.screenshot({ path: path.join(shots, `consent-4-workspace-admin-${database.name}.png`), fullPage: true });
      // A phone: no sideways scrolling, with every operation list open.
      await page.setViewportSize({ width: 390, height: 844 });
      const closed = page.locator('[data-workspace-grants] details:not([open]) > summary');
      while ((await closed.count()) > 0) await closed.first().click();
      assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'no sideways scrolling at 390 px');
      await page.screenshot({ path: path.join(shots, `consent-4-phone-${database.name}.png`) });
      await page.setViewportSize({ width: 1100, height: 900 });
      await Promise.all([page.waitForURL((u) => u.href.startsWith(REDIRECT)), page.locator('[data-approve]').click()]);
      assert.ok(arrived().at(-1)!.searchParams.get('code'));
      assert.equal(arrived().at(-1)!.searchParams.get('state'), flow.state);
      const row = (await connections()).find((c) => c.access === 'workspace')!;
      assert.deepEqual(JSON.parse(row.operations), ['customers.ListSalesPipelines', 'customers.UpdateSalesPipeline', 'workspace.ListApps', 'workspace.ListBundles']);
      assert.deepEqual(JSON.parse(row.resources), { 'core:SalesPipeline': ['read', 'write'] });
      assert.deepEqual(JSON.parse(row.toolsets), ['customers', 'workspace']);
      assert.equal(row.member_id, null);
      assert.equal(row.created_by, ws.members.bob);
      assert.equal(row.delegation, 'selected');
      assert.equal(row.tool_listing, 'full');
      const delegates = await svc.db.sql.all<{ member_id: string }>(`SELECT member_id FROM mcp_connection_delegates WHERE connection_id = ?`, [row.id]);
      assert.deepEqual(delegates.map((d) => d.member_id), [ws.members.ada]);
      shared = { id: row.id };
      const { entries } = await readAudit(svc.db.sql, ws.workspace_id, { limit: 10, actions: ['connection.'] });
      assert.equal(entries[0]!.what, `approved the MCP connection “Desk Agent” (${row.id}) with workspace access: 4 operations, acting for Ada Member; toolsets customers and workspace; every tool listed in full`);
      assert.equal(entries[0]!.who, 'Bob Admin (member)');
      assert.equal(entries[1]!.what, `approved the MCP connection “Desk Agent” (${personal.id}) with personal access (acting as Ada Member): ${JSON.parse((await connections())[0]!.operations).length} operations; toolsets customers and workspace`);
      assert.deepEqual(problems, []);
    });

    it('an ended request (expired, answered, or unknown here) is a 410 page saying to start again from the client', async () => {
      const { page } = await member('olga');
      const flow = await consent(page);
      svc.clock.advance(31 * 60_000);
      const res = await page.goto(`${svc.origin}/oauth/consent/${flow.uid}`);
      assert.equal(res!.status(), 410);
      assert.match((await page.locator('main').textContent())!, /Start connecting again from the app or tool you were connecting/);
      await page.screenshot({ path: path.join(shots, `consent-5-expired-${database.name}.png`), fullPage: true });
      const other = await page.goto(`${svc.origin}/oauth/consent/nosuchinteraction`);
      assert.equal(other!.status(), 410);
    });

    it('lists connections in words: an owner sees all, a plain member the shared ones and their own', async () => {
      const { page } = await member('olga', CONNECTIONS);
      assert.equal(await page.locator('article.connection').count(), 2);
      const p = page.locator(`article[data-connection="${personal.id}"]`);
      assert.match((await p.locator('[data-access]').textContent())!, /^Personal: acts as Ada Member \(member\)/);
      assert.equal(await p.locator('[data-toolsets]').textContent(), 'Customers, Workspace');
      assert.equal(await p.locator('[data-read-only]').textContent(), 'no');
      assert.equal(await p.locator('[data-state]').textContent(), 'active');
      const s = page.locator(`article[data-connection="${shared.id}"]`);
      assert.match((await s.locator('[data-grants]').textContent())!, /Customers — 2 operations: ListSalesPipelines, UpdateSalesPipeline\s*Workspace — all operations \(2\)/);
      assert.equal((await s.locator('[data-resources]').textContent())!.trim(), 'Sales pipelines: read, write');
      assert.match((await s.locator('[data-delegation]').textContent())!, /^May act for Ada Member/);
      assert.ok((await s.locator('[data-client]').textContent())!.includes(`returns to ${new URL(REDIRECT).host}`));
      assert.equal(await page.locator('[data-revoke]').count(), 2);
      // Two approvals of one client told apart: whose or shared, who approved it and when, which of them.
      assert.match((await p.locator('[data-which]').textContent())!, /^Personal connection of Ada Member, approved \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC by Ada Member · 1 of 2 “Desk Agent” connections$/);
      assert.match((await s.locator('[data-which]').textContent())!, /^Workspace connection, approved .* by Bob Admin · 2 of 2 “Desk Agent” connections$/);
      // A personal connection's operations are named too (behind a disclosure: there may be many).
      await p.locator('[data-grants] summary').click();
      assert.match((await p.locator('[data-grants] li').first().textContent())!, /^Customers: .*List sales pipelines/);
      const html = await page.content();
      assert.ok(personal.token && !html.includes(personal.token), 'a token on the page');
      await page.screenshot({ path: path.join(shots, `connections-1-owner-${database.name}.png`), fullPage: true });

      // Settings index lists the page with its summary.
      await page.goto(`${svc.origin}/settings`);
      assert.match((await page.locator(`[data-settings="${CONNECTIONS}"]`).textContent())!, /AI agents and tools connected through the MCP server/);

      // Max (another member) would not see Ada's personal connection; Ada sees hers and the shared one, and may revoke only hers.
      const ada = await member('ada', CONNECTIONS);
      assert.equal(await ada.page.locator('article.connection').count(), 2);
      assert.equal(await ada.page.locator(`article[data-connection="${personal.id}"] [data-revoke]`).count(), 1);
      assert.equal(await ada.page.locator(`article[data-connection="${shared.id}"] [data-revoke]`).count(), 0);
    });

    it('revokes: a member their own personal connection, an owner any; the grant’s tokens are gone and the audit log says who', async () => {
      const ada = await member('ada', CONNECTIONS);
      // Revoking asks first, on a page of its own that says what stops.
      await Promise.all([ada.page.waitForURL(`${svc.origin}${CONNECTIONS}/${personal.id}/revoke`), ada.page.locator(`article[data-connection="${personal.id}"] [data-revoke]`).click()]);
      assert.equal(await ada.page.locator('h1').textContent(), 'Revoke Desk Agent?');
      assert.match((await ada.page.locator('main').textContent())!, /next call to this workspace is refused/);
      await ada.page.screenshot({ path: path.join(shots, `connections-2-confirm-${database.name}.png`), fullPage: true });
      // The shared connection's confirmation page is not hers: 409 in words.
      const notHers = await ada.page.goto(`${svc.origin}${CONNECTIONS}/${shared.id}/revoke`);
      assert.equal(notHers!.status(), 409);
      await ada.page.goto(`${svc.origin}${CONNECTIONS}/${personal.id}/revoke`);
      // A forged revoke of the shared connection is refused in words.
      await ada.page.evaluate((id) => {
        const input = document.querySelector<HTMLInputElement>('input[name="connection"]')!;
        input.value = id;
      }, shared.id);
      await Promise.all([ada.page.waitForURL(`${svc.origin}${CONNECTIONS}`), ada.page.locator('[data-confirm-revoke]').click()]);
      assert.match((await ada.page.locator('.problem').textContent())!, /Only owners and admins revoke workspace connections/);
      assert.equal((await connections()).find((c) => c.id === shared.id)!.revoked_at, null);

      assert.ok((await grantRecords(personal.grantId)) > 0);
      assert.equal((await toolsList(personal.token)).status, 200);
      await Promise.all([ada.page.waitForURL(`${svc.origin}${CONNECTIONS}/${personal.id}/revoke`), ada.page.locator(`article[data-connection="${personal.id}"] [data-revoke]`).click()]);
      assert.equal((await toolsList(personal.token)).status, 200, 'the confirmation page revokes nothing');
      await Promise.all([ada.page.waitForURL(`${svc.origin}${CONNECTIONS}`), ada.page.locator('[data-confirm-revoke]').click()]);
      // Its next call is refused.
      const after = await toolsList(personal.token);
      assert.equal(after.status, 401, after.text);
      assert.match(after.headers.get('www-authenticate')!, /^Bearer .*error="invalid_token"/);
      assert.match((await ada.page.locator('.flash').textContent())!, new RegExp(`Revoked the connection ${personal.id}`));
      assert.equal(await grantRecords(personal.grantId), 0);
      assert.equal(await svc.db.sql.one(`SELECT 1 AS x FROM oauth_records WHERE model = 'AccessToken' AND id_hash = ?`, [sha256Hex(personal.token)]), undefined);
      assert.ok((await connections()).find((c) => c.id === personal.id)!.revoked_at !== null);
      assert.equal(await ada.page.locator('details.revoked-keys article').count(), 1);
      await ada.page.locator('details.revoked-keys summary').click();
      await ada.page.screenshot({ path: path.join(shots, `connections-2-member-revoked-${database.name}.png`), fullPage: true });

      svc.clock.advance(1000);
      const olga = await member('olga', CONNECTIONS);
      await Promise.all([olga.page.waitForURL(`${svc.origin}${CONNECTIONS}/${shared.id}/revoke`), olga.page.locator(`article[data-connection="${shared.id}"] [data-revoke]`).click()]);
      await Promise.all([olga.page.waitForURL(`${svc.origin}${CONNECTIONS}`), olga.page.locator('[data-confirm-revoke]').click()]);
      assert.match((await olga.page.locator('.flash').textContent())!, /its next call is refused/);
      const revoked = await audit('connection.revoked');
      assert.deepEqual(revoked.map((r) => [r.actor_id, r.subject_id]), [[ws.members.ada, personal.id], [ws.members.olga, shared.id]]);
      const { entries } = await readAudit(svc.db.sql, ws.workspace_id, { limit: 2, actions: ['connection.revoked'] });
      assert.equal(entries[0]!.what, `revoked the MCP connection “Desk Agent” (${shared.id}) (workspace access): its tokens no longer work`);
      assert.equal(entries[1]!.what, `revoked the MCP connection “Desk Agent” (${personal.id}) (personal, acting as Ada Member): its tokens no longer work`);
      // The audit page shows them in words.
      await olga.page.goto(`${svc.origin}/settings/audit`);
      await olga.page.click('.audit-filter a:has-text("Agent connections")');
      assert.equal(await olga.page.locator('table tbody tr').count(), 4);
      assert.match((await olga.page.locator('main').textContent())!, /revoked the MCP connection “Desk Agent”/);
      await olga.page.screenshot({ path: path.join(shots, `connections-3-audit-${database.name}.png`), fullPage: true });
    });

    it('the admin CLI lists the connections and revokes one (operator in the audit log)', async () => {
      // One more, personal for Olga, approved in the browser.
      svc.clock.advance(1000);
      const olga = await member('olga');
      await consent(olga.page);
      await Promise.all([olga.page.waitForURL((u) => u.href.startsWith(REDIRECT)), olga.page.locator('[data-approve]').click()]);
      const fresh = (await connections()).find((c) => c.revoked_at === null)!;
      const list = await admin(svc.databaseUrl, 'connection', 'list', '--workspace', ws.workspace_id);
      assert.equal(list.code, 0, list.stderr);
      const rows = JSON.parse(list.stdout) as Array<Record<string, unknown>>;
      assert.equal(rows.length, 3);
      const mine = rows.find((r) => r.id === fresh.id)!;
      assert.equal(mine.access, 'personal');
      assert.equal(mine.client, 'Desk Agent');
      assert.equal(mine.state, 'active');
      assert.equal(mine.created_by, 'Olga Owner');
      assert.match(String(rows.find((r) => r.id === personal.id)!.state), /^revoked on /);
      assert.ok(!list.stdout.includes(personal.token));

      const revoke = await admin(svc.databaseUrl, 'connection', 'revoke', '--id', fresh.id);
      assert.equal(revoke.code, 0, revoke.stderr);
      assert.equal(await grantRecords(fresh.grant_id!), 0);
      const [last] = (await audit('connection.revoked')).slice(-1);
      assert.equal(last!.actor_type, 'operator');
      assert.equal(last!.subject_id, fresh.id);
      const again = await admin(svc.databaseUrl, 'connection', 'revoke', '--id', fresh.id);
      assert.equal(again.code, 1);
      assert.match(again.stderr, /is already revoked/);
      const bad = await admin(svc.databaseUrl, 'connection', 'revoke', '--id', 'nope');
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /--id must be a connection id/);
      const unknown = await admin(svc.databaseUrl, 'connection', 'list', '--workspace', 'ws_nope');
      assert.equal(unknown.code, 1);
      assert.match(unknown.stderr, /no workspace ws_nope/);
    });
  });
}
