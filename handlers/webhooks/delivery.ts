/**
 * Webhook delivery, at least once. The fan-out consumer (`webhooks.fanout`) reads the change-event
 * outbox and, in the transaction that advances its position, makes one delivery per (event, matching
 * enabled subscription): a unique key, so no event is delivered twice to a subscription by the
 * fan-out, whatever the number of processes. The delivery worker (`webhooks.deliver`, in every process
 * that runs jobs) claims due deliveries with a lease (`FOR UPDATE SKIP LOCKED` on PostgreSQL), makes
 * the attempt through the hardened egress (server/egress.ts) and records it; a worker killed
 * mid-attempt leaves the delivery leased, and once the lease ends another worker attempts it again.
 *
 * Attempts: up to 8, at offsets from the first attempt of 0, 30 s, 2 min 30 s, 10 min 30 s, 30 min,
 * 2 h, 8 h and 24 h (the seed's nominal retry times), each later by a jitter of up to 10 % of the gap
 * since the previous offset; a `429` or `503` whose `Retry-After` asks for longer is honoured. Success
 * is a 2xx answer within 10 s; a redirect is a failure and is not followed. Ten deliveries in a row
 * that exhaust their attempts, with no successful attempt since each began, disable the subscription
 * and notify the workspace's active owners and admins in their inbox.
 *
 * Limits: at most 600 attempts per workspace and 60 per subscription in each one-minute window
 * (fixed windows, kept in the database for every process); a delivery over a limit waits for the next
 * window without spending an attempt: deferred, never dropped.
 */
import type { Logger } from 'pino';
import type { Database, Sql } from '../../db/database.ts';
import type { Clock } from '../../server/clock.ts';
import type { ServiceConfig } from '../../server/config.ts';
import { EgressRefused, post } from '../../server/egress.ts';
import { newId, randomIdPart } from '../../server/ids.ts';
import { notify } from '../../server/inbox.ts';
import type { EventConsumer, OutboxEvent } from '../../server/outbox.ts';
import type { BackgroundWorker } from '../../server/workers.ts';
import {
  claimDueDeliveries,
  type DbWebhookDeliveryRow,
  type DbWebhookSubscriptionRow,
  insertAttempt,
  insertDelivery,
  subscribersOf,
  subscriptionsById,
  releaseWindowSlot,
  takeWindowSlot,
  type WebhookEventName,
} from './queries.ts';
import { signedHeaders } from './signing.ts';

/** Offsets of the 8 attempts from the first (ms). */
export const ATTEMPT_OFFSETS_MS = [0, 30_000, 150_000, 630_000, 1_800_000, 7_200_000, 28_800_000, 86_400_000] as const;
export const MAX_ATTEMPTS = ATTEMPT_OFFSETS_MS.length;
export const ATTEMPT_TIMEOUT_MS = 10_000;
export const RESPONSE_BODY_BYTES = 2048;
export const DISABLE_AFTER = 10;
export const WORKSPACE_ATTEMPTS_PER_MINUTE = 600;
export const SUBSCRIPTION_ATTEMPTS_PER_MINUTE = 60;
export const RETENTION_MS = 30 * 86_400_000;
const LEASE_MS = 60_000;
const BATCH = 64;
const CONCURRENCY = 32;
export const DELIVER_WORKER = 'webhooks.deliver';

interface Deps {
  readonly db: Database;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly config: ServiceConfig;
  readonly workers: { wake(name: string): void };
}

/** The body every attempt of an event's deliveries sends, byte for byte. */
export function payloadOf(event: Pick<OutboxEvent, 'id' | 'type' | 'resourceType' | 'recordId' | 'changedFields' | 'occurredAt'>, webhookId: string): string {
  if (event.type === 'meeting.completed') {
    return JSON.stringify({ event: event.type, event_id: event.id, webhook_id: webhookId, occurred_at: event.occurredAt, meeting_id: event.recordId });
  }
  return JSON.stringify({
    event: event.type,
    event_id: event.id,
    webhook_id: webhookId,
    occurred_at: event.occurredAt,
    resource_type: event.resourceType,
    record_id: event.recordId,
    ...(event.type === 'resource.updated' ? { changed_fields: event.changedFields ?? [] } : {}),
  });
}

