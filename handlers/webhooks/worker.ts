/**
 * The delivery worker (`webhooks.deliver`, in every process that runs jobs). A slow or dead receiver
 * costs only its own deliveries (Svix and Stripe isolate per endpoint): attempts run concurrently, at
 * most MAX_IN_FLIGHT in a process and PER_SUBSCRIPTION_IN_FLIGHT per subscription; a claim takes only
 * what can start at once, so nothing claimed waits behind a slow attempt, and `runOnce` never waits
 * for an attempt (each one that ends wakes the loop when work was left waiting). Deliveries are
 * claimed under a lease far longer than the 10 s limit of an attempt; a worker killed mid-attempt
 * leaves the delivery leased, and once the lease ends another worker attempts it again.
 *
 * Before each attempt the subscription's access is judged (access.ts): a subscription whose key or
 * member lost access is stopped and the delivery fails without an attempt.
 */
import type { Logger } from 'pino';
import type { Sql } from '../../db/database.ts';
import { type BackoffSchedule, claim, finishLeased, type LeaseColumns, leaseNow, nextAttempt, PROCESS_OWNER, WorkPool } from '../../server/background.ts';
import { type EgressClient, EgressRefused, type PostOutcome } from '../../server/egress.ts';
import { newId } from '../../server/ids.ts';
import { notify } from '../../server/inbox.ts';
import type { BackgroundWorker } from '../../server/workers.ts';
import { AccessCache, stopSubscription } from './access.ts';
import {
  ATTEMPT_OFFSETS_MS,
  ATTEMPT_TIMEOUT_MS,
  DELIVER_WORKER,
  type DeliveryDeps,
  DISABLE_AFTER,
  MAX_ATTEMPTS,
  RESPONSE_BODY_BYTES,
  retryAfterMs,
  SUBSCRIPTION_ATTEMPTS_PER_MINUTE,
  WORKSPACE_ATTEMPTS_PER_MINUTE,
} from './delivery.ts';
import {
  type DbWebhookDeliveryRow,
  type DbWebhookSubscriptionRow,
  insertAttempt,
  releaseWindowSlot,
  subscriptionForAttempt,
  takeWindowSlot,
  LISTENER_SCHEME,
} from './queries.ts';
import { previousSecret, signedHeaders } from './signatures.ts';

/** Attempts in flight in one process, at most. */
export const MAX_IN_FLIGHT = 64;
/** Attempts in flight to one subscription in one process, at most. */
export const PER_SUBSCRIPTION_IN_FLIGHT = 4;
/** Deliveries one claim takes at most (what exceeds a subscription's room goes back at once). */
const CLAIM_BATCH = 16;
/** A claim's lease: far longer than an attempt's 10 s limit and the writes around it. */
export const LEASE_MS = 60_000;
/**
 * The seed's retry times from the first attempt, each later by up to 10 % of the gap before it, and
 * never sooner than half the nominal gap after the attempt just made (after a long Retry-After or a
 * deferral the schedule's later offsets may already be past: they do not fire back to back).
 */
export const ATTEMPT_BACKOFF: BackoffSchedule = { kind: 'offsets', offsetsMs: ATTEMPT_OFFSETS_MS, jitter: 0.1, minGap: 0.5 };
const DELIVERIES: LeaseColumns = { table: 'webhook_deliveries' };

type Outcome = { ok: true; status: number; body: string; durationMs: number } | { ok: false; status: number | null; error: string; body: string | null; durationMs: number; retryAfterMs: number | null };

