/** The webhook operations: propose, list subscriptions, read deliveries and attempts, replay, recover. */
import { resourceTypes } from '../../generated/catalogue.ts';
import type { components } from '../../generated/openapi.ts';
import { DEFAULT_PAGE_LIMIT, decodeCursor, encodeCursor, positionField } from '../../server/cursor.ts';
import { conflict, forbidden, invalidInput, notFound } from '../../server/errors.ts';
import type { EventKindDeclaration } from '../../server/events.ts';
import { newId } from '../../server/ids.ts';
import type { NamespaceHandlers } from '../../server/module.ts';
import type { OperationContext } from '../../server/operation.ts';
import { newDelivery, replayEvent, RETENTION_MS } from './delivery.ts';
import {
  type DbWebhookDeliveryRow,
  type DbWebhookSubscriptionRow,
  failedDeliveriesIn,
  findDelivery,
  findSubscription,
  insertDelivery,
  insertProposal,
  listAttempts,
  listDeliveries,
  listSubscriptions,
} from './queries.ts';
import { readsEveryType } from './readable.ts';
import { checkProposedUrl, PROPOSAL_TTL_MS, WebhookActionError } from './subscriptions.ts';

const TIME_CURSOR = { t: positionField.millis, i: { type: 'string', maxLength: 40 } } as const;
const ATTEMPT_CURSOR = { n: { type: 'integer', minimum: 0, maximum: 100 } } as const;
const MISMATCH = 'cursor belongs to a listing with other filters; send the same filters.';

/** Whether the caller may read a type: the key's grant and, acting for a member, that member's role (the pages' rule too). */
const reads = (ctx: OperationContext, type: string) => readsEveryType(ctx.credential, ctx.member, [type]);

/** A subscription is visible only when the caller reads every one of its types. */
const visible = (ctx: OperationContext, s: DbWebhookSubscriptionRow) => readsEveryType(ctx.credential, ctx.member, JSON.parse(s.resource_types) as string[]);

async function visibleSubscription(ctx: OperationContext, id: string, lock = false): Promise<DbWebhookSubscriptionRow> {
  const s = await findSubscription(ctx.sql, ctx.workspaceId, id, lock);
  if (!s || !visible(ctx, s)) throw notFound(`No webhook subscription ${id} is visible to this credential.`);
  return s;
}

function subscriptionView(s: DbWebhookSubscriptionRow) {
  const n = (v: number | null) => (v === null ? null : Number(v));
  return {
    webhook_id: s.id,
    event: s.event,
    resource_types: JSON.parse(s.resource_types) as string[],
    enabled: Boolean(s.enabled),
    created_at: Number(s.created_at),
    last_attempt_at: n(s.last_attempt_at),
    last_success_at: n(s.last_success_at),
    last_failure_at: n(s.last_failure_at),
    consecutive_failures: Number(s.consecutive_failures),
    disabled_at: n(s.disabled_at),
    signing_contract: s.signing_contract,
  };
}

export function deliveryView(d: DbWebhookDeliveryRow) {
  const n = (v: number | null) => (v === null ? null : Number(v));
  return {
    delivery_id: d.id,
    event_id: d.event_id,
    event: d.event_type,
    resource_type: d.resource_type,
    record_id: d.record_id,
    occurred_at: Number(d.event_occurred_at),
    status: d.status,
    attempts: Number(d.attempts),
    created_at: Number(d.created_at),
    last_attempt_at: n(d.last_attempt_at),
    next_attempt_at: n(d.next_attempt_at),
    last_status_code: n(d.last_status_code),
    last_error: d.last_error,
    replay_of: d.replay_of,
    // The payload of a module's event (signing, documents), as delivered.
    ...dataOf(d.payload),
  };
}

function dataOf(payload: string): { data?: components['schemas']['WebhookDelivery']['data'] } {
  const body = JSON.parse(payload) as { data?: unknown };
  return body.data && typeof body.data === 'object' ? { data: body.data as components['schemas']['WebhookDelivery']['data'] } : {};
}

/** A new delivery of an event already delivered to this subscription: same event id and payload. */
const replayOf = (d: DbWebhookDeliveryRow, now: number) => newDelivery(d, now, d.id);

/**
 * The operations. `kinds`: the event kinds the modules declare (signing's, documents'): subscribable
 * like the others, with no resource types, by a key granted the operation each names (`readWith`).
 */
