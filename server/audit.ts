/**
 * The audit log: every security-relevant change of a workspace with who did it, when and what, never a
 * secret. Platform pages, the admin CLI and modules call `recordAudit` inside the transaction that makes
 * the change, so an entry exists exactly when the change does. Readable on `/settings/audit` (owners and
 * admins) and with `npm run admin -- audit list`; entries older than AUDIT_RETENTION_DAYS (default 400)
 * are pruned by the `audit.prune` job.
 *
 * Actions are `<subject>.<verb>` in the past tense (`key.created`, `member.role_changed`); `details`
 * holds what changed (names, grants, roles, before/after), never a secret, token or link.
 */
import type { Sql } from '../db/database.ts';
import { type DbAuditRow, insertAuditRow } from '../db/queries/audit.ts';
import { newId } from './ids.ts';

/** Who made a change. */
export type AuditActor =
  | { type: 'member'; id: string; label: string }
  | { type: 'key'; id: string; label: string }
  | { type: 'operator'; label?: string }
  | { type: 'system'; label?: string };

export interface AuditEntry {
  workspaceId: string;
  actor: AuditActor;
  /** `<subject>.<verb>`, e.g. `key.created`. */
  action: string;
  subject?: { type: string; id: string; label?: string };
  /** What changed; never a secret. */
  details?: Record<string, unknown>;
  /** Milliseconds (the caller's clock). */
  at: number;
}

export const AUDIT_RETENTION_DAYS_DEFAULT = 400;

/** The operator's admin CLI as an actor. */
export const OPERATOR: AuditActor = { type: 'operator', label: 'operator (admin CLI)' };

/** Writes one entry, in the caller's transaction. */
export async function recordAudit(sql: Sql, entry: AuditEntry): Promise<void> {
  const a = entry.actor;
  const row: DbAuditRow = {
    id: newId('au'),
    workspace_id: entry.workspaceId,
    at: entry.at,
    actor_type: a.type,
    actor_id: a.type === 'member' || a.type === 'key' ? a.id : null,
    actor_label: (a.label ?? (a.type === 'operator' ? 'operator (admin CLI)' : 'the service')).slice(0, 200),
    action: entry.action,
    subject_type: entry.subject?.type ?? null,
    subject_id: entry.subject?.id ?? null,
    subject_label: entry.subject?.label?.slice(0, 320) ?? null,
    details: JSON.stringify(entry.details ?? {}),
  };
  await insertAuditRow(sql, row);
}
