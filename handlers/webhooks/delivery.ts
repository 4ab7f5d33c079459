/**
 * Webhook delivery, at least once. The fan-out consumer (`webhooks.fanout`) reads the change-event
 * outbox and, in the transaction that advances its position, makes one delivery per (event, matching
 * enabled subscription): a unique key, so no event is delivered twice to a subscription by the
 * fan-out, whatever the number of processes. The delivery worker (worker.ts) attempts them.
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
import type { Database } from '../../db/database.ts';
import type { Clock } from '../../server/clock.ts';
import type { ServiceConfig } from '../../server/config.ts';
import type { EgressClient } from '../../server/egress.ts';
import { newId } from '../../server/ids.ts';
import type { EventConsumer, OutboxEvent } from '../../server/outbox.ts';
import type { Sql } from '../../db/database.ts';
import { type DbWebhookDeliveryRow, type DbWebhookSubscriptionRow, insertDelivery, latestDeliveryOf, subscribersOf, type WebhookEventName } from './queries.ts';

/** Offsets of the 8 attempts from the first (ms). */
export const ATTEMPT_OFFSETS_MS = [0, 30_000, 150_000, 630_000, 1_800_000, 7_200_000, 28_800_000, 86_400_000] as const;
export const MAX_ATTEMPTS = ATTEMPT_OFFSETS_MS.length;
export const ATTEMPT_TIMEOUT_MS = 10_000;
export const RESPONSE_BODY_BYTES = 2048;
export const DISABLE_AFTER = 10;
export const WORKSPACE_ATTEMPTS_PER_MINUTE = 600;
export const SUBSCRIPTION_ATTEMPTS_PER_MINUTE = 60;
export const RETENTION_MS = 30 * 86_400_000;
export const DELIVER_WORKER = 'webhooks.deliver';

export interface DeliveryDeps {
  readonly db: Database;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly config: ServiceConfig;
  readonly workers: { wake(name: string): void };
  readonly egress: EgressClient;
  /** The kinds the modules declare: delivered with their `data`, to subscriptions of no resource type. */
  readonly eventKinds: ReadonlyMap<string, unknown>;
}

/** The body every attempt of an event's deliveries sends, byte for byte. */
export function payloadOf(event: Pick<OutboxEvent, 'id' | 'type' | 'resourceType' | 'recordId' | 'changedFields' | 'occurredAt' | 'data'>, webhookId: string): string {
  if (event.type === 'meeting.completed') {
    return JSON.stringify({ event: event.type, event_id: event.id, webhook_id: webhookId, occurred_at: event.occurredAt, meeting_id: event.recordId });
  }
  // A module's declared kind: its payload, as it declared it (ids, status, counts; never links or contents).
  if (event.data) return JSON.stringify({ event: event.type, event_id: event.id, webhook_id: webhookId, occurred_at: event.occurredAt, data: event.data });
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
export function fanoutConsumer(deps: DeliveryDeps): EventConsumer {
  let pending = false;
  return {
    // Subscriptions deliver what happens once they exist: a new database does not replay its history.
    startAt: 'end',
    async handle(event, sql) {
      if (event.private) return;
      const now = deps.clock.now();
      const subscribers = await subscribersOf(sql, event.workspaceId, event.type, now);
      for (const s of subscribers) {
        // Events committed before approval (or before the last re-enable) are not delivered; a type added later is never carried.
        if (event.occurredAt < Number(s.enabled_since)) continue;
        const typeless = event.type === 'meeting.completed' || deps.eventKinds.has(event.type);
        if (!typeless && !typesOf(s).includes(event.resourceType)) continue;
        const inserted = await insertDelivery(
          sql,
          newDelivery(
            {
              workspace_id: event.workspaceId,
              webhook_id: s.id,
              event_id: event.id,
              event_type: event.type as WebhookEventName,
              resource_type: typeless ? null : event.resourceType,
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

/** Why an event cannot be replayed now: `gone` (not delivered to it in the retention), `disabled`, `busy` (its last delivery is still running). */
export type ReplayRefusal = { refused: 'gone' | 'disabled' | 'busy'; message: string };

/**
 * Sends an event to a subscription again (webhooks.ReplayWebhookEvent and the webhook page's Resend):
 * a new delivery of the same event id, made from its latest delivery, in the caller's transaction
 * (the subscription row locked by the caller, so two replays at once cannot both find it finished).
 */
export async function replayEvent(sql: Sql, s: DbWebhookSubscriptionRow, eventId: string, now: number): Promise<DbWebhookDeliveryRow | ReplayRefusal> {
  const latest = await latestDeliveryOf(sql, s.id, eventId);
  if (!latest || Number(latest.created_at) < now - RETENTION_MS) return { refused: 'gone', message: `Event ${eventId} was not delivered to ${s.id} in the last 30 days.` };
  if (!s.enabled) return { refused: 'disabled', message: `Subscription ${s.id} is disabled; enable it in settings, then replay.` };
  if (latest.status === 'pending' || latest.status === 'delivering') return { refused: 'busy', message: `Event ${eventId} is still being delivered (delivery ${latest.id}); replay it once that delivery has finished.` };
  const replay = newDelivery(latest, now, latest.id);
  await insertDelivery(sql, replay);
  return replay;
}
