import assert from 'node:assert/strict';
import { createClient } from '../../generated/client.ts';
import { document } from '../../generated/document.ts';
import { disableMember, revokeKey } from '../../server/admin.ts';
import { redactUrl } from '../../server/logger.ts';
import { sha256Hex } from '../../server/ids.ts';
import { createSigninLink, isLocalPath, revokeSession, SigninError } from '../../server/signin.ts';
import { acme, createPipeline } from '../support/fixtures.ts';
import { forEachDatabase, startTestService, type TestService } from '../support/service.ts';
import { admin } from '../support/cli.ts';

const MIN = 60_000;
const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0';
const SAFARI = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_0) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15';
const HOUR = 3_600_000;

/** What a member's sign-in session may call (the operations whose security lists SessionCookie). */
const SESSION_OPERATIONS = ['analytics.GetSiteAnalyticsBreakdown', 'analytics.GetSiteAnalyticsRealtime', 'analytics.GetSiteAnalyticsSummary', 'analytics.GetWorkspaceAnalyticsSummary', 'customers.CreateCompany', 'customers.CreateDeal', 'customers.CreateSalesPipeline', 'customers.DeleteCompany', 'customers.DeleteDeal', 'customers.DeleteSalesPipeline', 'customers.GetCompany', 'customers.GetDeal', 'customers.GetSalesPipeline', 'customers.ListCompanies', 'customers.ListDeals', 'customers.ListSalesPipelines', 'customers.UpdateCompany', 'customers.UpdateDeal', 'customers.UpdateSalesPipeline', 'customers.UpsertCompany', 'customers.UpsertSalesPipeline', 'documents.CompleteUpload', 'documents.CreateUpload', 'documents.GetUpload', 'documents.GetUploadPart', 'documents.ListDocuments', 'signing.CancelSigningRequest', 'signing.CreateTemplate', 'signing.DeleteTemplate', 'signing.GetSigningDocument', 'signing.GetSigningRequest', 'signing.ListSigningEvents', 'signing.ListSigningRequests', 'signing.ListTemplates', 'signing.RemindSigners', 'signing.ReplaceRecipient', 'signing.RequestFileSignatures', 'signing.SendTemplate', 'signing.UpdateSigningDeadline', 'signing.VerifySignedDocument', 'workspace.ListApps', 'workspace.ListBundles'];

const originOf = (svc: TestService) => svc.baseUrl.replace(/\/v1$/, '');

async function link(svc: TestService, ws: { workspace_id: string; members: Record<string, string> }, member = 'olga', next?: string) {
  return createSigninLink(svc.db, svc.clock, { workspaceId: ws.workspace_id, memberId: ws.members[member]!, baseUrl: originOf(svc), ...(next ? { next } : {}) });
}

/** Opens a link without following the redirect; returns the status, location, Set-Cookie and body. */
async function open(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { redirect: 'manual', headers });
  return { status: res.status, location: res.headers.get('location'), cookies: res.headers.getSetCookie(), body: await res.text(), headers: res.headers };
}

/** Signs in through a fresh link and returns the `wso_session=...` cookie pair. */
async function signIn(svc: TestService, ws: { workspace_id: string; members: Record<string, string> }, member = 'olga'): Promise<string> {
  const res = await open((await link(svc, ws, member)).url);
  assert.equal(res.status, 303, res.body);
  return res.cookies[0]!.split(';')[0]!;
}

function call(svc: TestService, operation: string, cookie: string, body: unknown = {}, headers: Record<string, string> = {}) {
  return svc.post(operation, body, { Cookie: cookie, ...headers });
}