/** One signed attempt of a delivery through the egress client; its outcome, never a throw for the receiver's doing. */
async function send(egress: Pick<EgressClient, 'post'>, d: DbWebhookDeliveryRow, s: DbWebhookSubscriptionRow, attemptId: string, now: number): Promise<Outcome> {
  const previous = previousSecret(s, now);
  // Signed by the subscription's stored contract at this attempt: a retry after a move to v1 carries v1=.
  const legacy = s.signing_contract === 'legacy';
  // Resource events carry both signatures during a rotation's grace period; the legacy signature has
  // room for one, so it keeps the old secret until the grace period ends (then the new one).
  const secrets = legacy ? [previous ?? s.secret] : [s.secret, ...(previous ? [previous] : [])];
  const headers = {
    'Content-Type': 'application/json',
    'User-Agent': 'WorkspaceOperations-Webhooks/1',
    ...signedHeaders({ legacy, eventId: d.event_id, attemptId, body: d.payload, nowMs: now, secrets }),
  };
  let result: PostOutcome;
  try {
    result = await egress.post(s.url, { headers, body: d.payload, timeoutMs: ATTEMPT_TIMEOUT_MS, maxResponseBytes: RESPONSE_BODY_BYTES });
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

/** The subscription's timestamps and failure count; the tenth exhausted delivery in a row disables it. */
async function recordOnSubscription(sql: Sql, logger: Logger, d: DbWebhookDeliveryRow, ok: boolean, exhausted: boolean, firstAt: number, now: number, error: string | null): Promise<void> {
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

/**
 * `only`: attempt the deliveries of this one subscription through `egress` (a `webhooks listen`
 * process); without it, every subscription's but the listeners'.
 */
export interface DeliveryWorkerScope {
  readonly only: string;
  readonly egress: Pick<EgressClient, 'post'>;
}

export function deliveryWorker(deps: DeliveryDeps, scope?: DeliveryWorkerScope): BackgroundWorker & { drain(): Promise<void> } {
  const { db, clock, logger } = deps;
  const egress = scope?.egress ?? deps.egress;
  // Whose deliveries this worker claims: one listener's, or everyone's but the listeners'.
  const mine = scope
    ? { text: ' AND webhook_id = ?', params: [scope.only] }
    : { text: ` AND webhook_id NOT IN (SELECT id FROM webhook_subscriptions WHERE url LIKE '${LISTENER_SCHEME}%')`, params: [] as string[] };
  const owner = PROCESS_OWNER;
  const access = new AccessCache();

  /** Puts a claimed delivery back for later (`at`) without an attempt: a rate limit, or no room this time. */
  async function defer(d: DbWebhookDeliveryRow, at: number): Promise<void> {
    await finishLeased(db.sql, DELIVERIES, d.id, owner, { text: `status = 'pending', next_attempt_at = ?`, params: [at] });
  }

  async function finishWithout(d: DbWebhookDeliveryRow, error: string, sql: Sql = db.sql): Promise<void> {
    await finishLeased(sql, DELIVERIES, d.id, owner, { text: `status = 'failed', next_attempt_at = NULL, last_error = ?, finished_at = ?`, params: [error, clock.now()] });
  }

  async function attempt(d: DbWebhookDeliveryRow): Promise<void> {
    // Read per attempt: an earlier attempt (or a person) may have disabled it or rotated its secret.
    const s = await subscriptionForAttempt(db.sql, d.webhook_id);
    if (!s || !s.enabled) return finishWithout(d, s ? 'the subscription is disabled' : 'the subscription was deleted');
    const now = clock.now();
    const verdict = await access.judge(db.sql, s, now);
    if (!verdict.ok) {
      return db.tx(async (sql) => {
        if (await stopSubscription(sql, s, verdict, now)) logger.warn({ webhook: s.id, workspace: s.workspace_id, loss: verdict.loss }, 'webhook subscription stopped: its access was lost');
        await finishWithout(d, `not delivered: access lost: ${verdict.reason}`, sql);
      });
    }
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
    const outcome = await send(egress, d, s, attemptId, now);
    const exhausted = !outcome.ok && number >= MAX_ATTEMPTS;
    let next: number | null = null;
    if (!outcome.ok && !exhausted) {
      next = nextAttempt(ATTEMPT_BACKOFF, number, { now, firstAt })!;
      if (outcome.retryAfterMs !== null) next = Math.max(next, now + Math.min(outcome.retryAfterMs, 86_400_000));
    }
    const status = outcome.ok ? 'succeeded' : exhausted ? 'failed' : 'pending';
    const error = outcome.ok ? null : outcome.error;
    await db.tx(async (sql) => {
      const recorded = await finishLeased(sql, DELIVERIES, d.id, owner, {
        text: 'status = ?, attempts = ?, first_attempt_at = ?, next_attempt_at = ?, last_attempt_at = ?, last_status_code = ?, last_error = ?, finished_at = ?',
        params: [status, number, firstAt, next, now, outcome.status, error, status === 'pending' ? null : now],
      });
      // Our lease ran out and another worker took the delivery over: its attempt is the one recorded.
      if (!recorded) return;
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
      await recordOnSubscription(sql, logger, d, outcome.ok, exhausted, firstAt, now, error);
    });
    // The destination is the subscriber's: the log names the subscription and the outcome, never the URL.
    if (!outcome.ok) logger.warn({ webhook: d.webhook_id, delivery: d.id, attempt: number, status_code: outcome.status, error, next_attempt_at: next }, exhausted ? 'webhook delivery failed for good' : 'webhook attempt failed; retried later');
  }

  const running = new Map<string, number>();
  /** Subscriptions whose due deliveries the last claim left (at their cap), and whether it filled every free lane. */
  let waiting = new Set<string>();
  let full = false;

  /** Claims up to `n` due deliveries, never more than a subscription's room; the rest go back at once. */
  async function claimDue(n: number): Promise<DbWebhookDeliveryRow[]> {
    const busy = [...running].filter(([, k]) => k >= PER_SUBSCRIPTION_IN_FLIGHT).map(([id]) => id);
    const notBusy = busy.length ? ` AND webhook_id NOT IN (${busy.map(() => '?').join(', ')})` : '';
    const lease = leaseNow(clock, LEASE_MS, owner);
    const rows = await claim<DbWebhookDeliveryRow>(db.sql, {
      ...DELIVERIES,
      due: { text: `status = 'pending' AND next_attempt_at <= ?${notBusy}${mine.text}`, params: [lease.now, ...busy, ...mine.params] },
      held: { text: `status = 'delivering'${notBusy}${mine.text}`, params: [...busy, ...mine.params] },
      set: { text: `status = 'delivering'` },
      order: 'next_attempt_at',
      limit: Math.min(n, CLAIM_BATCH),
    }, lease);
    waiting = new Set(busy);
    const taken: DbWebhookDeliveryRow[] = [];
    const back: DbWebhookDeliveryRow[] = [];
    for (const d of rows) {
      const k = running.get(d.webhook_id) ?? 0;
      if (k >= PER_SUBSCRIPTION_IN_FLIGHT) {
        waiting.add(d.webhook_id);
        back.push(d);
        continue;
      }
      running.set(d.webhook_id, k + 1);
      taken.push(d);
    }
    // A deferral that fails leaves its row to wait out the lease; it must not lose the taken ones (their counts are already held).
    const deferred = await Promise.allSettled(back.map((d) => defer(d, Number(d.next_attempt_at ?? lease.now))));
    for (const r of deferred) if (r.status === 'rejected') logger.warn({ err: r.reason }, 'a claimed webhook delivery could not be given back; it is taken again when its lease ends');
    full = rows.length === Math.min(n, CLAIM_BATCH);
    return taken;
  }

  const pool = new WorkPool<DbWebhookDeliveryRow>(
    {
      claim: claimDue,
      perform: (d) =>
        attempt(d).finally(() => {
          const left = running.get(d.webhook_id)! - 1;
          if (left) running.set(d.webhook_id, left);
          else running.delete(d.webhook_id);
          // Only when work was left waiting: a free lane alone is no reason to look again.
          if (full || waiting.has(d.webhook_id)) deps.workers.wake(DELIVER_WORKER);
        }),
      // Left leased: another attempt follows when the lease ends.
      onError: (err, d) => logger.error({ err, delivery: d.id }, 'webhook attempt could not be recorded'),
    },
    { concurrency: MAX_IN_FLIGHT },
  );

  return {
    intervalMs: 500,
    /** Starts every due delivery there is room for and returns how many; never waits for an attempt. */
    runOnce: () => pool.runOnce(),
    /** Resolves once no attempt is in flight (tests, shutdown). */
    drain: () => pool.drain(),
  };
}
