/**
 * The audit log (server/audit.ts, handlers/audit/): every action of the design said in words by the one
 * describer the page and the CLI share (an unknown action generically, never a crash on odd details);
 * key and member changes made through server/admin.ts and the CLI's session revoke are recorded in their
 * transaction; the `audit.prune` job deletes entries older than AUDIT_RETENTION_DAYS (injected clock); the
 * CLI's `audit list` prints the entries in words, pages with --before and filters with --action.
 */
import assert from 'node:assert/strict';
import { type AuditActor, describeAction, OPERATOR, readAudit, recordAudit } from '../../server/audit.ts';
import { auditSettings } from '../../handlers/audit/index.ts';
import { revokeSession } from '../../server/signin.ts';
import { admin } from '../support/cli.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

const DAY = 86_400_000;

/** Describes one entry as stored (details as JSON), without a database. */
const says = (action: string, subject: { type: string; id: string; label?: string } | null, details: Record<string, unknown> = {}, names = new Map<string, string>()) =>
  describeAction({ action, subject_type: subject?.type ?? null, subject_id: subject?.id ?? null, subject_label: subject?.label ?? null, details: JSON.stringify(details) }, names);

describe('the audit describer', () => {
  const ben = { type: 'member', id: 'mb_ben', label: 'Ben Admin' };
  const key = { type: 'key', id: 'ak_new', label: 'CRM sync' };
  const hook = { type: 'webhook', id: 'wh_1', label: 'meeting.completed to hooks.acme.test' };

  it('says every action of the design in words', () => {
    const names = new Map([['mb_ada', 'Ada Member'], ['mb_olga', 'Olga Owner']]);
    const cases: Array<[string, string]> = [
      [says('key.created', key, { operations: ['a.B', 'a.C'], delegation: 'none' }), 'created the API key “CRM sync” (ak_new) with 2 operations, acting for nobody'],
      [says('key.revoked', key), 'revoked the API key “CRM sync” (ak_new): it no longer works'],
      [says('key.replaced', key, { replaces: 'ak_old' }), 'made the API key “CRM sync” (ak_new) to replace ak_old (both work until the old one is revoked)'],
      [says('key.delegation_changed', key, { before: 'none', after: ['mb_ada', 'mb_olga'] }, names), 'changed whom the API key “CRM sync” (ak_new) may act for from nobody to Ada Member and Olga Owner'],
      [says('key.delegation_changed', key, { before: ['mb_gone'], after: 'all' }), 'changed whom the API key “CRM sync” (ak_new) may act for from mb_gone to every member (now and later)'],
      [says('workspace.api_keys_changed', { type: 'workspace', id: 'ws_1', label: 'Acme' }, { before: 'on', after: 'stopped' }), 'changed API keys for the workspace from on to stopped (no key works)'],
      [says('workspace.created', { type: 'workspace', id: 'ws_1', label: 'Acme' }, { members: 4, sites: 1, apps: 0, keys: 1 }), 'created the workspace “Acme” (ws_1) with 4 members, 1 site and 1 API key'],
      [says('member.added', ben, { role: 'admin' }), 'added Ben Admin as admin'],
      [says('member.invited', { type: 'invitation', id: 'iv_1', label: 'nina@acme.test' }, { email: 'nina@acme.test', role: 'member' }), 'invited nina@acme.test as member'],
      [says('invitation.revoked', { type: 'invitation', id: 'iv_1', label: 'nina@acme.test' }, { role: 'admin' }), 'revoked the invitation for nina@acme.test (as admin)'],
      [says('member.joined', ben, { role: 'member', invited_by: 'Olga Owner' }), 'joined as member through an invitation from Olga Owner'],
      [says('member.role_changed', ben, { before: 'member', after: 'admin', sessions_ended: 2 }), "changed Ben Admin's role from member to admin; 2 sign-in sessions ended"],
      [says('member.disabled', ben, { sessions_ended: 1 }), 'disabled Ben Admin; 1 sign-in session ended'],
      [says('member.disabled', ben), 'disabled Ben Admin'],
      [says('member.enabled', ben), 'enabled Ben Admin'],
      [says('session.revoked', ben, { sessions: 3 }), "ended all 3 of Ben Admin's sign-in sessions"],
      [says('session.revoked', { type: 'session', id: 'ss_1', label: 'Ben Admin' }, { member_name: 'Ben Admin' }), "ended Ben Admin's sign-in session ss_1"],
      [says('webhook.approved', hook), 'approved the webhook subscription “meeting.completed to hooks.acme.test” (wh_1)'],
      [says('webhook.rejected', { type: 'webhook', id: 'whp_1', label: 'deal.won to x.test' }), 'rejected the proposed webhook “deal.won to x.test” (whp_1)'],
      [says('webhook.secret_rotated', hook), 'rotated the signing secret of the webhook subscription “meeting.completed to hooks.acme.test” (wh_1)'],
      [says('webhook.signing_contract_changed', hook, { before: 'legacy', after: 'v1' }), 'moved the webhook subscription “meeting.completed to hooks.acme.test” (wh_1) from the bare HMAC signature to the timestamped v1= signature'],
    ];
    for (const [got, want] of cases) assert.equal(got, want);
  });

  it('says an unknown action generically with its details, and survives missing labels and odd details', () => {
    assert.equal(says('thing.frobbed', { type: 'thing', id: 'th_1', label: 'Gizmo' }, { level: 3, tags: ['a', 'b'] }), 'thing.frobbed on thing “Gizmo” (th_1) (level: 3; tags: a and b)');
    assert.equal(says('thing.frobbed', null), 'thing.frobbed');
    assert.equal(says('member.role_changed', { type: 'member', id: 'mb_x' }), "changed member mb_x's role");
    assert.equal(describeAction({ action: 'key.revoked', subject_type: 'key', subject_id: 'ak_1', subject_label: null, details: 'not json' }), 'revoked the API key ak_1: it no longer works');
    assert.equal(says('key.delegation_changed', key, { before: { mode: 'selected', members: [{ id: 'mb_a', name: 'Ada' }] }, after: { mode: 'none' } }), 'changed whom the API key “CRM sync” (ak_new) may act for from Ada (mb_a) to nobody');
  });

  it('reads AUDIT_RETENTION_DAYS (400 by default, at least 1)', () => {
    assert.equal(auditSettings({}).retentionDays, 400);
    assert.equal(auditSettings({ AUDIT_RETENTION_DAYS: '30' }).retentionDays, 30);
    assert.throws(() => auditSettings({ AUDIT_RETENTION_DAYS: '0' }), /AUDIT_RETENTION_DAYS must be a number >= 1/);
  });
});