type DeliveredEvent = Pick<DbWebhookDeliveryRow, 'workspace_id' | 'webhook_id' | 'event_id' | 'event_type' | 'resource_type' | 'record_id' | 'event_occurred_at' | 'payload'>;

/** A delivery of an event, due now: the first one (`replayOf` null) or a replay of an earlier delivery. */
export function newDelivery(event: DeliveredEvent, now: number, replayOf: string | null): DbWebhookDeliveryRow {
  return {
    workspace_id: event.workspace_id,
    webhook_id: event.webhook_id,
    event_id: event.event_id,
    event_type: event.event_type,
    resource_type: event.resource_type,
    record_id: event.record_id,
    event_occurred_at: event.event_occurred_at,
    payload: event.payload,
    id: newId('whd'),
    status: 'pending',
    attempts: 0,
    first_attempt_at: null,
    next_attempt_at: now,
    last_attempt_at: null,
    last_status_code: null,
    last_error: null,
    leased_by: null,
    lease_until: null,
    replay_of: replayOf,
    created_at: now,
    finished_at: null,
  };
}

const typesOf = (s: Pick<DbWebhookSubscriptionRow, 'resource_types'>) => JSON.parse(s.resource_types) as string[];

/** The consumer that makes deliveries. */
export function fanoutConsumer(deps: Deps): EventConsumer {
  let pending = false;
  return {
    // Subscriptions deliver what happens once they exist: a new database does not replay its history.
    startAt: 'end',
    async handle(event, sql) {
      if (event.private) return;
      const subscribers = await subscribersOf(sql, event.workspaceId, event.type);
      const now = deps.clock.now();
      for (const s of subscribers) {
        // Events committed before approval (or before the last re-enable) are not delivered; a type added later is never carried.
        if (event.occurredAt < Number(s.enabled_since)) continue;
        if (event.type !== 'meeting.completed' && !typesOf(s).includes(event.resourceType)) continue;
        const inserted = await insertDelivery(
          sql,
          newDelivery(
            {
              workspace_id: event.workspaceId,
              webhook_id: s.id,
              event_id: event.id,
              event_type: event.type as WebhookEventName,
              resource_type: event.type === 'meeting.completed' ? null : event.resourceType,
              record_id: event.recordId,
              event_occurred_at: event.occurredAt,
              payload: payloadOf(event, s.id),
            },
            now,
            null,
          ),
        );
        if (inserted) pending = true;
      }
    },
    afterCommit() {
      if (pending) {
        pending = false;
        deps.workers.wake(DELIVER_WORKER);
      }
    },
  };
}

