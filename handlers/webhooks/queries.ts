/** The webhook tables (db/migrations/20261203000000_webhooks.ts). */
import type { Sql } from '../../db/database.ts';
import type { DbBoolean } from '../../db/rows.ts';
import type { components } from '../../generated/openapi.ts';

/** The events a subscription may deliver: the document's `WebhookEventName`. */
export type WebhookEventName = components['schemas']['WebhookEventName'];
/** The signing contracts: `legacy` (meeting.completed's bare hex HMAC of the body) and `v1` (timestamped, `v1=`). */
export type SigningContract = 'legacy' | 'v1';
export type DeliveryStatus = 'pending' | 'delivering' | 'succeeded' | 'failed';

export interface DbWebhookProposalRow {
  id: string;
  workspace_id: string;
  url: string;
  event: WebhookEventName;
  /** JSON array. */
  resource_types: string;
  proposed_by_key: string;
  proposed_by_member: string | null;
  status: 'pending' | 'approved' | 'rejected' | 'expired';
  expires_at: number;
  decided_by: string | null;
  decided_at: number | null;
  webhook_id: string | null;
  created_at: number;
}

/** Subscriptions the service never attempts itself: `webhooks listen` receives them (listen.ts). */
export const LISTENER_SCHEME = 'listen:';
/** The event of a test delivery queued for a listener (never an event of the API: ListWebhookEvents leaves it out). */
export const TEST_EVENT = 'webhook.test';

