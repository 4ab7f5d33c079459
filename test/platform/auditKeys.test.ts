/**
 * The audit entries of server/admin.ts's key and member functions (used by the CLI and the keys page):
 * each is recorded in the change's transaction, said in words, never with a secret; a refused change
 * records nothing.
 */
import assert from 'node:assert/strict';
import { AdminError, disableMember, replaceKey, revokeKey } from '../../server/admin.ts';
import { readAudit } from '../../server/audit.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

forEachDatabase('the audit log of key and member changes (server/admin.ts)', (svc) => {
  const entries = async (workspaceId: string, limit = 100) => (await readAudit(svc().db.sql, workspaceId, { limit })).entries;

  it('records replace, revoke and disable in words, newest first, never a secret; none in another workspace, none for a refused change', async () => {
    const ws = await svc().apply(acme());
    svc().clock.advance(1000);
    const replaced = await replaceKey(svc().db, svc().clock, ws.keys.ci!.id);
    svc().clock.advance(1000);
    await revokeKey(svc().db, svc().clock, ws.keys.ci!.id);
    svc().clock.advance(1000);
    await disableMember(svc().db, svc().clock, ws.members.ada!);
    const got = await entries(ws.workspace_id);
    const actions = got.map((e) => e.action);
    assert.deepEqual(actions.slice(0, 3), ['member.disabled', 'key.revoked', 'key.replaced']);
    assert.equal(actions.at(-1), 'workspace.created', 'the file made the workspace first');
    assert.equal(got[0]!.what, 'disabled Ada Member');
    assert.equal(got[0]!.who, 'operator (admin CLI)');
    assert.equal(got[0]!.subject, `member ${ws.members.ada}`);
    assert.equal(got[1]!.what, `revoked the API key “CI integration” (${ws.keys.ci!.id}): it no longer works`);
    assert.match(got[2]!.what, new RegExp(`^made the API key “CI integration” \\(${replaced.id}\\) to replace ${ws.keys.ci!.id}`));
    const stored = JSON.stringify(await svc().db.sql.all(`SELECT * FROM audit_log WHERE workspace_id = ?`, [ws.workspace_id]));
    for (const secret of [replaced.secret, ...Object.values(ws.keys).map((k) => k.secret)]) assert.ok(!stored.includes(secret), 'no key secret in the audit log');
    // Another workspace's entries are not this one's.
    const other = await svc().apply(acme());
    assert.ok((await entries(other.workspace_id)).every((e) => !['member.disabled', 'key.revoked', 'key.replaced'].includes(e.action)));
    // A failed change records nothing (the transaction rolled back).
    const before = (await entries(ws.workspace_id)).length;
    await assert.rejects(disableMember(svc().db, svc().clock, ws.members.ada!), AdminError);
    assert.equal((await entries(ws.workspace_id)).length, before);
  });
});
