/** The signing module's SQL: requests, recipients, signers' links (token hashes) and the history. */
import type { Sql } from '../../db/database.ts';
import type { DbBoolean } from '../../db/rows.ts';
import { newId } from '../../server/ids.ts';
import { publishSigningEvent } from './outboxEvents.ts';

export type RequestStatus = 'pending' | 'completed' | 'cancelled' | 'expired';
export type RecipientStatus = 'pending' | 'opened' | 'signed' | 'declined';
/** `waiting`: not invited yet (a later step of the signing order); `none`: a CC recipient, never invited to sign. */
export type InvitationStatus = 'sent' | 'queued' | 'failed' | 'waiting' | 'none';

/** `cc`: gets the completed copy and never signs. */
export type RecipientRole = 'signer' | 'cc';
export type SignatureMethod = 'standard' | 'bankid';

export interface DbSigningRequestRow {
  id: string;
  workspace_id: string;
  title: string;
  message: string | null;
  signature_method: SignatureMethod;
  status: RequestStatus;
  source_file_id: string;
  source_sha256: string;
  private: DbBoolean;
  owner_member_id: string | null;
  created_by_key_id: string | null;
  deadline_at: number;
  reminder_interval_days: number | null;
  created_at: number;
  updated_at: number;
  completed_at: number | null;
  cancelled_at: number | null;
  cancel_reason: string | null;
  expired_at: number | null;
  archive_file_id: string | null;
  archive_sha256: string | null;
  archive_error: string | null;
}

export interface DbSigningRecipientRow {
  id: string;
  request_id: string;
  position: number;
  /** Same number: sign in parallel; the next number is invited once the previous one has signed. */
  signing_order: number;
  role: RecipientRole;
  email: string;
  name: string;
  status: RecipientStatus;
  invitation_status: InvitationStatus;
  invitation_error: string | null;
  invitation_attempts: number;
  invited_at: number | null;
  last_reminded_at: number | null;
  auto_reminders: number;
  opened_at: number | null;
  signed_at: number | null;
  declined_at: number | null;
  decline_reason: string | null;
  typed_name: string | null;
  ip: string | null;
  user_agent: string | null;
  provider_evidence: string | null;
  /** The signer's drawn signature (strokes as JSON, see signer/drawnSignature.ts); null when typed only. */
  drawn_signature?: string | null;
}

export interface DbSigningEventRow {
  seq: number;
  id: string;
  request_id: string;
  workspace_id: string;
  kind: string;
  recipient_id: string | null;
  data: string;
  occurred_at: number;
}

/** The kinds of the request history (signing.ListSigningEvents). */
export type SigningEventKind =
  | 'request.created'
  | 'invitation.sent'
  | 'invitation.failed'
  | 'recipient.opened'
  | 'recipient.signed'
  | 'recipient.declined'
  | 'recipient.replaced'
  | 'reminder.sent'
  | 'reminders.stopped'
  | 'deadline.changed'
  | 'request.cancelled'
  | 'request.expired'
  | 'request.completed'
  | 'archive.completed'
  | 'archive.failed';

const BIGINTS_REQUEST = ['deadline_at', 'created_at', 'updated_at', 'completed_at', 'cancelled_at', 'expired_at', 'reminder_interval_days'] as const;
const BIGINTS_RECIPIENT = ['position', 'invitation_attempts', 'invited_at', 'last_reminded_at', 'auto_reminders', 'opened_at', 'signed_at', 'declined_at'] as const;

function numbers<T extends object>(row: T | undefined, fields: readonly string[]): T | undefined {
  if (!row) return row;
  const r = row as Record<string, unknown>;
  for (const f of fields) if (r[f] !== null && r[f] !== undefined) r[f] = Number(r[f]);
  return row;
}
const requestRow = (row: DbSigningRequestRow | undefined) => numbers(row, BIGINTS_REQUEST);
const recipientRow = (row: DbSigningRecipientRow | undefined) => numbers(row, BIGINTS_RECIPIENT);