export const webhookHandlers = (kinds: ReadonlyMap<string, EventKindDeclaration>): NamespaceHandlers<'webhooks'> => ({
  'webhooks.PrepareWebhook': async (input, ctx) => {
    const types = input.resource_types ?? [];
    const declared = kinds.get(input.event);
    const typeless = input.event === 'meeting.completed' || declared !== undefined;
    if (!typeless && !input.event.startsWith('resource.')) throw invalidInput(`event: no part of this service emits ${input.event}.`);
    if (typeless && types.length) throw invalidInput(`resource_types: ${input.event} takes none (omit it).`);
    if (!typeless && !types.length) throw invalidInput(`resource_types: ${input.event} needs at least one resource type (from GET /v1/operations).`);
    if (declared && !ctx.credential.operations.has(declared.readWith)) {
      throw forbidden(`This key is not granted ${declared.readWith}: a subscription to ${input.event} tells what that operation reads, so proposing one needs it.`);
    }
    for (const t of types) {
      if (!(resourceTypes as readonly string[]).includes(t)) {
        throw invalidInput(`resource_types: ${t} is not a published resource type (subscribable: ${resourceTypes.join(', ')}).`);
      }
      if (!reads(ctx, t)) throw forbidden(`This ${ctx.member ? `key, acting for ${ctx.member.name} (${ctx.member.role}),` : 'key'} may not read ${t}: a subscription carries only what its proposer may read.`);
    }
    let url: string;
    try {
      url = checkProposedUrl(input.url, ctx.config.egress);
    } catch (err) {
      if (err instanceof WebhookActionError) throw invalidInput(`url: ${err.message}`);
      throw err;
    }
    const id = newId('whp');
    const expiresAt = ctx.now + PROPOSAL_TTL_MS;
    await insertProposal(ctx.sql, {
      id,
      workspace_id: ctx.workspaceId,
      url,
      event: input.event,
      resource_types: JSON.stringify(types),
      proposed_by_key: ctx.credential.keyId,
      proposed_by_member: ctx.member?.id ?? null,
      status: 'pending',
      expires_at: expiresAt,
      decided_by: null,
      decided_at: null,
      webhook_id: null,
      created_at: ctx.now,
    });
    return {
      proposal_id: id,
      status: 'pending' as const,
      approval_url: new URL(`/settings/webhooks/proposals/${id}`, ctx.config.publicUrl).toString(),
      expires_at: expiresAt,
      event: input.event,
      resource_types: types,
    };
  },

  'webhooks.ListWebhookSubscriptions': async (input, ctx) => {
    const limit = input.limit ?? DEFAULT_PAGE_LIMIT;
    const filters = [ctx.workspaceId, ctx.credential.keyId, ctx.member?.id ?? null];
    let after = input.cursor ? await decodeCursor(ctx, input.cursor, TIME_CURSOR, filters, MISMATCH) : null;
    const items: DbWebhookSubscriptionRow[] = [];
    let more = false;
    // Invisible subscriptions are skipped, so a page may need more than one read.
    for (;;) {
      const rows = await listSubscriptions(ctx.sql, ctx.workspaceId, after, limit + 1);
      for (const r of rows) {
        if (!visible(ctx, r)) continue;
        if (items.length === limit) {
          more = true;
          break;
        }
        items.push(r);
      }
      if (more || rows.length <= limit) break;
      const last = rows.at(-1)!;
      after = { t: Number(last.created_at), i: last.id };
    }
    const last = items.at(-1);
    return {
      items: items.map(subscriptionView),
      has_more: more,
      next_cursor: more && last ? await encodeCursor(ctx, TIME_CURSOR, { t: Number(last.created_at), i: last.id }, filters) : null,
    };
  },

  'webhooks.ListWebhookEvents': async (input, ctx) => {
    const s = await visibleSubscription(ctx, input.webhook_id);
    const limit = input.limit ?? DEFAULT_PAGE_LIMIT;
    const filters = [ctx.workspaceId, s.id, input.status ?? null];
    const before = input.cursor ? await decodeCursor(ctx, input.cursor, TIME_CURSOR, filters, MISMATCH) : null;
    const rows = await listDeliveries(ctx.sql, s.id, input.status, before, limit + 1);
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    const more = rows.length > limit && last !== undefined;
    return {
      items: page.map(deliveryView),
      has_more: more,
      next_cursor: more ? await encodeCursor(ctx, TIME_CURSOR, { t: Number(last.created_at), i: last.id }, filters) : null,
    };
  },

  'webhooks.ListWebhookAttempts': async (input, ctx) => {
    const s = await visibleSubscription(ctx, input.webhook_id);
    const d = await findDelivery(ctx.sql, s.id, input.delivery_id);
    if (!d) throw notFound(`No delivery ${input.delivery_id} of subscription ${s.id}.`);
    const limit = input.limit ?? DEFAULT_PAGE_LIMIT;
    const filters = [ctx.workspaceId, s.id, d.id];
    const after = input.cursor ? await decodeCursor(ctx, input.cursor, ATTEMPT_CURSOR, filters, MISMATCH) : null;
    const rows = await listAttempts(ctx.sql, d.id, after?.n ?? 0, limit + 1);
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    const more = rows.length > limit && last !== undefined;
    const n = (v: number | null) => (v === null ? null : Number(v));
    return {
      items: page.map((a) => ({
        attempt_id: a.id,
        attempt: Number(a.attempt),
        started_at: Number(a.started_at),
        duration_ms: Number(a.duration_ms),
        status_code: n(a.status_code),
        error: a.error,
        response_body: a.response_body,
        next_attempt_at: n(a.next_attempt_at),
      })),
      has_more: more,
      next_cursor: more ? await encodeCursor(ctx, ATTEMPT_CURSOR, { n: Number(last.attempt) }, filters) : null,
    };
  },

  'webhooks.ReplayWebhookEvent': async (input, ctx) => {
    // Locked: two replays at once cannot both find the event's last delivery finished.
    const s = await visibleSubscription(ctx, input.webhook_id, true);
    const replay = await replayEvent(ctx.sql, s, input.event_id, ctx.now);
    if ('refused' in replay) throw replay.refused === 'gone' ? notFound(replay.message) : conflict(replay.message);
    return { item: deliveryView(replay) };
  },

  'webhooks.RecoverWebhookEvents': async (input, ctx) => {
    const s = await visibleSubscription(ctx, input.webhook_id, true);
    if (!s.enabled) throw conflict(`Subscription ${s.id} is disabled; enable it in settings, then recover.`);
    const since = Math.max(input.since, ctx.now - RETENTION_MS);
    const until = input.until ?? ctx.now + 1;
    if (until <= since) return { webhook_id: s.id, replayed: 0 };
    const failed = await failedDeliveriesIn(ctx.sql, s.id, since, until);
    for (const d of failed) await insertDelivery(ctx.sql, replayOf(d, ctx.now));
    return { webhook_id: s.id, replayed: failed.length };
  },
});