/** Seconds or an HTTP date in `Retry-After`, as milliseconds from now; null when absent or unreadable. */
export function retryAfterMs(value: string | undefined, now: number): number | null {
  if (!value) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** When attempt `done + 1` is due, after `done` attempts that began at `firstAt` (with jitter). */
export function nextAttemptAt(firstAt: number, done: number, random = Math.random): number {
  const offset = ATTEMPT_OFFSETS_MS[done]!;
  const gap = offset - ATTEMPT_OFFSETS_MS[done - 1]!;
  return firstAt + offset + Math.floor(random() * gap * 0.1);
}

type Outcome = { ok: true; status: number; body: string; durationMs: number } | { ok: false; status: number | null; error: string; body: string | null; durationMs: number; retryAfterMs: number | null };

/** The delivery worker. */
export function deliveryWorker(deps: Deps): BackgroundWorker {
  const { db, clock, logger, config } = deps;
  const owner = `webhooks-${process.pid}-${randomIdPart(8)}`;

  async function send(d: DbWebhookDeliveryRow, s: DbWebhookSubscriptionRow, attemptId: string, now: number): Promise<Outcome> {
    const previous = s.previous_secret && Number(s.previous_secret_until ?? 0) > now ? s.previous_secret : null;
    const legacy = d.event_type === 'meeting.completed';
    // Resource events carry both signatures during a rotation's grace period; the legacy signature has
    // room for one, so it keeps the old secret until the grace period ends (then the new one).
    const secrets = legacy ? [previous ?? s.secret] : [s.secret, ...(previous ? [previous] : [])];
    const headers = {
      'Content-Type': 'application/json',
      'User-Agent': 'WorkspaceOperations-Webhooks/1',
      ...signedHeaders({ legacy, eventId: d.event_id, attemptId, body: d.payload, nowMs: now, secrets }),
    };
    let result: Awaited<ReturnType<typeof post>>;
    try {
      result = await post(s.url, { headers, body: d.payload, timeoutMs: ATTEMPT_TIMEOUT_MS, maxResponseBytes: RESPONSE_BODY_BYTES }, config.egress);
    } catch (err) {
      // The reason only: the message names the host and what it resolved to, which API readers of attempts may not see.
      if (err instanceof EgressRefused) return { ok: false, status: null, error: `destination refused: ${err.reason}`, body: null, durationMs: 0, retryAfterMs: null };
      throw err;
    }
    if (result.kind === 'error') return { ok: false, status: null, error: result.error, body: null, durationMs: result.durationMs, retryAfterMs: null };
    if (result.status >= 200 && result.status < 300) return { ok: true, status: result.status, body: result.body, durationMs: result.durationMs };
    const error = result.status >= 300 && result.status < 400 ? `redirect (not followed): ${result.status}` : `HTTP ${result.status}`;
    const retry = result.status === 429 || result.status === 503 ? retryAfterMs(result.headers['retry-after'], now) : null;
    return { ok: false, status: result.status, error, body: result.body, durationMs: result.durationMs, retryAfterMs: retry };
  }

  /** Puts a claimed delivery back for later without an attempt (rate limit). */
  async function defer(d: DbWebhookDeliveryRow, at: number): Promise<void> {
    await db.sql.run(`UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = ?, leased_by = NULL, lease_until = NULL WHERE id = ? AND leased_by = ?`, [at, d.id, owner]);
  }

  async function finishWithout(d: DbWebhookDeliveryRow, error: string): Promise<void> {
    await db.sql.run(
      `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, last_error = ?, finished_at = ?, leased_by = NULL, lease_until = NULL WHERE id = ? AND leased_by = ?`,
      [error, clock.now(), d.id, owner],
    );
  }

  async function attempt(d: DbWebhookDeliveryRow): Promise<void> {
    // Read per attempt: an earlier attempt of the batch (or a person) may have disabled it or rotated its secret.
    const [s] = await subscriptionsById(db.sql, [d.webhook_id]);
    if (!s || !s.enabled) return finishWithout(d, s ? 'the subscription is disabled' : 'the subscription was deleted');
    const now = clock.now();
    const window = now - (now % 60_000);
    // The subscription's slot first: a backlogged subscription must not spend the workspace's budget
    // on attempts it may not make; a workspace refusal gives the subscription's slot back.
    const later = window + 60_000 + Math.floor(Math.random() * 1000);
    if (!(await takeWindowSlot(db.sql, `wh:${d.webhook_id}`, window, SUBSCRIPTION_ATTEMPTS_PER_MINUTE))) return defer(d, later);
    if (!(await takeWindowSlot(db.sql, `ws:${d.workspace_id}`, window, WORKSPACE_ATTEMPTS_PER_MINUTE))) {
      await releaseWindowSlot(db.sql, `wh:${d.webhook_id}`, window);
      return defer(d, later);
    }
    const number = Number(d.attempts) + 1;
    const firstAt = d.first_attempt_at === null ? now : Number(d.first_attempt_at);
    const attemptId = newId('wha');
    const outcome = await send(d, s, attemptId, now);
    const exhausted = !outcome.ok && number >= MAX_ATTEMPTS;
    let next: number | null = null;
    if (!outcome.ok && !exhausted) {
      // Never sooner than half the nominal gap after this attempt (after a long Retry-After or a deferral
      // the schedule's later offsets may already be past: they do not fire back to back).
      next = Math.max(nextAttemptAt(firstAt, number), now + (ATTEMPT_OFFSETS_MS[number]! - ATTEMPT_OFFSETS_MS[number - 1]!) / 2);
      if (outcome.retryAfterMs !== null) next = Math.max(next, now + Math.min(outcome.retryAfterMs, 86_400_000));
    }
    const status = outcome.ok ? 'succeeded' : exhausted ? 'failed' : 'pending';
    const error = outcome.ok ? null : outcome.error;
    await db.tx(async (sql) => {
      const changed = await sql.run(
        `UPDATE webhook_deliveries SET status = ?, attempts = ?, first_attempt_at = ?, next_attempt_at = ?, last_attempt_at = ?, last_status_code = ?, last_error = ?,
           leased_by = NULL, lease_until = NULL, finished_at = ?
         WHERE id = ? AND leased_by = ? AND status = 'delivering'`,
        [status, number, firstAt, next, now, outcome.status, error, status === 'pending' ? null : now, d.id, owner],
      );
      // Our lease ran out and another worker took the delivery over: its attempt is the one recorded.
      if (!changed) return;
      await insertAttempt(sql, {
        id: attemptId,
        delivery_id: d.id,
        webhook_id: d.webhook_id,
        workspace_id: d.workspace_id,
        attempt: number,
        started_at: now,
        duration_ms: Math.round(outcome.durationMs),
        status_code: outcome.status,
        error,
        response_body: outcome.body === null ? null : outcome.body.slice(0, RESPONSE_BODY_BYTES),
        next_attempt_at: next,
      });
      await recordOnSubscription(sql, d, outcome.ok, exhausted, firstAt, now, error);
    });
  }

  /** The subscription's timestamps and failure count; the tenth exhausted delivery in a row disables it. */
  async function recordOnSubscription(sql: Sql, d: DbWebhookDeliveryRow, ok: boolean, exhausted: boolean, firstAt: number, now: number, error: string | null): Promise<void> {
    const s = await sql.one<DbWebhookSubscriptionRow>(`SELECT * FROM webhook_subscriptions WHERE id = ?${sql.dialect === 'pg' ? ' FOR UPDATE' : ''}`, [d.webhook_id]);
    if (!s) return;
    const max = (a: number | null, b: number) => (a === null ? b : Math.max(Number(a), b));
    const lastSuccess = ok ? max(s.last_success_at, now) : s.last_success_at === null ? null : Number(s.last_success_at);
    let failures = Number(s.consecutive_failures);
    // A success since this delivery began means the receiver works: its late failure counts for nothing.
    if (ok) failures = 0;
    else if (exhausted && (lastSuccess === null || lastSuccess < firstAt)) failures += 1;
    const disable = Boolean(s.enabled) && failures >= DISABLE_AFTER;
    await sql.run(
      `UPDATE webhook_subscriptions SET last_attempt_at = ?, last_success_at = ?, last_failure_at = ?, consecutive_failures = ?, updated_at = ?
         ${disable ? ", enabled = ?, disabled_at = ?, disabled_reason = ?" : ''}
       WHERE id = ?`,
      [
        max(s.last_attempt_at, now), lastSuccess, ok ? s.last_failure_at : max(s.last_failure_at, now), failures, now,
        ...(disable ? [false, now, `${DISABLE_AFTER} deliveries in a row exhausted their ${MAX_ATTEMPTS} attempts`] : []),
        s.id,
      ],
    );
    if (disable) {
      const host = new URL(s.url).host;
      await notify(sql, s.workspace_id, { ownersAndAdmins: true }, {
        kind: 'webhooks.disabled',
        title: `Webhook to ${host} disabled`,
        body: `${DISABLE_AFTER} deliveries in a row to ${host} (${s.event}) failed after ${MAX_ATTEMPTS} attempts each; the last error: ${error ?? 'see the attempts'}. ` +
          'No new events are delivered while it is disabled. Repair the receiver, then enable it again in settings (a test delivery is sent first); failed events can be replayed.',
        link: `/settings/webhooks/${encodeURIComponent(s.id)}`,
        sourceId: s.id,
      }, now);
      logger.warn({ webhook: s.id, workspace: s.workspace_id }, 'webhook subscription disabled after repeated failures');
    }
  }

  return {
    intervalMs: 500,
    async runOnce() {
      const now = clock.now();
      const claimed = await claimDueDeliveries(db.sql, owner, now, now + LEASE_MS, BATCH);
      if (!claimed.length) return 0;
      let next = 0;
      const lane = async () => {
        while (next < claimed.length) {
          const d = claimed[next++]!;
          try {
            await attempt(d);
          } catch (err) {
            // Left leased: another attempt follows when the lease ends.
            logger.error({ err, delivery: d.id }, 'webhook attempt could not be recorded');
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(CONCURRENCY, claimed.length) }, lane));
      return claimed.length;
    },
  };
}