export async function insertRequest(sql: Sql, r: DbSigningRequestRow): Promise<void> {
  await sql.run(
    `INSERT INTO signing_requests (id, workspace_id, title, message, signature_method, status, source_file_id, source_sha256, private, owner_member_id,
       created_by_key_id, deadline_at, reminder_interval_days, created_at, updated_at, completed_at, cancelled_at, cancel_reason, expired_at,
       archive_file_id, archive_sha256, archive_error)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      r.id, r.workspace_id, r.title, r.message, r.signature_method, r.status, r.source_file_id, r.source_sha256, Boolean(r.private), r.owner_member_id,
      r.created_by_key_id, r.deadline_at, r.reminder_interval_days, r.created_at, r.updated_at, r.completed_at, r.cancelled_at, r.cancel_reason, r.expired_at,
      r.archive_file_id, r.archive_sha256, r.archive_error,
    ],
  );
}

/**
 * Who a recipient was at each point of a request's history: events before a `recipient.replaced` of
 * that recipient name the previous address and name (kept in that event), not today's. `events` are
 * every event of the request in order (seq, kind, recipient_id, data as stored).
 */
export function recipientAsOf(events: ReadonlyArray<{ seq: number | string; kind: string; recipient_id: string | null; data: string }>) {
  const replaced = events
    .filter((e) => e.kind === 'recipient.replaced' && e.recipient_id)
    .map((e) => {
      let d: { previous_email?: unknown; previous_name?: unknown } = {};
      try {
        d = JSON.parse(e.data) as typeof d;
      } catch {
        /* unreadable: nothing to say */
      }
      return { seq: Number(e.seq), recipientId: e.recipient_id!, email: typeof d.previous_email === 'string' ? d.previous_email : null, name: typeof d.previous_name === 'string' ? d.previous_name : null };
    });
  return <R extends { name: string; email: string }>(recipientId: string, seq: number, now: R): R => {
    const next = replaced.find((x) => x.recipientId === recipientId && x.seq > seq);
    return next && next.email !== null && next.name !== null ? { ...now, email: next.email, name: next.name } : now;
  };
}

/** A field on the document's pages (table signing_fields). */
export interface DbSigningFieldRow {
  id: string;
  request_id: string;
  recipient_id: string;
  kind: FieldKind;
  page: number;
  x: number;
  y: number;
  width: number;
  height: number;
  position: number;
  /** A text or checkbox field the signer must fill (signature, initials, name and date are always filled). */
  required: boolean;
  /** What the signer is asked (text and checkbox fields). */
  label: string | null;
  /** What the signer gave (text: the text; checkbox: "true" or "false"), recorded with the signature; null before. */
  value: string | null;
  /** The text tag the field was found from (request/textTags.ts), which it covers; null when placed otherwise. */
  tag?: string | null;
}

export type FieldKind = 'signature' | 'initials' | 'name' | 'date' | 'text' | 'checkbox';
/** Each kind in words, as pages name a field without a label. */
export const FIELD_KIND_WORDS: Readonly<Record<FieldKind, string>> = { signature: 'Signature', initials: 'Initials', name: 'Name', date: 'Date signed', text: 'Text', checkbox: 'Check box' };
/** Kinds the signer fills in on the page (the others follow from the signature). */
export const FILLED_KINDS: ReadonlySet<FieldKind> = new Set(['text', 'checkbox']);
/** What is stored as `required`: the caller's choice for the kinds a signer fills; the others follow from the signature. */
export const storedRequired = (kind: FieldKind, required: boolean | undefined): boolean => (FILLED_KINDS.has(kind) ? required ?? true : true);

export async function insertField(sql: Sql, f: DbSigningFieldRow): Promise<void> {
  await sql.run(`INSERT INTO signing_fields (id, request_id, recipient_id, kind, page, x, y, width, height, position, required, label, value, tag) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, [
    f.id, f.request_id, f.recipient_id, f.kind, f.page, f.x, f.y, f.width, f.height, f.position, f.required, f.label, f.value, f.tag ?? null,
  ]);
}

