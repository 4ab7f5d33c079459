/**
 * API keys from the operator's side (server/admin.ts, handlers/keys/admin.ts), on both databases: the
 * audit entries of the admin functions (workspace.created once per file, member.added, member.disabled,
 * key.created / revoked / replaced with the operator as actor, never a secret), the workspace file's
 * `workspace: {api_keys: off}`, and the CLI's `workspace api-keys` and `key delegation` from another
 * process (effective on the next request).
 */
import assert from 'node:assert/strict';
import { AdminError, addToWorkspace, createKey, disableMember, replaceKey, revokeKey } from '../../server/admin.ts';
import { admin } from '../support/cli.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

forEachDatabase('API keys: operator functions and CLI', (svc) => {
  const entries = (workspaceId: string) =>
    svc().db.sql.all<{ action: string; actor_type: string; subject_type: string | null; subject_id: string | null; details: string }>(
      `SELECT action, actor_type, subject_type, subject_id, details FROM audit_log WHERE workspace_id = ? ORDER BY at, action, id`,
      [workspaceId],
    );

  it('records workspace.created once for a file, then member.added, key.created, key.replaced, key.revoked and member.disabled with the operator as actor, never a secret', async () => {
    const ws = await svc().apply(acme());
    const created = await entries(ws.workspace_id);
    assert.deepEqual(created.map((e) => e.action), ['workspace.created']);
    assert.deepEqual(JSON.parse(created[0]!.details), { name: 'Acme', api_keys: 'on', members: 4, sites: 1, apps: 1, keys: 5 });

    svc().clock.advance(1000);
    const added = await addToWorkspace(svc().db, svc().clock, ws.workspace_id, {
      members: { nina: { name: 'Nina', email: 'nina@acme.test', role: 'member' } },
      keys: { k: { name: 'Nina’s key', operations: ['customers.ListSalesPipelines'], delegation: ['nina'] } },
    });
    svc().clock.advance(1000);
    const replaced = await replaceKey(svc().db, svc().clock, added.keys.k!.id);
    svc().clock.advance(1000);
    await revokeKey(svc().db, svc().clock, added.keys.k!.id);
    svc().clock.advance(1000);
    await disableMember(svc().db, svc().clock, added.members.nina!);
    const all = await entries(ws.workspace_id);
    assert.deepEqual(all.map((e) => e.action), ['workspace.created', 'key.created', 'member.added', 'key.replaced', 'key.revoked', 'member.disabled']);
    assert.ok(all.every((e) => e.actor_type === 'operator'));
    const key = all.find((e) => e.action === 'key.created')!;
    assert.equal(key.subject_id, added.keys.k!.id);
    assert.deepEqual(JSON.parse(key.details), { name: 'Nina’s key', operations: ['customers.ListSalesPipelines'], resources: {}, delegation: [added.members.nina] });
    assert.equal(all.find((e) => e.action === 'key.replaced')!.subject_id, replaced.id);
    assert.equal(JSON.parse(all.find((e) => e.action === 'key.replaced')!.details).replaces, added.keys.k!.id);
    const text = JSON.stringify(all);
    assert.ok(!text.includes(added.keys.k!.secret) && !text.includes(replaced.secret));
  });

  it('refuses unknown grants, members and empty names readably, and keys in a file that turns API keys off', async () => {
    const ws = await svc().apply(acme());
    const refused = (re: RegExp) => (err: Error) => err instanceof AdminError && re.test(err.message);
    await assert.rejects(createKey(svc().db, svc().clock, ws.workspace_id, { name: ' ', operations: ['customers.*'] }), refused(/give the key a name/));
    await assert.rejects(createKey(svc().db, svc().clock, ws.workspace_id, { name: 'x', operations: ['customers.Nope'] }), refused(/unknown operation "customers\.Nope"/));
    await assert.rejects(createKey(svc().db, svc().clock, ws.workspace_id, { name: 'x', operations: [], delegation: ['mb_nobody'] }), refused(/no member mb_nobody in this workspace/));
    await assert.rejects(createKey(svc().db, svc().clock, ws.workspace_id, { name: 'x', operations: [], resources: { 'core:Nope': ['read'] } }), refused(/unknown resource type "core:Nope"/));
    const other = await svc().apply(acme());
    await assert.rejects(revokeKey(svc().db, svc().clock, other.keys.ci!.id, { workspaceId: ws.workspace_id }), refused(/no API key/));

    await assert.rejects(svc().apply({ workspace: { name: 'Off', api_keys: 'off' }, keys: { k: { name: 'k', operations: [] } } }), refused(/turns API keys off/));
    const off = await svc().apply({ workspace: { name: 'Off', api_keys: 'off' } });
    const row = await svc().db.sql.one<{ api_key_access: string }>(`SELECT api_key_access FROM workspaces WHERE id = ?`, [off.workspace_id]);
    assert.equal(row!.api_key_access, 'off');
    await assert.rejects(createKey(svc().db, svc().clock, off.workspace_id, { name: 'k', operations: [] }), refused(/the operator has not turned API keys on for this workspace/));
  });

  it('the CLI stops, turns off and on a workspace’s API keys and changes a key’s delegation, from another process', async function () {
    this.timeout(60_000);
    const ws = await svc().apply(acme());
    const reader = svc().client(ws.keys.reader!.secret);
    const stop = await admin(svc().databaseUrl, 'workspace', 'api-keys', '--workspace', ws.workspace_id, '--stop');
    assert.equal(stop.code, 0, stop.stderr);
    const refused = await reader.customers.ListSalesPipelines({});
    assert.equal(refused.response.status, 403);
    assert.match(refused.error!.message, /API keys are stopped for this workspace/);

    const both = await admin(svc().databaseUrl, 'workspace', 'api-keys', '--workspace', ws.workspace_id, '--on', '--off');
    assert.equal(both.code, 1);
    assert.match(both.stderr, /give exactly one of --on, --off or --stop/);
    const off = await admin(svc().databaseUrl, 'workspace', 'api-keys', '--workspace', ws.workspace_id, '--off');
    assert.equal(off.code, 0, off.stderr);
    assert.equal((await reader.customers.ListSalesPipelines({})).response.status, 200);
    const create = await admin(svc().databaseUrl, 'key', 'create', '--workspace', ws.workspace_id, '--name', 'x', '--operations', 'customers.*');
    assert.equal(create.code, 1);
    assert.match(create.stderr, /the operator has not turned API keys on for this workspace/);

    const asAda = svc().client(ws.keys.reader!.secret, ws.members.ada!);
    assert.equal((await asAda.customers.ListSalesPipelines({})).response.status, 403);
    const delegated = await admin(svc().databaseUrl, 'key', 'delegation', '--id', ws.keys.reader!.id, '--to', ws.members.ada!);
    assert.equal(delegated.code, 0, delegated.stderr);
    assert.equal((await asAda.customers.ListSalesPipelines({})).response.status, 200);
    const unknown = await admin(svc().databaseUrl, 'key', 'delegation', '--id', ws.keys.reader!.id, '--to', 'mb_nobody');
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no member mb_nobody in this workspace/);

    const actions = (await entries(ws.workspace_id)).map((e) => `${e.action} ${e.actor_type}`);
    assert.deepEqual(actions.filter((a) => !a.startsWith('workspace.created')).sort(), ['key.delegation_changed operator', 'workspace.api_keys_changed operator', 'workspace.api_keys_changed operator'].sort());
  });
});
