/**
 * MCP connections (handlers/mcp/connections.ts) on both databases: the operations frozen at approval
 * (personal: the member's role ∩ toolsets ∩ queries when read-only; workspace: the chosen grants ∩
 * toolsets), the choices refused in words, revocation (its grant's records deleted in the same
 * transaction, `connection.revoked`, refused twice, a plain member only their own personal ones), and
 * the connection as the credential path reads it (ended by a role change or disabling).
 */
import assert from 'node:assert/strict';
import { AdminError, type ApplyResult } from '../../server/admin.ts';
import { type CatalogueEntry, catalogue } from '../../generated/catalogue.ts';
import { connectionEnded, createConnection, findConnectionForAuth, listConnections, memberOperations, revokeConnection } from '../../handlers/mcp/connections.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

forEachDatabase('MCP connections', (ctx) => {
  let ws: ApplyResult;
  const ada = () => ({ id: ws.members.ada!, name: 'Ada Member', role: 'member' as const });
  const olga = () => ({ id: ws.members.olga!, name: 'Olga Owner', role: 'owner' as const });
  const base = () => ({ workspaceId: ws.workspace_id, clientId: 'mcl_test', clientName: 'Desk Agent', redirectUri: 'http://127.0.0.1:5555/cb', now: ctx().clock.now() });

  before(async () => {
    ws = await ctx().apply(acme());
  });

  it('personal operations are the role’s: every listed operation that runs as a member and whose declared access the role has', () => {
    const member = memberOperations('member');
    const owner = memberOperations('owner');
    assert.ok(member.includes('customers.ListSalesPipelines') && member.includes('customers.UpdateDeal'));
    assert.ok(!member.includes('customers.CreateSalesPipeline') && owner.includes('customers.CreateSalesPipeline'));
    assert.ok(!owner.some((id) => id.startsWith('discovery.')), 'unlisted operations are never granted');
    assert.deepEqual(owner, (catalogue as readonly CatalogueEntry[]).filter((e) => e.listed && e.actAs !== 'none').map((e) => e.id).sort());
  });

  it('freezes personal access to the role ∩ toolsets (∩ queries when read-only), workspace access to the choice ∩ toolsets', async () => {
    const { db } = ctx();
    const p = await db.tx((sql) => createConnection(sql, { ...base(), access: 'personal', member: ada(), toolsets: ['customers'], readOnly: true }));
    assert.deepEqual(p.operations, ['customers.GetCompany', 'customers.GetDeal', 'customers.GetSalesPipeline', 'customers.ListCompanies', 'customers.ListDeals', 'customers.ListSalesPipelines']);
    assert.equal(p.memberId, ws.members.ada);
    assert.equal(p.memberRole, 'member');
    assert.deepEqual(p.resources, {});
    const w = await db.tx((sql) =>
      createConnection(sql, {
        ...base(),
        access: 'workspace',
        member: olga(),
        toolsets: ['workspace', 'customers'],
        readOnly: false,
        operations: ['customers.ListCompanies', 'workspace.*', 'analytics.*'],
        resources: { 'core:Company': ['write', 'read', 'read'] },
        delegation: [ws.members.ada!, ws.members.ada!],
      }),
    );
    assert.deepEqual(w.operations, ['customers.ListCompanies', 'workspace.ListApps', 'workspace.ListBundles']);
    assert.deepEqual(w.toolsets, ['customers', 'workspace']);
    assert.deepEqual(w.resources, { 'core:Company': ['read', 'write'] });
    assert.equal(w.delegation, 'selected');
    assert.deepEqual(w.delegates, [ws.members.ada]);
    assert.equal(w.memberId, null);
    assert.equal(w.createdBy, ws.members.olga);
    const listed = await listConnections(db.sql, ws.workspace_id);
    assert.deepEqual(listed.map((c) => c.id).sort(), [p.id, w.id].sort());
    const audit = await db.sql.all<{ actor_id: string; subject_id: string }>(`SELECT actor_id, subject_id FROM audit_log WHERE workspace_id = ? AND action = 'connection.approved' ORDER BY at, id`, [ws.workspace_id]);
    assert.deepEqual(audit.map((a) => a.subject_id).sort(), [p.id, w.id].sort());
  });

  it('refuses choices that give nothing or name unknown things, in words, and makes nothing', async () => {
    const { db } = ctx();
    const before = (await listConnections(db.sql, ws.workspace_id)).length;
    const refused = async (input: Parameters<typeof createConnection>[1], message: RegExp) =>
      assert.rejects(db.tx((sql) => createConnection(sql, input)), (err: unknown) => err instanceof AdminError && message.test(err.message));
    await refused({ ...base(), access: 'personal', member: ada(), toolsets: [], readOnly: false }, /at least one toolset/);
    await refused({ ...base(), access: 'personal', member: ada(), toolsets: ['nope'], readOnly: false }, /unknown toolset "nope"/);
    await refused({ ...base(), access: 'workspace', member: olga(), toolsets: ['signing'], readOnly: false, operations: ['customers.*'] }, /none in the chosen toolsets/);
    await refused({ ...base(), access: 'workspace', member: olga(), toolsets: ['customers'], readOnly: true, operations: ['customers.UpdateDeal'] }, /that only reads/);
    await refused({ ...base(), access: 'workspace', member: olga(), toolsets: ['customers'], readOnly: false, operations: ['customers.Nope'] }, /unknown operation/);
    await refused({ ...base(), access: 'workspace', member: olga(), toolsets: ['customers'], readOnly: false, operations: ['customers.*'], resources: { 'core:Nope': ['read'] } }, /unknown resource type/);
    await refused({ ...base(), access: 'workspace', member: olga(), toolsets: ['customers'], readOnly: false, operations: ['customers.*'], delegation: [ws.members.max!] }, /not an active member/);
    assert.equal((await listConnections(db.sql, ws.workspace_id)).length, before);
  });

  it('revokes once: revoked_at, the grant’s records gone in the same transaction, the audit entry; a plain member only their own personal ones', async () => {
    const { db, clock } = ctx();
    const p = await db.tx((sql) => createConnection(sql, { ...base(), access: 'personal', member: ada(), toolsets: ['workspace'], readOnly: false }));
    const w = await db.tx((sql) => createConnection(sql, { ...base(), access: 'workspace', member: olga(), toolsets: ['workspace'], readOnly: false, operations: ['workspace.*'] }));
    for (const [c, grant] of [[p, 'grant-p'], [w, 'grant-w']] as const) {
      await db.sql.run(`UPDATE mcp_connections SET grant_id = ? WHERE id = ?`, [grant, c.id]);
      await db.sql.run(`INSERT INTO oauth_records (model, id_hash, grant_id, payload) VALUES ('AccessToken', ?, ?, '{}')`, [`h-${grant}`, grant]);
    }
    const asAda = { actor: { type: 'member' as const, id: ws.members.ada!, label: 'Ada Member' }, workspaceId: ws.workspace_id, onlyPersonalOf: ws.members.ada! };
    await assert.rejects(revokeConnection(db, clock, w.id, asAda), /only owners and admins revoke workspace connections/);
    await assert.rejects(revokeConnection(db, clock, p.id, { workspaceId: 'ws_other' }), /no connection/);
    const revokedGrants: string[] = [];
    const done = await revokeConnection(db, clock, p.id, { ...asAda, revokeGrant: async (g) => void revokedGrants.push(g) });
    assert.equal(done.id, p.id);
    assert.deepEqual(revokedGrants, ['grant-p']);
    const left = await db.sql.all<{ grant_id: string }>(`SELECT grant_id FROM oauth_records WHERE grant_id IN ('grant-p', 'grant-w') ORDER BY grant_id`);
    assert.deepEqual(left.map((r) => r.grant_id), ['grant-w']);
    await assert.rejects(revokeConnection(db, clock, p.id), /is already revoked/);
    await revokeConnection(db, clock, w.id);
    const entries = await db.sql.all<{ actor_type: string; subject_id: string }>(`SELECT actor_type, subject_id FROM audit_log WHERE action = 'connection.revoked' AND workspace_id = ? ORDER BY at, id`, [ws.workspace_id]);
    assert.deepEqual(entries.map((e) => [e.actor_type, e.subject_id]), [['member', p.id], ['operator', w.id]]);
    const found = await findConnectionForAuth(db.sql, p.id);
    assert.equal(connectionEnded(found!), 'revoked');
  });

  it('a personal connection ends when its member’s role changes or they are disabled (as the credential path reads it)', async () => {
    const { db } = ctx();
    const p = await db.tx((sql) => createConnection(sql, { ...base(), access: 'personal', member: ada(), toolsets: ['workspace'], readOnly: false }));
    assert.equal(connectionEnded((await findConnectionForAuth(db.sql, p.id))!), null);
    await db.sql.run(`UPDATE members SET role = 'admin' WHERE id = ?`, [ws.members.ada!]);
    assert.match(connectionEnded((await findConnectionForAuth(db.sql, p.id))!)!, /role changed \(approved as member, now admin\)/);
    await db.sql.run(`UPDATE members SET role = 'member', disabled_at = 1 WHERE id = ?`, [ws.members.ada!]);
    assert.equal(connectionEnded((await findConnectionForAuth(db.sql, p.id))!), 'its member is disabled');
    await db.sql.run(`UPDATE members SET disabled_at = NULL WHERE id = ?`, [ws.members.ada!]);
    assert.equal(await findConnectionForAuth(db.sql, 'mc_nope'), undefined);
  });
});