/** Records what a signer gave in their fields (in the transaction that records the signature). */
export async function setFieldValues(sql: Sql, values: ReadonlyMap<string, string>): Promise<void> {
  for (const [id, value] of values) await sql.run(`UPDATE signing_fields SET value = ? WHERE id = ?`, [value, id]);
}

/** The fields of several requests, by request id (each in the order given). */
export async function fieldsOfRequests(sql: Sql, requestIds: readonly string[]): Promise<Map<string, DbSigningFieldRow[]>> {
  const byRequest = new Map<string, DbSigningFieldRow[]>(requestIds.map((id) => [id, []]));
  if (!requestIds.length) return byRequest;
  const rows = await sql.all<DbSigningFieldRow>(`SELECT * FROM signing_fields WHERE request_id IN (${requestIds.map(() => '?').join(', ')}) ORDER BY request_id, position`, [...requestIds]);
  for (const f of rows) byRequest.get(f.request_id)?.push({ ...f, page: Number(f.page), x: Number(f.x), y: Number(f.y), width: Number(f.width), height: Number(f.height), position: Number(f.position), required: Boolean(f.required) });
  return byRequest;
}

export async function listFields(sql: Sql, requestId: string): Promise<DbSigningFieldRow[]> {
  return (await fieldsOfRequests(sql, [requestId])).get(requestId) ?? [];
}

/** The recipients who sign (not the CC recipients), in order. */
export const signersOf = <T extends { role?: RecipientRole | string | null }>(recipients: readonly T[]): T[] => recipients.filter((r) => r.role !== 'cc');