export interface DbWebhookSubscriptionRow {
  id: string;
  workspace_id: string;
  url: string;
  event: WebhookEventName;
  resource_types: string;
  enabled: DbBoolean;
  enabled_since: number;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: number | null;
  consecutive_failures: number;
  disabled_at: number | null;
  disabled_reason: string | null;
  proposal_id: string;
  approved_by: string;
  /** The key whose access it delivers with: the proposer's, or the key that replaced it. */
  access_key_id: string | null;
  /** The member that key acted for when proposing (their role must still read every type). */
  access_member_id: string | null;
  /** Why it stopped when that access was lost (see AccessLoss), else null. */
  access_lost: string | null;
  /** How deliveries and test deliveries are signed (migration 20261229000000): `legacy` bare hex, or `v1=` with a timestamp. */
  signing_contract: SigningContract;
  /** When and by whom (a member id, or `operator`) a legacy subscription was moved to `v1`; null before. */
  signing_contract_changed_at: number | null;
  signing_contract_changed_by: string | null;
  last_attempt_at: number | null;
  last_success_at: number | null;
  last_failure_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface DbWebhookDeliveryRow {
  id: string;
  workspace_id: string;
  webhook_id: string;
  event_id: string;
  event_type: WebhookEventName;
  resource_type: string | null;
  record_id: string | null;
  event_occurred_at: number;
  payload: string;
  status: DeliveryStatus;
  attempts: number;
  first_attempt_at: number | null;
  next_attempt_at: number | null;
  last_attempt_at: number | null;
  last_status_code: number | null;
  last_error: string | null;
  leased_by: string | null;
  lease_until: number | null;
  replay_of: string | null;
  created_at: number;
  finished_at: number | null;
}

export interface DbWebhookAttemptRow {
  id: string;
  delivery_id: string;
  webhook_id: string;
  workspace_id: string;
  attempt: number;
  started_at: number;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  response_body: string | null;
  next_attempt_at: number | null;
}

const placeholders = (n: number) => Array.from({ length: n }, () => '?').join(', ');
const forUpdate = (sql: Sql) => (sql.dialect === 'pg' ? ' FOR UPDATE' : '');

// ---- Proposals -------------------------------------------------------------------------------------

export async function insertProposal(sql: Sql, p: DbWebhookProposalRow): Promise<void> {
  await sql.run(
    `INSERT INTO webhook_proposals (id, workspace_id, url, event, resource_types, proposed_by_key, proposed_by_member, status, expires_at, decided_by, decided_at, webhook_id, created_at)
     VALUES (${placeholders(13)})`,
    [p.id, p.workspace_id, p.url, p.event, p.resource_types, p.proposed_by_key, p.proposed_by_member, p.status, p.expires_at, p.decided_by, p.decided_at, p.webhook_id, p.created_at],
  );
}

export function findProposal(sql: Sql, id: string, lock = false): Promise<DbWebhookProposalRow | undefined> {
  return sql.one<DbWebhookProposalRow>(`SELECT * FROM webhook_proposals WHERE id = ?${lock ? forUpdate(sql) : ''}`, [id]);
}

export function decideProposal(sql: Sql, id: string, status: 'approved' | 'rejected', by: string, now: number, webhookId: string | null): Promise<number> {
  return sql.run(`UPDATE webhook_proposals SET status = ?, decided_by = ?, decided_at = ?, webhook_id = ? WHERE id = ? AND status = 'pending'`, [status, by, now, webhookId, id]);
}

export function expireProposals(sql: Sql, now: number): Promise<number> {
  return sql.run(`UPDATE webhook_proposals SET status = 'expired' WHERE status = 'pending' AND expires_at <= ?`, [now]);
}

export function listPendingProposals(sql: Sql, workspaceId: string, now: number): Promise<DbWebhookProposalRow[]> {
  return sql.all<DbWebhookProposalRow>(`SELECT * FROM webhook_proposals WHERE workspace_id = ? AND status = 'pending' AND expires_at > ? ORDER BY created_at DESC, id DESC`, [workspaceId, now]);
}

// ---- Subscriptions ---------------------------------------------------------------------------------

export async function insertSubscription(sql: Sql, s: DbWebhookSubscriptionRow): Promise<void> {
  await sql.run(
    `INSERT INTO webhook_subscriptions (id, workspace_id, url, event, resource_types, enabled, enabled_since, secret, previous_secret, previous_secret_until, consecutive_failures,
       disabled_at, disabled_reason, proposal_id, approved_by, access_key_id, access_member_id, access_lost, last_attempt_at, last_success_at, last_failure_at, created_at, updated_at,
       signing_contract, signing_contract_changed_at, signing_contract_changed_by)
     VALUES (${placeholders(26)})`,
    [
      s.id, s.workspace_id, s.url, s.event, s.resource_types, Boolean(s.enabled), s.enabled_since, s.secret, s.previous_secret, s.previous_secret_until, s.consecutive_failures,
      s.disabled_at, s.disabled_reason, s.proposal_id, s.approved_by, s.access_key_id, s.access_member_id, s.access_lost, s.last_attempt_at, s.last_success_at, s.last_failure_at,
      s.created_at, s.updated_at, s.signing_contract, s.signing_contract_changed_at, s.signing_contract_changed_by,
    ],
  );
}

export function findSubscription(sql: Sql, workspaceId: string, id: string, lock = false): Promise<DbWebhookSubscriptionRow | undefined> {
  return sql.one<DbWebhookSubscriptionRow>(`SELECT * FROM webhook_subscriptions WHERE workspace_id = ? AND id = ?${lock ? forUpdate(sql) : ''}`, [workspaceId, id]);
}

/** Subscriptions of a workspace in (created_at, id) order after a position. */
export function listSubscriptions(sql: Sql, workspaceId: string, after: { t: number; i: string } | null, limit: number): Promise<DbWebhookSubscriptionRow[]> {
  return after
    ? sql.all<DbWebhookSubscriptionRow>(
        `SELECT * FROM webhook_subscriptions WHERE workspace_id = ? AND (created_at > ? OR (created_at = ? AND id > ?)) ORDER BY created_at, id LIMIT ?`,
        [workspaceId, after.t, after.t, after.i, limit],
      )
    : sql.all<DbWebhookSubscriptionRow>(`SELECT * FROM webhook_subscriptions WHERE workspace_id = ? ORDER BY created_at, id LIMIT ?`, [workspaceId, limit]);
}

/** A listener whose process has not said it is alive (`updated_at`) for this long gets no new deliveries. */
export const LISTENER_STALE_MS = 60_000;

/** The enabled subscriptions to an event; a listener only while its process is alive (heartbeat within LISTENER_STALE_MS). */
export function subscribersOf(sql: Sql, workspaceId: string, event: string, now: number): Promise<DbWebhookSubscriptionRow[]> {
  return sql.all<DbWebhookSubscriptionRow>(
    `SELECT * FROM webhook_subscriptions WHERE workspace_id = ? AND event = ? AND enabled = ? AND (url NOT LIKE '${LISTENER_SCHEME}%' OR updated_at >= ?)`,
    [workspaceId, event, true, now - LISTENER_STALE_MS],
  );
}

/** A listener's heartbeat (`webhooks listen`): its process is alive now. */
export function touchListener(sql: Sql, id: string, now: number): Promise<number> {
  return sql.run(`UPDATE webhook_subscriptions SET updated_at = ? WHERE id = ?`, [now, id]);
}

/** A subscription with its workspace's auth version (moved by every change of keys, grants and members). */
export function subscriptionForAttempt(sql: Sql, id: string): Promise<(DbWebhookSubscriptionRow & { auth_version: number }) | undefined> {
  return sql.one(`SELECT s.*, w.auth_version FROM webhook_subscriptions s JOIN workspaces w ON w.id = s.workspace_id WHERE s.id = ?`, [id]);
}

/** What a key may do, for a subscription's access check: revoked or not, its grants (JSON) and delegation. */
export function keyForAccess(sql: Sql, workspaceId: string, keyId: string): Promise<{ id: string; name: string; revoked_at: number | null; resources: string; delegation: string } | undefined> {
  return sql.one(`SELECT id, name, revoked_at, resources, delegation FROM api_keys WHERE workspace_id = ? AND id = ?`, [workspaceId, keyId]);
}

/** The newest key made to replace `keyId` (`admin key replace`), a live one first. */
export function replacementOf(sql: Sql, workspaceId: string, keyId: string): Promise<{ id: string; revoked_at: number | null } | undefined> {
  return sql.one(
    `SELECT id, revoked_at FROM api_keys WHERE workspace_id = ? AND replaces_key_id = ? ORDER BY CASE WHEN revoked_at IS NULL THEN 0 ELSE 1 END, created_at DESC, id DESC LIMIT 1`,
    [workspaceId, keyId],
  );
}

export async function keyActsFor(sql: Sql, keyId: string, memberId: string): Promise<boolean> {
  return (await sql.one(`SELECT 1 AS ok FROM api_key_delegates WHERE key_id = ? AND member_id = ?`, [keyId, memberId])) !== undefined;
}

export function memberForAccess(sql: Sql, workspaceId: string, memberId: string): Promise<{ id: string; name: string; role: string; disabled_at: number | null } | undefined> {
  return sql.one(`SELECT id, name, role, disabled_at FROM members WHERE workspace_id = ? AND id = ?`, [workspaceId, memberId]);
}

/** Hands a subscription to the key that replaced its key (only while it still names the old one). */
export function handOver(sql: Sql, id: string, fromKey: string, toKey: string, now: number): Promise<number> {
  return sql.run(`UPDATE webhook_subscriptions SET access_key_id = ?, updated_at = ? WHERE id = ? AND access_key_id = ?`, [toKey, now, id, fromKey]);
}

/** Stops an enabled subscription whose access was lost; false when it was already stopped. */
export async function stopForLostAccess(sql: Sql, id: string, loss: string, reason: string, now: number): Promise<boolean> {
  const changed = await sql.run(
    `UPDATE webhook_subscriptions SET enabled = ?, disabled_at = ?, disabled_reason = ?, access_lost = ?, updated_at = ? WHERE id = ? AND enabled = ?`,
    [false, now, reason.slice(0, 300), loss, now, id, true],
  );
  return changed > 0;
}

// ---- Deliveries ------------------------------------------------------------------------------------

/** Inserts a delivery; a first delivery of an event the subscription already has is ignored. True when inserted. */
export async function insertDelivery(sql: Sql, d: DbWebhookDeliveryRow): Promise<boolean> {
  const conflict = d.replay_of === null ? ' ON CONFLICT (webhook_id, event_id) WHERE replay_of IS NULL DO NOTHING' : '';
  const changed = await sql.run(
    `INSERT INTO webhook_deliveries (id, workspace_id, webhook_id, event_id, event_type, resource_type, record_id, event_occurred_at, payload, status, attempts, first_attempt_at,
       next_attempt_at, last_attempt_at, last_status_code, last_error, leased_by, lease_until, replay_of, created_at, finished_at)
     VALUES (${placeholders(21)})${conflict}`,
    [
      d.id, d.workspace_id, d.webhook_id, d.event_id, d.event_type, d.resource_type, d.record_id, d.event_occurred_at, d.payload, d.status, d.attempts, d.first_attempt_at,
      d.next_attempt_at, d.last_attempt_at, d.last_status_code, d.last_error, d.leased_by, d.lease_until, d.replay_of, d.created_at, d.finished_at,
    ],
  );
  return changed > 0;
}

export function findDelivery(sql: Sql, webhookId: string, id: string): Promise<DbWebhookDeliveryRow | undefined> {
  return sql.one<DbWebhookDeliveryRow>(`SELECT * FROM webhook_deliveries WHERE webhook_id = ? AND id = ?`, [webhookId, id]);
}

/** The newest delivery of an event to a subscription. */
export function latestDeliveryOf(sql: Sql, webhookId: string, eventId: string): Promise<DbWebhookDeliveryRow | undefined> {
  return sql.one<DbWebhookDeliveryRow>(`SELECT * FROM webhook_deliveries WHERE webhook_id = ? AND event_id = ? ORDER BY created_at DESC, id DESC LIMIT 1`, [webhookId, eventId]);
}

/** A subscription's deliveries newest first, before a (created_at, id) position. */
export function listDeliveries(sql: Sql, webhookId: string, status: string | undefined, before: { t: number; i: string } | null, limit: number, tests = false): Promise<DbWebhookDeliveryRow[]> {
  const where = ['webhook_id = ?'];
  const params: Array<string | number> = [webhookId];
  // A listener's test deliveries show on the webhook's page, never as events of the API.
  if (!tests) (where.push('event_type <> ?'), params.push(TEST_EVENT));
  if (status) (where.push('status = ?'), params.push(status));
  if (before) (where.push('(created_at < ? OR (created_at = ? AND id < ?))'), params.push(before.t, before.t, before.i));
  return sql.all<DbWebhookDeliveryRow>(`SELECT * FROM webhook_deliveries WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT ?`, [...params, limit]);
}

/** Events of a subscription whose latest delivery failed and was created in [since, until). */
export function failedDeliveriesIn(sql: Sql, webhookId: string, since: number, until: number): Promise<DbWebhookDeliveryRow[]> {
  return sql.all<DbWebhookDeliveryRow>(
    `SELECT d.* FROM webhook_deliveries d
     WHERE d.webhook_id = ? AND d.status = 'failed' AND d.created_at >= ? AND d.created_at < ?
       AND NOT EXISTS (SELECT 1 FROM webhook_deliveries n WHERE n.webhook_id = d.webhook_id AND n.event_id = d.event_id AND (n.created_at > d.created_at OR (n.created_at = d.created_at AND n.id > d.id)))
     ORDER BY d.created_at, d.id`,
    [webhookId, since, until],
  );
}

export function listAttempts(sql: Sql, deliveryId: string, after: number, limit: number): Promise<DbWebhookAttemptRow[]> {
  return sql.all<DbWebhookAttemptRow>(`SELECT * FROM webhook_attempts WHERE delivery_id = ? AND attempt > ? ORDER BY attempt LIMIT ?`, [deliveryId, after, limit]);
}

export async function insertAttempt(sql: Sql, a: DbWebhookAttemptRow): Promise<void> {
  await sql.run(
    `INSERT INTO webhook_attempts (id, delivery_id, webhook_id, workspace_id, attempt, started_at, duration_ms, status_code, error, response_body, next_attempt_at) VALUES (${placeholders(11)})`,
    [a.id, a.delivery_id, a.webhook_id, a.workspace_id, a.attempt, a.started_at, a.duration_ms, a.status_code, a.error, a.response_body, a.next_attempt_at],
  );
}

/**
 * Counts one attempt in a fixed one-minute window of `bucket`; false (nothing counted) when the window
 * already holds `limit`.
 */
export async function takeWindowSlot(sql: Sql, bucket: string, windowStart: number, limit: number): Promise<boolean> {
  const row = await sql.one<{ count: number }>(
    `INSERT INTO webhook_rate_windows (bucket, window_start, count) VALUES (?, ?, 1)
     ON CONFLICT (bucket, window_start) DO UPDATE SET count = webhook_rate_windows.count + 1 WHERE webhook_rate_windows.count < ?
     RETURNING count`,
    [bucket, windowStart, limit],
  );
  return row !== undefined;
}

/** Gives back a slot taken in a window (the attempt was not made). */
export async function releaseWindowSlot(sql: Sql, bucket: string, windowStart: number): Promise<void> {
  await sql.run(`UPDATE webhook_rate_windows SET count = count - 1 WHERE bucket = ? AND window_start = ? AND count > 0`, [bucket, windowStart]);
}

/** Deletes finished deliveries (and their attempts) created before `before`, old rate windows and decided or expired proposals. */
export async function pruneWebhooks(sql: Sql, before: number, now: number): Promise<{ deliveries: number }> {
  await sql.run(`DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE created_at < ? AND status IN ('succeeded', 'failed'))`, [before]);
  const deliveries = await sql.run(`DELETE FROM webhook_deliveries WHERE created_at < ? AND status IN ('succeeded', 'failed')`, [before]);
  await sql.run(`DELETE FROM webhook_rate_windows WHERE window_start < ?`, [now - 5 * 60_000]);
  await sql.run(`DELETE FROM webhook_proposals WHERE status <> 'approved' AND created_at < ?`, [before]);
  return { deliveries };
}

// ---- Pages (handlers/webhooks/pages.ts) ------------------------------------------------------------

/** The attempts of several deliveries (a page of a subscription's deliveries), in attempt order. */
export function attemptsOfDeliveries(sql: Sql, deliveryIds: readonly string[]): Promise<DbWebhookAttemptRow[]> {
  if (!deliveryIds.length) return Promise.resolve([]);
  return sql.all<DbWebhookAttemptRow>(`SELECT * FROM webhook_attempts WHERE delivery_id IN (${placeholders(deliveryIds.length)}) ORDER BY delivery_id, attempt`, [...deliveryIds]);
}

/** The name of a workspace's API key (who proposed a webhook); never its secret hash. */
export function keyNameOf(sql: Sql, workspaceId: string, keyId: string): Promise<{ id: string; name: string; revoked_at: number | null } | undefined> {
  return sql.one(`SELECT id, name, revoked_at FROM api_keys WHERE workspace_id = ? AND id = ?`, [workspaceId, keyId]);
}