forEachDatabase('the audit log', (svc) => {
  const entries = async (workspaceId: string, limit = 100) => (await readAudit(svc().db.sql, workspaceId, { limit })).entries;
  /** Open sign-in sessions for a member, as a sign-in link would (ids ss_audit1, ss_audit2, ... or `first`). */
  const openSessions = async (workspaceId: string, memberId: string, n: number, first = 'ss_audit1') => {
    const now = svc().clock.now();
    for (let i = 0; i < n; i++) {
      const id = i === 0 ? first : `${first.slice(0, -1)}${Number(first.slice(-1)) + i}`;
      await svc().db.sql.run(
        `INSERT INTO member_sessions (id, secret_hash, workspace_id, member_id, auth_version, member_role, created_at, expires_at) VALUES (?, ?, ?, ?, 0, 'admin', ?, ?)`,
        [id, `hash-${id}`, workspaceId, memberId, now, now + DAY],
      );
    }
  };

  it('records the CLI session revoke (one session or all of a member) with whose sessions they were; ending none records nothing', async () => {
    const ws = await svc().apply(acme());
    svc().clock.advance(1000);
    assert.deepEqual(await revokeSession(svc().db, svc().clock, { memberId: ws.members.bob! }), { revoked: 0 });
    await openSessions(ws.workspace_id, ws.members.bob!, 2);
    assert.deepEqual(await revokeSession(svc().db, svc().clock, { id: 'ss_audit1' }), { revoked: 1 });
    svc().clock.advance(1000);
    assert.deepEqual(await revokeSession(svc().db, svc().clock, { memberId: ws.members.bob! }), { revoked: 1 });
    const got = await entries(ws.workspace_id);
    assert.deepEqual(got.map((e) => e.action).slice(0, 3), ['session.revoked', 'session.revoked', 'workspace.created']);
    assert.equal(got[0]!.what, "ended Bob Admin's one sign-in session");
    assert.equal(got[0]!.who, 'operator (admin CLI)');
    assert.equal(got[0]!.subject, `member ${ws.members.bob}`);
    assert.equal(got[1]!.what, "ended Bob Admin's sign-in session ss_audit1");
    assert.equal(got[1]!.subject, 'session ss_audit1');
    assert.match(got[0]!.when, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
    // Signing out (no actor) records nothing.
    await openSessions(ws.workspace_id, ws.members.bob!, 1, 'ss_audit3');
    await revokeSession(svc().db, svc().clock, { id: 'ss_audit3' }, null);
    assert.equal((await entries(ws.workspace_id)).length, got.length);
  });

  it('pages by (time, id) and filters by action prefix', async () => {
    const ws = await svc().apply(acme());
    const actor: AuditActor = { type: 'member', id: ws.members.olga!, label: 'Olga Owner' };
    const at = svc().clock.now() + 5000;
    // Three entries at the same millisecond: the id orders them.
    for (let i = 0; i < 3; i++) await recordAudit(svc().db.sql, { workspaceId: ws.workspace_id, actor, action: 'member.enabled', subject: { type: 'member', id: ws.members.ada!, label: 'Ada Member' }, at });
    await recordAudit(svc().db.sql, { workspaceId: ws.workspace_id, actor, action: 'workspace.api_keys_changed', details: { before: 'on', after: 'off' }, at: at + 1 });
    const all = await entries(ws.workspace_id);
    const seen: string[] = [];
    let before: { at: number; id: string } | undefined;
    for (;;) {
      const page = await readAudit(svc().db.sql, ws.workspace_id, { limit: 2, before });
      seen.push(...page.entries.map((e) => e.id));
      if (!page.older) break;
      const last = page.entries.at(-1)!;
      before = { at: last.at, id: last.id };
    }
    assert.deepEqual(seen, all.map((e) => e.id), 'pages of 2 read every entry once, in order');
    const keys = await readAudit(svc().db.sql, ws.workspace_id, { limit: 50, actions: ['key.', 'workspace.api_keys_changed'] });
    assert.deepEqual(keys.entries.map((e) => e.action), ['workspace.api_keys_changed', ...all.filter((e) => e.action.startsWith('key.')).map((e) => e.action)]);
    // `_` in a prefix is a character, not a LIKE wildcard.
    assert.equal((await readAudit(svc().db.sql, ws.workspace_id, { limit: 50, actions: ['workspace_api'] })).entries.length, 0);
  });

  it('audit.prune deletes entries older than the retention once a day (400 days by default)', async () => {
    const ws = await svc().apply(acme());
    const actor = OPERATOR;
    const now = svc().clock.now();
    await recordAudit(svc().db.sql, { workspaceId: ws.workspace_id, actor, action: 'member.enabled', subject: { type: 'member', id: 'mb_old' }, at: now - 401 * DAY });
    await recordAudit(svc().db.sql, { workspaceId: ws.workspace_id, actor, action: 'member.enabled', subject: { type: 'member', id: 'mb_mid' }, at: now - 399 * DAY });
    const subjects = async () => (await entries(ws.workspace_id)).filter((e) => e.action === 'member.enabled').map((e) => e.subject);
    assert.deepEqual(await subjects(), ['member mb_mid', 'member mb_old']);
    const prune = async () => {
      svc().clock.advance(DAY);
      await svc().jobs.scheduleRecurring();
      await svc().jobs.runDue();
    };
    await prune();
    assert.deepEqual(await subjects(), ['member mb_mid'], 'older than 400 days: gone');
    await prune();
    assert.deepEqual(await subjects(), [], 'a day later it is 401 days old too');
    assert.ok((await entries(ws.workspace_id)).some((e) => e.action === 'workspace.created'), 'recent entries stay');
  });

  it('the CLI prints the entries in words, pages with --before, filters with --action, and refuses bad input in words', async function () {
    this.timeout(150_000);
    const ws = await svc().apply(acme());
    const olga: AuditActor = { type: 'member', id: ws.members.olga!, label: 'Olga Owner' };
    svc().clock.advance(1000);
    await recordAudit(svc().db.sql, { workspaceId: ws.workspace_id, actor: olga, action: 'key.revoked', subject: { type: 'key', id: ws.keys.reader!.id, label: 'Read only' }, at: svc().clock.now() });
    svc().clock.advance(1000);
    await openSessions(ws.workspace_id, ws.members.bob!, 1, 'ss_cli1');
    await revokeSession(svc().db, svc().clock, { memberId: ws.members.bob! });
    const list = await admin(svc().databaseUrl, 'audit', 'list', '--workspace', ws.workspace_id, '--limit', '2');
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /ended Bob Admin's one sign-in session/);
    assert.match(list.stdout, /revoked the API key “Read only”/);
    assert.match(list.stdout, /operator \(admin CLI\)/);
    assert.match(list.stdout, /Olga Owner \(member\)/);
    const older = /older entries: add --before (au_\w+)/.exec(list.stderr);
    assert.ok(older, list.stderr);
    const next = await admin(svc().databaseUrl, 'audit', 'list', '--workspace', ws.workspace_id, '--before', older[1]!, '--limit', '500');
    assert.equal(next.code, 0, next.stderr);
    assert.match(next.stdout, /created the workspace “Acme”/);
    assert.doesNotMatch(next.stdout, /ended Bob Admin/);
    const keys = await admin(svc().databaseUrl, 'audit', 'list', '--workspace', ws.workspace_id, '--action', 'keys');
    assert.equal(keys.code, 0, keys.stderr);
    assert.match(keys.stdout, /revoked the API key/);
    assert.doesNotMatch(keys.stdout, /ended Bob Admin|created the workspace/);
    const prefix = await admin(svc().databaseUrl, 'audit', 'list', '--workspace', ws.workspace_id, '--action', 'session.');
    assert.match(prefix.stdout, /ended Bob Admin/);
    assert.doesNotMatch(prefix.stdout, /revoked the API key/);
    // The refusals, as processes of their own at once (each CLI start costs seconds on a busy machine).
    const cases = [
      [['--workspace', 'ws_nope'], /no workspace ws_nope/],
      [['--workspace', ws.workspace_id, '--limit', '0'], /--limit must be a whole number from 1 to 500/],
      [['--workspace', ws.workspace_id, '--before', 'au_nope'], /--before: no entry au_nope/],
      [['--workspace', ws.workspace_id, '--action', 'DROP TABLE'], /--action must be an action or its start/],
    ] as const;
    const answers = await Promise.all(cases.map(([args]) => admin(svc().databaseUrl, 'audit', 'list', ...args)));
    cases.forEach(([, message], i) => {
      assert.equal(answers[i]!.code, 1);
      assert.match(answers[i]!.stderr, message);
    });
  });
});