export async function insertRecipient(sql: Sql, r: DbSigningRecipientRow): Promise<void> {
  await sql.run(
    `INSERT INTO signing_recipients (id, request_id, position, signing_order, role, email, name, status, invitation_status, invitation_error, invitation_attempts, invited_at,
       last_reminded_at, auto_reminders, opened_at, signed_at, declined_at, decline_reason, typed_name, ip, user_agent, provider_evidence)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      r.id, r.request_id, r.position, r.signing_order, r.role ?? 'signer', r.email, r.name, r.status, r.invitation_status, r.invitation_error, r.invitation_attempts, r.invited_at,
      r.last_reminded_at, r.auto_reminders, r.opened_at, r.signed_at, r.declined_at, r.decline_reason, r.typed_name, r.ip, r.user_agent, r.provider_evidence,
    ],
  );
}

/** A request of the workspace; `lock` takes its row for the transaction (PostgreSQL), so state moves are serial. */
export async function findRequest(sql: Sql, workspaceId: string, id: string, lock = false): Promise<DbSigningRequestRow | undefined> {
  return requestRow(await sql.one<DbSigningRequestRow>(`SELECT * FROM signing_requests WHERE workspace_id = ? AND id = ?${lock ? ' FOR UPDATE' : ''}`, [workspaceId, id]));
}

/** A request by id alone (background jobs, the signer's link). */
export async function findRequestById(sql: Sql, id: string, lock = false): Promise<DbSigningRequestRow | undefined> {
  return requestRow(await sql.one<DbSigningRequestRow>(`SELECT * FROM signing_requests WHERE id = ?${lock ? ' FOR UPDATE' : ''}`, [id]));
}

export async function listRecipients(sql: Sql, requestId: string): Promise<DbSigningRecipientRow[]> {
  const rows = await sql.all<DbSigningRecipientRow>(`SELECT * FROM signing_recipients WHERE request_id = ? ORDER BY position`, [requestId]);
  return rows.map((r) => recipientRow(r)!);
}

export async function findRecipient(sql: Sql, id: string): Promise<DbSigningRecipientRow | undefined> {
  return recipientRow(await sql.one<DbSigningRecipientRow>(`SELECT * FROM signing_recipients WHERE id = ?`, [id]));
}

/** Sets columns of a request (and `updated_at`). */
export async function updateRequest(sql: Sql, id: string, set: Partial<Omit<DbSigningRequestRow, 'id' | 'workspace_id'>>, now: number): Promise<void> {
  const entries = Object.entries({ ...set, updated_at: now });
  await sql.run(`UPDATE signing_requests SET ${entries.map(([k]) => `${k} = ?`).join(', ')} WHERE id = ?`, [...entries.map(([, v]) => v as string | number | null), id]);
}

/** Sets columns of a recipient; with `onlyIn`, only while its status is one of those; returns whether it changed. */
export async function updateRecipient(sql: Sql, id: string, set: Partial<Omit<DbSigningRecipientRow, 'id' | 'request_id'>>, onlyIn?: readonly RecipientStatus[]): Promise<boolean> {
  const entries = Object.entries(set);
  const where = onlyIn ? ` AND status IN (${onlyIn.map(() => '?').join(', ')})` : '';
  const changed = await sql.run(`UPDATE signing_recipients SET ${entries.map(([k]) => `${k} = ?`).join(', ')} WHERE id = ?${where}`, [
    ...entries.map(([, v]) => v as string | number | null),
    id,
    ...(onlyIn ?? []),
  ]);
  return changed > 0;
}

/**
 * Ends everything given to a recipient's old address (signing.ReplaceRecipient): its links (they
 * answer as unknown from now on) and its open BankID orders.
 */
export async function endRecipientAccess(sql: Sql, recipientId: string): Promise<void> {
  await sql.run(`DELETE FROM signing_links WHERE recipient_id = ?`, [recipientId]);
  await sql.run(`UPDATE signing_provider_orders SET status = 'failed', error = ? WHERE recipient_id = ? AND status = 'open'`, ['The sender gave this signature to another address.', recipientId]);
}

export async function insertLink(sql: Sql, link: { token_hash: string; recipient_id: string; request_id: string; created_at: number }): Promise<void> {
  await sql.run(`INSERT INTO signing_links (token_hash, recipient_id, request_id, created_at) VALUES (?, ?, ?, ?)`, [link.token_hash, link.recipient_id, link.request_id, link.created_at]);
}

export async function findLink(sql: Sql, tokenHash: string): Promise<{ token_hash: string; recipient_id: string; request_id: string; created_at: number } | undefined> {
  const row = await sql.one<{ token_hash: string; recipient_id: string; request_id: string; created_at: number }>(`SELECT * FROM signing_links WHERE token_hash = ?`, [tokenHash]);
  return row ? { ...row, created_at: Number(row.created_at) } : undefined;
}

export interface NewEvent {
  requestId: string;
  workspaceId: string;
  kind: SigningEventKind;
  recipientId?: string | null;
  /** What the event says: never IP addresses, links, tokens or document contents. */
  data?: Record<string, unknown>;
  at: number;
}

/** Appends one event to the request's history, in the caller's transaction (and its outbox event, for published kinds); returns its id. */
export async function appendEvent(sql: Sql, e: NewEvent): Promise<string> {
  const id = newId('sev');
  await sql.run(`INSERT INTO signing_events (id, request_id, workspace_id, kind, recipient_id, data, occurred_at) VALUES (?, ?, ?, ?, ?, ?, ?)`, [
    id,
    e.requestId,
    e.workspaceId,
    e.kind,
    e.recipientId ?? null,
    JSON.stringify(e.data ?? {}),
    e.at,
  ]);
  // The kinds others may act on go to the shared outbox too, in this transaction (outboxEvents.ts).
  await publishSigningEvent(sql, e, id);
  return id;
}

/** A page of the request's history after position `afterSeq`, oldest first. */
export async function listEvents(sql: Sql, requestId: string, afterSeq: number, limit: number): Promise<DbSigningEventRow[]> {
  const rows = await sql.all<DbSigningEventRow>(`SELECT * FROM signing_events WHERE request_id = ? AND seq > ? ORDER BY seq LIMIT ?`, [requestId, afterSeq, limit]);
  return rows.map((r) => ({ ...r, seq: Number(r.seq), occurred_at: Number(r.occurred_at) }));
}

/** Pending requests whose deadline has passed (the expiry job). */
export async function overdueRequests(sql: Sql, now: number, limit: number): Promise<Array<{ id: string }>> {
  return sql.all<{ id: string }>(`SELECT id FROM signing_requests WHERE status = 'pending' AND deadline_at <= ? ORDER BY deadline_at LIMIT ?`, [now, limit]);
}

/**
 * Recipients due an automatic reminder: their request is pending, has an interval and its deadline is
 * ahead; they have not signed or declined, have had fewer than `cap` automatic reminders, and their
 * last mail (invitation or reminder) went out at least the interval ago.
 */
export async function recipientsDueReminder(sql: Sql, now: number, cap: number, limit: number): Promise<Array<{ recipient_id: string; request_id: string }>> {
  return sql.all<{ recipient_id: string; request_id: string }>(
    `SELECT c.id AS recipient_id, c.request_id AS request_id
       FROM signing_recipients c JOIN signing_requests r ON r.id = c.request_id
      WHERE r.status = 'pending' AND r.reminder_interval_days IS NOT NULL AND r.deadline_at > ?
        AND c.status IN ('pending', 'opened') AND c.auto_reminders < ? AND c.invitation_status = 'sent'
        AND COALESCE(c.last_reminded_at, c.invited_at, r.created_at) + CAST(r.reminder_interval_days AS BIGINT) * 86400000 <= ?
      ORDER BY r.created_at, c.position LIMIT ?`,
    [now, cap, now, limit],
  );
}

/** A member's e-mail and name (active or not), or undefined. */
export async function findMember(sql: Sql, workspaceId: string, memberId: string): Promise<{ id: string; name: string; email: string; role: string; disabled_at: number | null } | undefined> {
  return sql.one(`SELECT id, name, email, role, disabled_at FROM members WHERE workspace_id = ? AND id = ?`, [workspaceId, memberId]);
}

export async function workspaceName(sql: Sql, workspaceId: string): Promise<string> {
  return (await sql.one<{ name: string }>(`SELECT name FROM workspaces WHERE id = ?`, [workspaceId]))?.name ?? 'Workspace Operations';
}

/** An API key's name and creator (revoked keys too). */
export function keyOf(sql: Sql, keyId: string): Promise<{ id: string; name: string; created_by: string | null } | undefined> {
  return sql.one(`SELECT id, name, created_by FROM api_keys WHERE id = ?`, [keyId]);
}

/** The member who created an API key (null: none recorded). */
export async function keyCreator(sql: Sql, keyId: string): Promise<string | null> {
  return (await keyOf(sql, keyId))?.created_by ?? null;
}

/** The workspace's API keys, revoked ones included (a request names the key that sent it). */
export function keyNames(sql: Sql, workspaceId: string): Promise<Array<{ id: string; name: string; created_by: string | null }>> {
  return sql.all(`SELECT id, name, created_by FROM api_keys WHERE workspace_id = ?`, [workspaceId]);
}

/** Who lists requests (signing.ListSigningRequests): the key alone, or a member with their role and e-mail. */
export type RequestReader =
  | { readonly kind: 'key'; readonly keyId: string }
  | { readonly kind: 'member'; readonly memberId: string; readonly admin: boolean; readonly email: string | null };

/**
 * Requests of the workspace, newest first (created_at, id), after the cursor position, narrowed in SQL
 * to those the reader may see. The narrowing is never tighter than the rule (accessTo in handlers.ts):
 * an address with other than ASCII characters, on either side, is left to the caller's exact check.
 */
export async function listRequestsPage(
  sql: Sql,
  workspaceId: string,
  reader: RequestReader,
  filter: {
    status: RequestStatus | null;
    after: { t: number; i: string } | null;
    now: number;
    /** Text found (letters folded by the database) in the title or a recipient's name or address. */
    search?: string | null;
    /** Only requests this member sent (made acting for them). */
    sentBy?: string | null;
    /** Only requests where this address is a recipient (folded by the database). */
    recipient?: string | null;
    createdFrom?: number | null;
    createdTo?: number | null;
  },
  limit: number,
): Promise<DbSigningRequestRow[]> {
  const params: Array<string | number | boolean> = [workspaceId];
  let where = 'r.workspace_id = ?';
  // A pending request past its deadline is expired (asOf in handlers.ts), whether or not the expiry job has run.
  if (filter.status === 'pending') {
    where += " AND r.status = 'pending' AND r.deadline_at > ?";
    params.push(filter.now);
  } else if (filter.status === 'expired') {
    where += " AND (r.status = 'expired' OR (r.status = 'pending' AND r.deadline_at <= ?))";
    params.push(filter.now);
  } else if (filter.status) {
    where += ' AND r.status = ?';
    params.push(filter.status);
  }
  if (reader.kind === 'key') {
    where += ' AND r.created_by_key_id = ? AND r.private = ?';
    params.push(reader.keyId, false);
  } else {
    const seen = ['r.owner_member_id = ?'];
    params.push(reader.memberId);
    if (reader.admin) {
      seen.push('r.private = ?');
      params.push(false);
    }
    if (reader.email !== null) {
      if (/^[\x20-\x7e]*$/.test(reader.email)) {
        seen.push('EXISTS (SELECT 1 FROM signing_recipients c WHERE c.request_id = r.id AND (LOWER(c.email) = ? OR OCTET_LENGTH(c.email) <> LENGTH(c.email)))');
        params.push(reader.email.toLowerCase());
      } else {
        seen.push('1 = 1');
      }
    }
    where += ` AND (${seen.join(' OR ')})`;
  }
  if (filter.search) {
    const like = `%${filter.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    // Both sides folded by the database, the same way (SQLite folds ASCII letters only, PostgreSQL every letter).
    where += ` AND (LOWER(r.title) LIKE LOWER(?) ESCAPE '\\' OR EXISTS (SELECT 1 FROM signing_recipients c WHERE c.request_id = r.id AND (LOWER(c.name) LIKE LOWER(?) ESCAPE '\\' OR LOWER(c.email) LIKE LOWER(?) ESCAPE '\\')))`;
    params.push(like, like, like);
  }
  if (filter.sentBy) {
    where += ' AND r.owner_member_id = ?';
    params.push(filter.sentBy);
  }
  if (filter.recipient) {
    where += ' AND EXISTS (SELECT 1 FROM signing_recipients c WHERE c.request_id = r.id AND LOWER(c.email) = LOWER(?))';
    params.push(filter.recipient);
  }
  if (filter.createdFrom != null) {
    where += ' AND r.created_at >= ?';
    params.push(filter.createdFrom);
  }
  if (filter.createdTo != null) {
    where += ' AND r.created_at <= ?';
    params.push(filter.createdTo);
  }
  if (filter.after) {
    where += ' AND (r.created_at < ? OR (r.created_at = ? AND r.id < ?))';
    params.push(filter.after.t, filter.after.t, filter.after.i);
  }
  params.push(limit);
  const rows = await sql.all<DbSigningRequestRow>(`SELECT r.* FROM signing_requests r WHERE ${where} ORDER BY r.created_at DESC, r.id DESC LIMIT ?`, params);
  return rows.map((r) => requestRow(r)!);
}

/** The recipients of several requests, by request id (each in position order). */
export async function recipientsOfRequests(sql: Sql, requestIds: readonly string[]): Promise<Map<string, DbSigningRecipientRow[]>> {
  const byRequest = new Map<string, DbSigningRecipientRow[]>(requestIds.map((id) => [id, []]));
  if (!requestIds.length) return byRequest;
  const rows = await sql.all<DbSigningRecipientRow>(`SELECT * FROM signing_recipients WHERE request_id IN (${requestIds.map(() => '?').join(', ')}) ORDER BY request_id, position`, [...requestIds]);
  for (const r of rows) byRequest.get(r.request_id)?.push(recipientRow(r)!);
  return byRequest;
}
