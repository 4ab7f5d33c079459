/**
 * Work a credential starts that outlives its request (a part URL, a download URL, a request's automatic
 * reminders) carries the credential and the member it acted for, and is judged again when it is used
 * (seed 5.6: "changes to member permissions or credential revocation affect later requests and
 * background callbacks"), as webhook deliveries are: the credential must still be live (a key not
 * revoked, its workspace's keys not stopped; a session or connection not ended), still granted the
 * operation that issued the work, and, when it acted for a member, that member still active, still
 * one the credential may act for and (when the work recorded it) still in the same role.
 */
import type { Database } from '../db/database.ts';
import { type CatalogueEntry, catalogue } from '../generated/catalogue.ts';
import type { CredentialStore } from './credentials.ts';

/** What a piece of work was made with. */
export interface Grant {
  /** The credential's id (`ak_`, `ss_`, `mc_`); null: the service itself (nothing to revoke). */
  readonly credentialId: string | null;
  /** The member it acted for, or null (workspace access). */
  readonly memberId: string | null;
  /** The operation that issued the work: the credential must still be granted it. */
  readonly operation: string;
  /** The member's role when the work was issued; a different role now refuses it. Undefined: not checked. */
  readonly role?: string | null;
}

export type AccessLoss = 'credential_revoked' | 'keys_stopped' | 'grant_lost' | 'member_disabled' | 'delegation_lost' | 'role_changed';
export type AtUseVerdict = { readonly ok: true; readonly credentialId: string | null } | { readonly ok: false; readonly loss: AccessLoss; readonly reason: string };

const MAX_REPLACEMENTS = 20;

const what = (id: string) => (id.startsWith('ss_') ? `sign-in session ${id}` : id.startsWith('mc_') ? `connection ${id}` : `API key ${id}`);

/** The unrevoked key that replaced `keyId` (`npm run admin -- key replace`), following the chain, or null. */
async function replacementOf(db: Database, workspaceId: string, keyId: string): Promise<string | null> {
  let current = keyId;
  for (let hop = 0; hop < MAX_REPLACEMENTS; hop++) {
    const next = await db.sql.one<{ id: string; revoked_at: number | string | null }>(
      `SELECT id, revoked_at FROM api_keys WHERE workspace_id = ? AND replaces_key_id = ? ORDER BY CASE WHEN revoked_at IS NULL THEN 0 ELSE 1 END, created_at DESC, id DESC LIMIT 1`,
      [workspaceId, current],
    );
    if (!next) return null;
    if (next.revoked_at === null) return next.id;
    current = next.id;
  }
  return null;
}

/**
 * Whether the work `grant` describes may still go on, judged from the database now (never a cache).
 * `followReplacements` (background work of a long-lived record): a revoked key's unrevoked replacement
 * carries on in its place, so rotating a key does not stop it; the verdict names the key judged.
 */
export async function judgeAtUse(db: Database, store: CredentialStore, workspaceId: string, grant: Grant, options: { followReplacements?: boolean } = {}): Promise<AtUseVerdict> {
  const lost = (loss: AccessLoss, reason: string): AtUseVerdict => ({ ok: false, loss, reason });
  if (grant.credentialId === null) {
    if (grant.memberId === null) return { ok: true, credentialId: null };
    const member = await db.sql.one<{ role: string; disabled_at: number | string | null }>(`SELECT role, disabled_at FROM members WHERE workspace_id = ? AND id = ?`, [workspaceId, grant.memberId]);
    if (!member || member.disabled_at !== null) return lost('member_disabled', `member ${grant.memberId} was disabled`);
    if (grant.role !== undefined && grant.role !== null && member.role !== grant.role) return lost('role_changed', `the role of member ${grant.memberId} changed`);
    return { ok: true, credentialId: null };
  }
  let id = grant.credentialId;
  let credential = await store.current(id);
  if (!credential && options.followReplacements && id.startsWith('ak_')) {
    const next = await replacementOf(db, workspaceId, id);
    if (next) {
      id = next;
      credential = await store.current(id);
    }
  }
  if (!credential || credential.workspaceId !== workspaceId) return lost('credential_revoked', `the ${what(grant.credentialId)} was revoked or has ended`);
  const entry = (catalogue as readonly CatalogueEntry[]).find((e) => e.id === grant.operation);
  if (entry?.listed && !credential.operations.has(grant.operation)) return lost('grant_lost', `the ${what(id)} is no longer granted ${grant.operation}`);
  const stopped = credential.keysStopped ? lost('keys_stopped', "the workspace's API keys are stopped by the operator") : null;
  if (grant.memberId === null) return stopped ?? { ok: true, credentialId: id };
  // A session or personal connection is its member: loading it ended it if the member was disabled or changed role.
  const member = credential.sessionMember?.id === grant.memberId ? credential.sessionMember : credential.members.get(grant.memberId);
  if (!member || member.disabled) return lost('member_disabled', `member ${grant.memberId} was disabled`);
  const delegated = credential.delegation === 'all' || (credential.delegation === 'selected' && credential.delegates.has(member.id));
  if (!delegated) return lost('delegation_lost', `the ${what(id)} may no longer act for member ${member.id}`);
  if (grant.role !== undefined && grant.role !== null && member.role !== grant.role) return lost('role_changed', `the role of member ${member.id} changed`);
  return stopped ?? { ok: true, credentialId: id };
}
