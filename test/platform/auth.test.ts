import zlib from 'node:zlib';
import assert from 'node:assert/strict';
import net from 'node:net';
import { disableMember, replaceKey, revokeKey } from '../../server/admin.ts';
import { acme, createPipeline } from '../support/fixtures.ts';
import { forEachDatabase, startTestService } from '../support/service.ts';

/** Sends `head` as it is over a new connection (requests fetch will not make) and returns the whole answer. */
async function rawRequest(origin: string, head: string): Promise<string> {
  const { hostname, port } = new URL(origin);
  const socket = net.connect(Number(port), hostname);
  let answer = '';
  socket.on('data', (d) => (answer += d));
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(head);
  await new Promise((resolve) => socket.once('close', resolve));
  return answer;
}

forEachDatabase('API keys, grants and discovery', (svc) => {
  it('lists exactly the operations a key may call, with their catalogue fields', async () => {
    const ws = await svc().apply(acme());
    const ci = (await svc().client(ws.keys.ci!.secret).listOperations()).data!;
    assert.deepEqual(ci.items.map((o) => o.id), [
      'customers.CreateSalesPipeline',
      'customers.DeleteSalesPipeline',
      'customers.GetSalesPipeline',
      'customers.ListSalesPipelines',
      'customers.UpdateSalesPipeline',
      'customers.UpsertSalesPipeline',
      'workspace.ListApps',
      'workspace.ListBundles',
    ]);
    assert.deepEqual(ci.items.find((o) => o.id === 'customers.UpdateSalesPipeline'), {
      id: 'customers.UpdateSalesPipeline',
      kind: 'command',
      contract_version: 1,
      workspace_supported: true,
      deprecated: false,
      act_as: 'optional',
      resource: 'core:SalesPipeline',
      access: ['read', 'write'],
    });
    assert.equal(ci.items.find((o) => o.id === 'workspace.ListBundles')!.resource, undefined);
    // The reader key holds the UpdateSalesPipeline grant but only read access: it may not call it, so it is not listed.
    const reader = (await svc().client(ws.keys.reader!.secret).listOperations()).data!;
    assert.deepEqual(reader.items.map((o) => o.id), ['customers.GetSalesPipeline', 'customers.ListSalesPipelines']);
    const bare = (await svc().client(ws.keys.bare!.secret).listOperations()).data!;
    assert.deepEqual(bare.items, []);
  });

  it('refuses calls outside the operation or resource grants with 403', async () => {
    const ws = await svc().apply(acme());
    const reader = svc().client(ws.keys.reader!.secret);
    const create = await reader.customers.CreateSalesPipeline(createPipeline());
    assert.equal(create.response.status, 403);
    assert.equal(create.error!.error, 'forbidden');
    assert.match(create.error!.message, /not granted customers\.CreateSalesPipeline/);
    const update = await reader.customers.UpdateSalesPipeline({ id: 'pl_x', data: { name: 'x' } });
    assert.equal(update.response.status, 403);
    assert.match(update.error!.message, /lacks write access on core:SalesPipeline/);
    assert.equal((await reader.customers.ListSalesPipelines({})).response.status, 200);
    const bare = svc().client(ws.keys.bare!.secret);
    assert.equal((await bare.workspace.ListBundles({})).response.status, 403);
    assert.equal((await bare.listDelegationMembers()).response.status, 200, 'discovery needs no grant');
  });

  it('rejects missing, malformed, unknown and wrong-secret keys with 401', async () => {
    const ws = await svc().apply(acme());
    const secret = ws.keys.ci!.secret;
    const tampered = secret.slice(0, -4) + (secret.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    const missing = 'No API key: send the header Authorization: Bearer <API key> (a workspace key, wso_...).';
    const malformed = 'The Authorization header must be exactly "Bearer <API key>", with a workspace key (wso_<24 characters>_<43 characters>).';
    const unknown = 'The API key is unknown or revoked.';
    const cases: Array<[string | undefined, string]> = [
      [undefined, missing],
      ['', missing],
      ['Bearer', malformed],
      [`Basic ${secret}`, malformed],
      [`Bearer ${secret} extra`, malformed],
      [`Bearer ${tampered}`, unknown],
      ['Bearer wso_aaaaaaaaaaaaaaaaaaaaaaaa_' + 'x'.repeat(43), unknown],
    ];
    for (const [auth, message] of cases) {
      const res = await svc().post('workspace.ListBundles', {}, auth === undefined ? {} : { Authorization: auth });
      assert.equal(res.status, 401, String(auth));
      assert.deepEqual(res.body, { error: 'invalid_key', message, request_id: res.headers.get('request-id') });
      assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="workspace-operations"');
    }
  });

  it('teaches: a wrong method is 405 with Allow, an unknown operation names the nearest one, an enum error lists the values', async () => {
    const ws = await svc().apply(acme());
    const auth = { Authorization: `Bearer ${ws.keys.ci!.secret}` };
    const get = await fetch(`${svc().baseUrl}/operations/workspace.ListBundles`, { headers: auth });
    assert.equal(get.status, 405);
    assert.equal(get.headers.get('allow'), 'POST');
    assert.deepEqual(await get.json(), { error: 'method_not_allowed', message: '/operations/workspace.ListBundles is called with POST, not GET.', request_id: get.headers.get('request-id') });
    const post = await fetch(`${svc().baseUrl}/operations`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: '{}' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get('allow'), 'GET');
    const typo = await svc().post('customers.ListSalesPipeline', {}, auth);
    assert.equal(typo.status, 404);
    assert.match(typo.body.message, /Did you mean customers\.ListSalesPipelines\?/);
    const lower = await svc().post('workspace.listbundles', {}, auth);
    assert.match(lower.body.message, /Did you mean workspace\.ListBundles\?/);
    const far = await svc().post('nothing.LikeThis', {}, auth);
    assert.equal(far.status, 404);
    assert.doesNotMatch(far.body.message, /Did you mean/);
    // Without a key the route is not revealed: 401 first.
    assert.equal((await fetch(`${svc().baseUrl}/operations/workspace.ListBundles`)).status, 401);
    const bundle = ws.bundles.docs!;
    const enumError = await svc().post('analytics.GetSiteAnalyticsBreakdown', { bundle_id: bundle, dimension: 'pages' }, { Authorization: `Bearer ${ws.keys.ci!.secret}` });
    assert.equal(enumError.status, 400);
    assert.match(enumError.body.message, /body\.dimension must be one of "page", "entry_page", "source", "referrer", "campaign", "country", "device", "browser", "os"/);
  });

  it('reads gzip, deflate and br bodies, as body-parser did, and refuses other encodings and broken data (400)', async () => {
    const ws = await svc().apply(acme());
    const headers = { Authorization: `Bearer ${ws.keys.ci!.secret}`, 'Content-Type': 'application/json' };
    const body = Buffer.from(JSON.stringify({ limit: 5 }));
    const send = (encoding: string, data: Buffer) =>
      fetch(`${svc().baseUrl}/operations/customers.ListSalesPipelines`, { method: 'POST', headers: { ...headers, 'Content-Encoding': encoding }, body: new Uint8Array(data) });
    for (const [encoding, data] of [['gzip', zlib.gzipSync(body)], ['deflate', zlib.deflateSync(body)], ['br', zlib.brotliCompressSync(body)]] as const) {
      assert.equal((await send(encoding, data)).status, 200, encoding);
    }
    const unknown = await send('compress', body);
    assert.equal(unknown.status, 400);
    assert.equal(((await unknown.json()) as { error: string }).error, 'invalid_json');
    const broken = await send('gzip', body);
    assert.equal(broken.status, 400);
    assert.deepEqual(await broken.json(), { error: 'invalid_json', message: 'The body is not valid gzip data.', request_id: broken.headers.get('request-id') });
    const bomb = await send('gzip', zlib.gzipSync(Buffer.from(JSON.stringify({ pad: ' '.repeat(2 * 1024 * 1024) }))));
    assert.equal(bomb.status, 413);
    assert.match(((await bomb.json()) as { message: string }).message, /larger than 1 MB/);
  });

  it('says the body is missing when Content-Type is JSON but nothing (or only blanks) came (400 invalid_json)', async () => {
    const ws = await svc().apply(acme());
    const auth = `Bearer ${ws.keys.ci!.secret}`;
    const missing = 'The body is missing: send a JSON object ({} when there is nothing to say).';
    const send = async (headers: Record<string, string>, body?: string) => {
      const res = await fetch(`${svc().baseUrl}/operations/customers.ListSalesPipelines`, { method: 'POST', headers: { Authorization: auth, ...headers }, ...(body === undefined ? {} : { body }) });
      return { status: res.status, body: (await res.json()) as { error: string; message: string } };
    };
    for (const [why, headers, body] of [
      ['Content-Length: 0', { 'Content-Type': 'application/json' }, undefined],
      ['blanks', { 'Content-Type': 'application/json; charset=utf-8' }, ' \n '],
    ] as const) {
      const res = await send(headers, body);
      assert.deepEqual([res.status, res.body.error, res.body.message], [400, 'invalid_json', missing], why);
    }
    // Neither Content-Length nor Transfer-Encoding: no body at all (what fetch cannot send).
    const raw = await rawRequest(svc().origin, `POST /v1/operations/customers.ListSalesPipelines HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n`);
    assert.match(raw, /^HTTP\/1\.1 400 /);
    assert.ok(raw.includes(`"message":"${missing}"`), raw);
    const text = await send({ 'Content-Type': 'text/plain' }, '{}');
    assert.deepEqual([text.status, text.body.error, text.body.message], [400, 'invalid_json', 'Content-Type must be application/json.']);
    const untyped = await rawRequest(svc().origin, `POST /v1/operations/customers.ListSalesPipelines HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nConnection: close\r\n\r\n`);
    assert.ok(untyped.includes('"message":"Content-Type must be application/json."'), untyped);
  });

  it('marks every /v1 answer nosniff and no-store, errors included (the document may be cached); no HSTS over plain http', async () => {
    const ws = await svc().apply(acme());
    const auth = { Authorization: `Bearer ${ws.keys.ci!.secret}`, 'Content-Type': 'application/json', 'X-Forwarded-Proto': 'https' };
    const op = (name: string, init: RequestInit = {}) => fetch(`${svc().baseUrl}/operations/${name}`, { method: 'POST', headers: auth, body: '{}', ...init });
    const answers: Array<[number, Promise<Response>]> = [
      [200, op('workspace.ListBundles')],
      [200, fetch(`${svc().baseUrl}/operations`, { headers: auth })],
      [400, op('workspace.ListBundles?page=2')],
      [401, fetch(`${svc().baseUrl}/operations/workspace.ListBundles`, { method: 'POST' })],
      [403, op('customers.ListCompanies')],
      [404, op('workspace.ListBundlez')],
      [404, op('customers.UpdateSalesPipeline', { headers: { ...auth, 'Idempotency-Key': 'k' }, body: JSON.stringify({ id: 'pl_missing', data: { name: 'x' } }) })],
      [405, fetch(`${svc().baseUrl}/operations/workspace.ListBundles`, { headers: auth })],
    ];
    for (const [status, pending] of answers) {
      const res = await pending;
      assert.equal(res.status, status, res.url);
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff', `${status} ${res.url}`);
      assert.equal(res.headers.get('cache-control'), 'no-store', `${status} ${res.url}`);
      assert.equal(res.headers.get('strict-transport-security'), null, 'no TRUST_PROXY: X-Forwarded-Proto is not believed');
    }
    const doc = await fetch(`${svc().baseUrl}/openapi.json`);
    assert.deepEqual([doc.headers.get('x-content-type-options'), doc.headers.get('cache-control')], ['nosniff', 'public, max-age=300']);
  });

  it('sends HSTS for one year behind a trusted proxy when the request came over https', async () => {
    const proxied = await startTestService(svc().databaseUrl, { trustProxy: 'loopback' });
    try {
      for (const [url, proto, hsts] of [
        [`${proxied.baseUrl}/operations`, 'https', 'max-age=31536000'],
        [`${proxied.origin}/healthz`, 'https', 'max-age=31536000'],
        [`${proxied.baseUrl}/operations`, 'http', null],
      ] as const) {
        const res = await fetch(url, { headers: { 'X-Forwarded-Proto': proto } });
        assert.equal(res.headers.get('strict-transport-security'), hsts, `${proto} ${url}`);
      }
    } finally {
      await proxied.close({ keepData: true });
    }
  });

  it('stops a revoked key on its next request; a replacement works alongside until then', async () => {
    const ws = await svc().apply(acme());
    const old = svc().client(ws.keys.ci!.secret);
    assert.equal((await old.workspace.ListBundles({})).response.status, 200);
    const replacement = await replaceKey(svc().db, svc().clock, ws.keys.ci!.id);
    const fresh = svc().client(replacement.secret);
    assert.equal((await fresh.workspace.ListBundles({})).response.status, 200);
    assert.equal((await old.workspace.ListBundles({})).response.status, 200);
    assert.deepEqual(
      (await fresh.listOperations()).data!.items.map((o) => o.id),
      (await old.listOperations()).data!.items.map((o) => o.id),
      'same grants',
    );
    assert.deepEqual((await fresh.listDelegationMembers()).data, (await old.listDelegationMembers()).data, 'same delegation');
    await revokeKey(svc().db, svc().clock, ws.keys.ci!.id);
    const refused = await old.workspace.ListBundles({});
    assert.equal(refused.response.status, 401);
    assert.equal(refused.error!.error, 'invalid_key');
    assert.equal((await fresh.workspace.ListBundles({})).response.status, 200);
  });
});

forEachDatabase('member delegation', (svc) => {
  it('lists the active members inside the delegation grant (none, selected, all)', async () => {
    const ws = await svc().apply(acme());
    const selected = (await svc().client(ws.keys.ci!.secret).listDelegationMembers()).data!;
    assert.deepEqual(selected.items, [
      { id: ws.members.ada!, name: 'Ada Member' },
      { id: ws.members.olga!, name: 'Olga Owner' },
    ]);
    const all = (await svc().client(ws.keys.all!.secret).listDelegationMembers()).data!;
    assert.deepEqual(all.items.map((m) => m.name), ['Ada Member', 'Bob Admin', 'Olga Owner']);
    const none = (await svc().client(ws.keys.reader!.secret).listDelegationMembers()).data!;
    assert.deepEqual(none.items, []);
  });

  it('refuses Service-Act-As for members outside the grant, disabled, unknown or of another workspace', async () => {
    const ws = await svc().apply(acme());
    const other = await svc().apply(acme());
    const cases: Array<[string, string, string]> = [
      ['not delegated', ws.keys.ci!.secret, ws.members.bob!],
      ['disabled', ws.keys.ci!.secret, ws.members.max!],
      ['unknown', ws.keys.ci!.secret, 'mb_doesnotexist'],
      ['other workspace', ws.keys.all!.secret, other.members.olga!],
      ['key without delegation', ws.keys.reader!.secret, ws.members.olga!],
    ];
    for (const [why, secret, member] of cases) {
      const res = await svc().client(secret, member).customers.ListSalesPipelines({});
      assert.equal(res.response.status, 403, why);
      assert.equal(res.error!.error, 'forbidden', why);
    }
    assert.equal((await svc().client(ws.keys.ci!.secret, ws.members.ada).customers.ListSalesPipelines({})).response.status, 200);
  });

  it('"all" covers members added later; disabling a member takes effect on the next request', async () => {
    const ws = await svc().apply(acme());
    const newcomer = `mb_new${ws.workspace_id.slice(3)}`;
    await svc().db.sql.run(`INSERT INTO members (id, workspace_id, name, email, role, created_at) VALUES (?, ?, ?, ?, ?, ?)`, [newcomer, ws.workspace_id, 'Nina New', 'nina@acme.test', 'member', 1]);
    await svc().db.sql.run(`UPDATE workspaces SET auth_version = auth_version + 1 WHERE id = ?`, [ws.workspace_id]);
    const nina = svc().client(ws.keys.all!.secret, newcomer);
    assert.equal((await nina.customers.ListSalesPipelines({})).response.status, 200);
    const ada = svc().client(ws.keys.all!.secret, ws.members.ada);
    assert.equal((await ada.customers.ListSalesPipelines({})).response.status, 200);
    await disableMember(svc().db, svc().clock, ws.members.ada!);
    assert.equal((await ada.customers.ListSalesPipelines({})).response.status, 403);
    assert.ok(!(await svc().client(ws.keys.all!.secret).listDelegationMembers()).data!.items.some((m) => m.id === ws.members.ada));
  });

  it('uses workspace access without the header, even on a delegating key', async () => {
    const ws = await svc().apply(acme());
    const ada = svc().client(ws.keys.ci!.secret, ws.members.ada);
    await ada.customers.CreateSalesPipeline({ data: { name: 'Ada private' }, private: true });
    const workspace = svc().client(ws.keys.ci!.secret);
    const created = (await workspace.customers.CreateSalesPipeline(createPipeline('Shared'))).data!.item;
    assert.equal(created.created_by, null);
    assert.deepEqual((await workspace.customers.ListSalesPipelines({})).data!.items.map((p) => p.data.name), ['Shared']);
  });
});