forEachDatabase('sign-in links and member sessions', (svc) => {
  it('opens a session once: 303 to next with a strict, HttpOnly cookie; the second use is 410', async () => {
    const ws = await svc().apply(acme());
    const minted = await link(svc(), ws, 'olga', `/dashboard?site=${ws.bundles.docs}`);
    assert.match(minted.url, new RegExp(`^${originOf(svc())}/signin/[A-Za-z0-9_-]{43}$`));
    assert.equal(minted.expires_at, svc().clock.now() + 15 * MIN);
    const first = await open(minted.url);
    assert.equal(first.status, 303);
    assert.equal(first.location, `/dashboard?site=${ws.bundles.docs}`);
    assert.equal(first.cookies.length, 1);
    const [pair, ...flags] = first.cookies[0]!.split(/;\s*/);
    assert.match(pair!, /^wso_session=wss_[0-9a-z]{24}_[A-Za-z0-9_-]{43}$/);
    const expires = flags.find((f) => f.startsWith('Expires='));
    assert.equal(Date.parse(expires!.slice('Expires='.length)) - Date.now() > 43_000_000, true);
    assert.deepEqual(flags.filter((f) => f !== expires).sort(), ['HttpOnly', 'Max-Age=43200', 'Path=/', 'SameSite=Lax']);
    assert.equal(first.headers.get('cache-control'), 'no-store');
    assert.equal(first.headers.get('referrer-policy'), 'no-referrer');

    const second = await open(minted.url);
    assert.equal(second.status, 410);
    assert.match(second.headers.get('content-type')!, /^text\/html/);
    assert.match(second.body, /already used or has expired/);
    assert.match(second.body, /signin-link/);
    assert.equal(second.cookies.length, 0);
  });

  it('marks the cookie Secure only when a trusted proxy (TRUST_PROXY) says the request came over https', async () => {
    const ws = await svc().apply(acme());
    const untrusted = await open((await link(svc(), ws)).url, { 'X-Forwarded-Proto': 'https' });
    assert.equal(untrusted.status, 303);
    assert.doesNotMatch(untrusted.cookies[0]!, /Secure/);
    const proxied = await startTestService(svc().databaseUrl, { trustProxy: 'loopback' });
    try {
      const res = await open((await link(proxied, ws)).url, { 'X-Forwarded-Proto': 'https' });
      assert.equal(res.status, 303);
      assert.match(res.cookies[0]!, /; Secure/);
    } finally {
      await proxied.close({ keepData: true });
    }
  });

  it('does not use up a link on HEAD (link checkers, previews)', async () => {
    const ws = await svc().apply(acme());
    const { url } = await link(svc(), ws);
    const head = await fetch(url, { method: 'HEAD', redirect: 'manual' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.getSetCookie().length, 0);
    assert.equal((await open(url)).status, 303);
  });

  it('deletes links and sessions that ended more than a day ago when a link is minted', async () => {
    const ws = await svc().apply(acme());
    const hashOf = (url: string) => sha256Hex(url.slice(url.lastIndexOf('/') + 1));
    const unused = await link(svc(), ws);
    const cookie = await signIn(svc(), ws);
    const sessionId = `ss_${/^wso_session=wss_([0-9a-z]{24})_/.exec(cookie)![1]}`;
    await call(svc(), 'workspace.ListBundles', cookie);
    const exists = async (table: string, column: string, value: string) =>
      (await svc().db.sql.one(`SELECT 1 AS x FROM ${table} WHERE ${column} = ?`, [value])) !== undefined;
    svc().clock.advance(24 * HOUR);
    await link(svc(), ws);
    assert.equal(await exists('one_time_links', 'token_hash', hashOf(unused.url)), true, 'expired less than a day ago: kept');
    svc().clock.advance(12 * HOUR + 1);
    const fresh = await link(svc(), ws);
    assert.equal(await exists('one_time_links', 'token_hash', hashOf(unused.url)), false);
    assert.equal(await exists('member_sessions', 'id', sessionId), false);
    assert.equal(await exists('rate_limits', 'bucket', sessionId), false, "the session's rate-limit bucket went too");
    assert.equal(await exists('one_time_links', 'token_hash', hashOf(fresh.url)), true);
    assert.equal((await open(unused.url)).status, 404, 'a deleted link is unknown');
  });

  it('lets exactly one of two simultaneous uses of a link through', async () => {
    const ws = await svc().apply(acme());
    const { url } = await link(svc(), ws);
    const results = await Promise.all([open(url), open(url), open(url)]);
    assert.deepEqual(results.map((r) => r.status).sort(), [303, 410, 410]);
  });

  it('expires a link after 15 minutes (410); unknown or malformed tokens are 404', async () => {
    const ws = await svc().apply(acme());
    const early = await link(svc(), ws);
    const late = await link(svc(), ws);
    svc().clock.advance(15 * MIN - 1);
    assert.equal((await open(early.url)).status, 303, 'still valid 1 ms before expiry');
    svc().clock.advance(1);
    const expired = await open(late.url);
    assert.equal(expired.status, 410);
    assert.match(expired.body, /15 minutes/);
    const unknown = await open(`${originOf(svc())}/signin/${'A'.repeat(43)}`);
    assert.equal(unknown.status, 404);
    assert.match(unknown.body, /does not exist/);
    assert.match(unknown.body, /signin-link/);
    assert.equal((await open(`${originOf(svc())}/signin/short`)).status, 404);
  });

  it('refuses links for unknown, foreign or disabled members and next paths that leave the service', async () => {
    const ws = await svc().apply(acme());
    const other = await svc().apply(acme());
    const base = { workspaceId: ws.workspace_id, baseUrl: originOf(svc()) };
    await assert.rejects(createSigninLink(svc().db, svc().clock, { ...base, memberId: 'mb_nobody' }), SigninError);
    await assert.rejects(createSigninLink(svc().db, svc().clock, { ...base, memberId: other.members.olga! }), /no member/);
    await assert.rejects(createSigninLink(svc().db, svc().clock, { ...base, memberId: ws.members.max! }), /disabled/);
    for (const next of ['//evil.example/', 'https://evil.example/', '/\\evil.example', 'dashboard', '/a b', '/x\n']) {
      assert.equal(isLocalPath(next), false, next);
      await assert.rejects(createSigninLink(svc().db, svc().clock, { ...base, memberId: ws.members.olga!, next }), /--next/);
    }
    for (const next of ['/', '/dashboard', '/dashboard?site=bn_1&days=7', '/approve/wh_1#top']) assert.equal(isLocalPath(next), true, next);
    await assert.rejects(createSigninLink(svc().db, svc().clock, { ...base, memberId: ws.members.olga!, baseUrl: 'ftp://x' }), /--base-url/);
  });

  it("reads analytics and the workspace's sites through /v1 with the cookie, via the generated client without a key", async () => {
    const ws = await svc().apply(acme());
    const bundle = ws.bundles.docs!;
    // Traffic arrives as browsers send it, through the public collection endpoint (two browsers, one session each).
    const visit = async (userAgent: string, path: string) => {
      const res = await fetch(`${svc().origin}/v1/track`, {
        method: 'POST',
        headers: { 'Content-Type': 'text/plain;charset=UTF-8', 'User-Agent': userAgent },
        body: JSON.stringify({ key: ws.collect_keys.docs!, type: 'pageview', url: `https://docs.acme.test${path}` }),
      });
      assert.equal(res.status, 202);
    };
    await visit(FIREFOX, '/');
    svc().clock.advance(MIN);
    await visit(FIREFOX, '/pricing');
    await visit(SAFARI, '/');
    await svc().flushEndpoints();
    const cookie = await signIn(svc(), ws);
    const api = createClient({ baseUrl: svc().baseUrl, headers: { Cookie: cookie } });
    const summary = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: bundle });
    assert.equal(summary.response.status, 200, JSON.stringify(summary.error));
    assert.equal(summary.data!.pageviews, 3);
    assert.equal(summary.data!.visitors, 2);
    assert.equal(summary.data!.sessions, 2);
    assert.equal((await api.analytics.GetSiteAnalyticsRealtime({ bundle_id: bundle })).data!.visitors, 2);
    assert.deepEqual((await api.workspace.ListBundles({})).data!.items.map((b) => b.content_id), [bundle]);
    // Discovery lists what a session may call; delegation lists only the member itself.
    assert.deepEqual((await api.listOperations()).data!.items.map((o) => o.id), SESSION_OPERATIONS);
    assert.deepEqual((await api.listDelegationMembers()).data!.items, [{ id: ws.members.olga!, name: 'Olga Owner' }]);
    // Service-Act-As is not needed; naming the member itself is harmless.
    assert.equal((await call(svc(), 'workspace.ListBundles', cookie, {}, { 'Service-Act-As': ws.members.olga! })).status, 200);
  });

  it('may not call commands, other namespaces or act for another member (403)', async () => {
    const ws = await svc().apply(acme());
    const cookie = await signIn(svc(), ws);
    const list = await call(svc(), 'automation.ListRules', cookie, { app_id: 'core' });
    assert.equal(list.status, 403);
    assert.equal(list.body.error, 'forbidden');
    assert.match(list.body.message, /may not call automation\.ListRules: only operations whose security lists SessionCookie/);
    const create = await call(svc(), 'webhooks.RecoverWebhookEvents', cookie, { webhook_id: 'wh_5m2q9x7v3c5b6n1z0a2s4d8k', since: 1795507200000 }, { 'Idempotency-Key': crypto.randomUUID() });
    assert.equal(create.status, 403, JSON.stringify(create.body));
    const other = await call(svc(), 'workspace.ListBundles', cookie, {}, { 'Service-Act-As': ws.members.ada! });
    assert.equal(other.status, 403);
    // The API key path is unchanged: an Authorization header wins over the cookie.
    const withKey = await call(svc(), 'customers.ListSalesPipelines', cookie, {}, { Authorization: `Bearer ${ws.keys.ci!.secret}` });
    assert.equal(withKey.status, 200);
  });

  it("calls the documents and signing commands only with this service's Origin (403 without one or from another)", async () => {
    const file = acme();
    file.keys!.docs = { name: 'Documents', operations: ['documents.*'] };
    const ws = await svc().apply(file);
    const cookie = await signIn(svc(), ws);
    const upload = { filename: 'contract.pdf', content_type: 'application/pdf', size: 1000 };
    const bare = await call(svc(), 'documents.CreateUpload', cookie, upload, { 'Idempotency-Key': crypto.randomUUID() });
    assert.equal(bare.status, 403);
    assert.match(bare.body.message, /only from this service's pages: the request must carry an Origin header/);
    const foreign = await call(svc(), 'documents.CreateUpload', cookie, upload, { 'Idempotency-Key': crypto.randomUUID(), Origin: 'https://evil.example' });
    assert.equal(foreign.status, 403);
    const own = await call(svc(), 'documents.CreateUpload', cookie, upload, { 'Idempotency-Key': crypto.randomUUID(), Origin: originOf(svc()) });
    assert.equal(own.status, 200, JSON.stringify(own.body));
    // The session acts as its member: the upload is the member's private file unless it says private: false.
    assert.equal(own.body.private, true);
    const shared = await call(svc(), 'documents.CreateUpload', cookie, { ...upload, private: false }, { 'Idempotency-Key': crypto.randomUUID(), Origin: originOf(svc()) });
    assert.equal(shared.body.private, false);
    // Without a member, a private file is refused; a key's upload is a workspace file as before.
    const key = () => ({ Authorization: `Bearer ${ws.keys.docs!.secret}`, 'Idempotency-Key': crypto.randomUUID() });
    const keyPrivate = await svc().post('documents.CreateUpload', { ...upload, private: true }, key());
    assert.equal(keyPrivate.status, 400);
    assert.match(keyPrivate.body.message, /private: a private file is a member's own/);
    assert.equal((await svc().post('documents.CreateUpload', upload, key())).body.private, false);
    // Queries need no Origin (a GET-like read changes nothing); a cookie command other than these stays refused.
    assert.equal((await call(svc(), 'signing.ListSigningRequests', cookie, {})).status, 200);
    assert.equal((await call(svc(), 'webhooks.RecoverWebhookEvents', cookie, { webhook_id: 'wh_5m2q9x7v3c5b6n1z0a2s4d8k', since: 1795507200000 }, { 'Idempotency-Key': crypto.randomUUID(), Origin: originOf(svc()) })).status, 403);
    // The record commands the Records pages call need this service's Origin as well.
    assert.equal((await call(svc(), 'customers.CreateSalesPipeline', cookie, createPipeline(), { 'Idempotency-Key': crypto.randomUUID() })).status, 403);
    assert.equal((await call(svc(), 'customers.CreateSalesPipeline', cookie, createPipeline(), { 'Idempotency-Key': crypto.randomUUID(), Origin: originOf(svc()) })).status, 200);
  });

  it('may call exactly the operations whose security in the document lists SessionCookie', async () => {
    const ws = await svc().apply(acme());
    const cookie = await signIn(svc(), ws);
    const rootSecurity = (document as { security: object[] }).security;
    const listedOps = Object.entries(document.paths as Record<string, Record<string, { operationId: string; security?: object[]; 'x-service-listed'?: boolean; 'x-service-kind': string }>>)
      .flatMap(([, item]) => Object.values(item))
      .filter((op) => op['x-service-kind'] !== 'collection' && op['x-service-listed'] !== false);
    const allowed = listedOps.filter((op) => (op.security ?? rootSecurity).some((req) => 'SessionCookie' in req)).map((op) => op.operationId).sort();
    assert.deepEqual(allowed, SESSION_OPERATIONS);
    for (const op of listedOps) {
      const kind = op['x-service-kind'];
      const res = await call(svc(), op.operationId, cookie, {}, kind === 'command' ? { 'Idempotency-Key': crypto.randomUUID(), Origin: originOf(svc()) } : {});
      // An empty body may be invalid (400: the request is checked before the grant); what matters
      // is that an allowed operation is never refused for the credential, and no other one runs.
      if (allowed.includes(op.operationId)) assert.notEqual(res.status, 403, op.operationId);
      else assert.ok(res.status === 403 || res.status === 400, `${op.operationId}: ${res.status}`);
    }
    // Discovery lists the same operations for the session.
    const discovery = await fetch(`${svc().baseUrl}/operations`, { headers: { Cookie: cookie, Origin: originOf(svc()) } });
    assert.deepEqual(((await discovery.json()) as { items: Array<{ id: string }> }).items.map((i) => i.id).sort(), allowed);
  });

  it('ends the session when its member is disabled, it is revoked or 12 h pass (401), not when other members or keys change', async () => {
    const ws = await svc().apply(acme());
    const ada = await signIn(svc(), ws, 'ada');
    const olga = await signIn(svc(), ws, 'olga');
    assert.equal((await call(svc(), 'workspace.ListBundles', ada)).status, 200);
    await disableMember(svc().db, svc().clock, ws.members.ada!);
    const refused = await call(svc(), 'workspace.ListBundles', ada);
    assert.equal(refused.status, 401);
    assert.equal(refused.body.error, 'invalid_key');
    assert.match(refused.body.message, /sign-in link/);
    // Olga's session is her own: another member disabled, or a key revoked, does not end it (test/platform/sessions.test.ts).
    assert.equal((await call(svc(), 'workspace.ListBundles', olga)).status, 200);
    await revokeKey(svc().db, svc().clock, ws.keys.reader!.id);
    assert.equal((await call(svc(), 'workspace.ListBundles', olga)).status, 200, 'keys keep their own revocation rule');

    const fresh = await signIn(svc(), ws, 'olga');
    const sessionId = `ss_${/^wso_session=wss_([0-9a-z]{24})_/.exec(fresh)![1]}`;
    assert.deepEqual(await revokeSession(svc().db, svc().clock, { id: sessionId }), { revoked: 1 });
    assert.equal((await call(svc(), 'workspace.ListBundles', fresh)).status, 401);

    const timed = await signIn(svc(), ws, 'olga');
    svc().clock.advance(12 * HOUR - 1);
    assert.equal((await call(svc(), 'workspace.ListBundles', timed)).status, 200);
    svc().clock.advance(1);
    assert.equal((await call(svc(), 'workspace.ListBundles', timed)).status, 401);
    // A forged secret for a live session id is refused too.
    const live = await signIn(svc(), ws, 'olga');
    const forged = live.slice(0, -4) + (live.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    assert.equal((await call(svc(), 'workspace.ListBundles', forged)).status, 401);
    assert.equal((await call(svc(), 'workspace.ListBundles', live)).status, 200);
  });

  it('refuses cookie requests from a foreign Origin (403) and accepts its own', async () => {
    const ws = await svc().apply(acme());
    const cookie = await signIn(svc(), ws);
    const foreign = await call(svc(), 'workspace.ListBundles', cookie, {}, { Origin: 'https://evil.example' });
    assert.equal(foreign.status, 403);
    assert.match(foreign.body.message, /Origin/);
    assert.equal((await call(svc(), 'workspace.ListBundles', cookie, {}, { Origin: 'null' })).status, 403);
    assert.equal((await call(svc(), 'workspace.ListBundles', cookie, {}, { Origin: originOf(svc()) })).status, 200);
    // Keys are not browser credentials: Origin does not matter to them.
    assert.equal((await svc().post('workspace.ListBundles', {}, { Authorization: `Bearer ${ws.keys.ci!.secret}`, Origin: 'https://evil.example' })).status, 200);
  });

  it('compares Origin with the host a trusted proxy forwarded (X-Forwarded-Host), not the rewritten Host', async () => {
    const ws = await svc().apply(acme());
    const proxied = await startTestService(svc().databaseUrl, { trustProxy: 'loopback' });
    try {
      const cookie = await signIn(proxied, ws);
      const behindProxy = { Cookie: cookie, Origin: 'https://ops.example.com', 'X-Forwarded-Host': 'ops.example.com', 'X-Forwarded-Proto': 'https' };
      assert.equal((await proxied.post('workspace.ListBundles', {}, behindProxy)).status, 200);
      assert.equal((await proxied.post('workspace.ListBundles', {}, { ...behindProxy, Origin: 'https://evil.example' })).status, 403);
    } finally {
      await proxied.close({ keepData: true });
    }
    // Without TRUST_PROXY the forwarded host is not believed.
    const cookie = await signIn(svc(), ws);
    assert.equal((await call(svc(), 'workspace.ListBundles', cookie, {}, { Origin: 'https://ops.example.com', 'X-Forwarded-Host': 'ops.example.com' })).status, 403);
  });

  it('serves the dashboard only with a session (401 page pointing to /signin); sign-out ends the session', async () => {
    const ws = await svc().apply(acme());
    const anonymous = await fetch(`${originOf(svc())}/dashboard`);
    assert.equal(anonymous.status, 401);
    const page = await anonymous.text();
    assert.match(page, /Sign in with your e-mail address/);
    assert.match(page, /href="\/signin\?next=%2Fdashboard"/);
    assert.doesNotMatch(page, /npm run admin/);
    const cookie = await signIn(svc(), ws);
    const dash = await fetch(`${originOf(svc())}/dashboard?site=${ws.bundles.docs}`, { headers: { Cookie: cookie } });
    assert.equal(dash.status, 200);
    assert.match(dash.headers.get('content-security-policy')!, /script-src 'self'/);
    const html = await dash.text();
    assert.match(html, /data-member="Olga Owner"/);
    // The frame's sign-out form carries the page's CSRF token.
    const csrf = /<form method="post" action="\/signout" class="inline signout"><input type="hidden" name="_csrf" value="([^"]+)"/.exec(html)![1]!;
    const csrfCookie = dash.headers.getSetCookie().find((c) => c.startsWith('wso_csrf='))!.split(';')[0]!;
    const signout = (body: string, headers: Record<string, string>) =>
      fetch(`${originOf(svc())}/signout`, { method: 'POST', redirect: 'manual', headers: { 'Content-Type': 'application/x-www-form-urlencoded', ...headers }, body });
    // Without the page's token, or from another origin, nothing is ended.
    assert.equal((await signout('', { Cookie: `${cookie}; ${csrfCookie}` })).status, 403);
    assert.equal((await signout(`_csrf=${encodeURIComponent(csrf)}`, { Cookie: `${cookie}; ${csrfCookie}`, Origin: 'https://evil.example' })).status, 403);
    assert.equal((await call(svc(), 'workspace.ListBundles', cookie)).status, 200);
    const out = await signout(`_csrf=${encodeURIComponent(csrf)}`, { Cookie: `${cookie}; ${csrfCookie}`, Origin: originOf(svc()) });
    assert.equal(out.status, 303, 'post/redirect/get');
    assert.equal(out.headers.get('location'), '/signout');
    assert.match(out.headers.getSetCookie()[0]!, /^wso_session=; Path=\/; Expires=Thu, 01 Jan 1970/);
    assert.equal((await call(svc(), 'workspace.ListBundles', cookie)).status, 401);
    const after = await fetch(`${originOf(svc())}/signout`);
    assert.equal(after.status, 200);
    assert.match(await after.text(), /<h1>Signed out<\/h1>/);
  });

  it('keeps link tokens and session secrets out of the logs', async () => {
    const ws = await svc().apply(acme());
    const logged = (svc().logs().match(/\/signin\/\[redacted\]/gi) ?? []).length;
    const { url } = await link(svc(), ws);
    const token = url.slice(url.lastIndexOf('/') + 1);
    const res = await open(url);
    const secret = res.cookies[0]!.split(';')[0]!.slice('wso_session='.length);
    await call(svc(), 'workspace.ListBundles', `wso_session=${secret}`);
    await open(url);
    await open(url.replace('/signin/', '/SIGNIN/'));
    // The request line is written when the response finishes, which may be just after the client has it.
    for (let i = 0; i < 50 && (svc().logs().match(/\/signin\/\[redacted\]/gi) ?? []).length < logged + 3; i++) await new Promise((r) => setTimeout(r, 20));
    const logs = svc().logs();
    assert.ok(!logs.includes(token), 'a sign-in token reached the logs');
    // wss_<24-char id>_<43-char random>: the random part may itself contain '_'.
    assert.ok(!logs.includes(secret.slice('wss_'.length + 24 + 1)), 'a session secret reached the logs');
    const lines = logs.trim().split('\n').map((l) => JSON.parse(l));
    assert.ok(lines.some((l) => l.req?.url === '/signin/[redacted]' && l.res.statusCode === 303));
    const sessionId = `ss_${secret.slice(4, 28)}`;
    assert.ok(lines.some((l) => l.session === sessionId && l.operation === 'workspace.ListBundles' && l.key === undefined));
    assert.equal(redactUrl('/SignIn/abc?x=1'), '/signin/[redacted]');
    assert.equal(redactUrl('//signin%2Fabc'), '/signin/[redacted]');
    // However the path is spelled, a router would match /signin/<token>: the token never reaches the log.
    assert.equal(redactUrl('/sign%69n/abc'), '/signin/[redacted]');
    assert.equal(redactUrl('/v1/../signin/abc'), '/signin/[redacted]');
    assert.equal(redactUrl('/./signin/./abc'), '/signin/[redacted]');
    assert.equal(redactUrl('/files/parts/abc', ['/signin/', '/files/']), '/files/[redacted]');
    assert.equal(redactUrl('/FILES/abc', ['/signin/', '/files/']), '/files/[redacted]');
    assert.equal(redactUrl('/signin%zz/abc'), '[undecodable url]');
    assert.equal(redactUrl('/v1/operations/x'), '/v1/operations/x');
    assert.equal(redactUrl('/signing/x'), '/signing/x');
    // The sign-in form itself carries no token.
    assert.equal(redactUrl('/signin'), '/signin');
    assert.equal(redactUrl('/signin?next=%2Fdashboard'), '/signin?next=%2Fdashboard');
  });

  it('prints a link from the CLI (npm run admin -- signin-link), with readable refusals', async function () {
    this.timeout(90_000);
    // The CLI runs on the system clock.
    svc().clock.set(Date.now());
    const ws = await svc().apply(acme());
    const run = (...args: string[]) => admin(svc().databaseUrl, ...args);
    const ok = await run('signin-link', '--workspace', ws.workspace_id, '--member', ws.members.bob!, '--next', `/dashboard?site=${ws.bundles.docs}`, '--base-url', originOf(svc()));
    assert.equal(ok.code, 0, ok.stderr);
    const printed = JSON.parse(ok.stdout) as { url: string; member_id: string; next: string };
    assert.equal(printed.member_id, ws.members.bob);
    assert.equal(printed.next, `/dashboard?site=${ws.bundles.docs}`);
    const opened = await open(printed.url);
    assert.equal(opened.status, 303);
    assert.equal(opened.location, `/dashboard?site=${ws.bundles.docs}`);
    const bad = await run('signin-link', '--workspace', ws.workspace_id, '--member', ws.members.bob!, '--next', '//evil.example');
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^admin: --next must be a path on this service/);
    const revoked = await run('session', 'revoke', '--member', ws.members.bob!);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.deepEqual(JSON.parse(revoked.stdout), { revoked: 1 });
  });
});

forEachDatabase(
  'member sessions are rate-limited like keys',
  (svc) => {
    it('shares the GCRA budget per session: the burst, then 429 with Retry-After', async () => {
      const ws = await svc().apply(acme());
      const res = await open((await link(svc(), ws)).url);
      const cookie = res.cookies[0]!.split(';')[0]!;
      assert.equal((await call(svc(), 'workspace.ListBundles', cookie)).status, 200);
      assert.equal((await call(svc(), 'workspace.ListBundles', cookie)).status, 200);
      const limited = await call(svc(), 'workspace.ListBundles', cookie);
      assert.equal(limited.status, 429);
      assert.equal(limited.headers.get('retry-after'), '1');
      svc().clock.advance(1000);
      assert.equal((await call(svc(), 'workspace.ListBundles', cookie)).status, 200);
      // Another session of the same member has its own budget.
      const other = await open((await link(svc(), ws)).url);
      assert.equal((await call(svc(), 'workspace.ListBundles', other.cookies[0]!.split(';')[0]!)).status, 200);
    });
  },
  { rateLimitPerSecond: 1, rateLimitBurst: 2 },
);
