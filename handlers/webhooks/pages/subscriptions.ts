/**
 * The subscription pages: `GET /settings/webhooks` (the workspace's subscriptions and pending
 * proposals), `GET /settings/webhooks/:id` (one subscription and its deliveries, newest first, paged
 * with `?before=<created_at>.<delivery id>`, optionally `?status=`), and the forms of those who manage
 * settings: disable, test-and-enable (a signed test delivery must succeed first), rotate (the new
 * secret is held for one view of the secret page), move a legacy subscription to the timestamped `v1`
 * signature (one-way, after ticking that the receiver accepts both), delete (after a confirmation
 * page). Every post answers with a redirect; an outcome to show (a failed test delivery, a move not
 * confirmed) is held for the next view.
 */
import type express from 'express';
import type { Request, Response } from 'express';
import type { MemberPage } from '../../../server/pages.ts';
import { parsePagePosition, positionOf, timeInWords } from '../../../server/pages/format.ts';
import {
  attemptsOfDeliveries,
  type DbWebhookAttemptRow,
  type DbWebhookSubscriptionRow,
  findSubscription,
  insertDelivery,
  listDeliveries,
  listPendingProposals,
  listSubscriptions,
  LISTENER_SCHEME,
  TEST_EVENT,
  type WebhookEventName,
} from '../queries.ts';
import type { AuditActor } from '../../../server/audit.ts';
import { takeQuota } from '../../../server/limits.ts';
import { newDelivery, replayEvent } from '../delivery.ts';
import { newId } from '../../../server/ids.ts';
import { changeSigningContract, deleteSubscription, disableSubscription, enableSubscription, rotateSecret, ROTATION_GRACE_MS, TEST_EVENT_BUDGET, testDelivery, WebhookActionError } from '../subscriptions.ts';
import type { WebhookPageContext } from './context.ts';
import type { HeldSecret } from './secret.ts';
import { deliverySummary, proposalSummary, secretHref, subscriptionHref, subscriptionSummary } from './summaries.ts';

/** Deliveries per page of a subscription's page. */
export const DELIVERIES_PER_PAGE = 20;
const MAX_SUBSCRIPTIONS = 2000;
const WEBHOOK_ID = /^wh_[0-9a-z]{1,40}$/;
const STATUSES = ['pending', 'delivering', 'succeeded', 'failed'] as const;
const LIST = '/settings/webhooks';

const DONE: Record<string, string> = {
  disabled: 'is disabled: no new events are delivered to it.',
  enabled: 'is enabled again: the test delivery succeeded, the failure count is cleared, and events from now on are delivered.',
  deleted: 'The subscription and its delivery history are deleted.',
  signing_v1: 'now signs with the timestamped v1 signature: from the next attempt on, every delivery (retries of earlier events too) and test delivery carries X-Webhook-Timestamp and a v1= signature over “<timestamp>.<body>”.',
};

/** A page's member as the audit log's actor. */
const actorOf = (page: MemberPage): AuditActor => ({ type: 'member', id: page.member.id, label: page.member.name });

type IdParams = { id: string };
const heldProblem = (held: unknown) => (typeof held === 'object' && held !== null && typeof (held as { problem?: unknown }).problem === 'string' ? (held as { problem: string }).problem : '');

const noSubscription = (page: MemberPage, id: string) => page.notice(404, 'No such webhook', [`This workspace has no webhook subscription ${id}. It may have been deleted.`]);

/** The subscription of the page's workspace that its member reads, or null after a 404 page. */
async function subscriptionOf(ctx: WebhookPageContext, page: MemberPage, id: string): Promise<DbWebhookSubscriptionRow | null> {
  const s = WEBHOOK_ID.test(id) ? await findSubscription(ctx.deps.db.sql, page.workspaceId, id) : undefined;
  if (!s || !ctx.readable(page, s)) {
    await noSubscription(page, id);
    return null;
  }
  return s;
}

/** The list and a subscription's page with its deliveries. */
export function subscriptionPages(router: express.Router, ctx: WebhookPageContext): void {
  const { db, clock, pages } = ctx.deps;

  /** The `?done=` notice of a page after an action (naming the subscription when it still exists). */
  async function doneText(req: Request, page: MemberPage): Promise<string> {
    const done = typeof req.query.done === 'string' ? req.query.done : '';
    const text = Object.hasOwn(DONE, done) ? DONE[done]! : '';
    if (!text || done === 'deleted') return text;
    const id = typeof req.query.webhook === 'string' && WEBHOOK_ID.test(req.query.webhook) ? req.query.webhook : '';
    const s = id ? await findSubscription(db.sql, page.workspaceId, id) : undefined;
    if (!s) return '';
    if (done === 'signing_v1') return s.signing_contract === 'v1' ? `The webhook ${s.id} ${text}` : '';
    if ((done === 'disabled') === Boolean(s.enabled)) return '';
    return `The webhook ${s.id} ${text}`;
  }

  router.get(LIST, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const now = clock.now();
    const rows: DbWebhookSubscriptionRow[] = [];
    let after: { t: number; i: string } | null = null;
    for (;;) {
      const batch = await listSubscriptions(db.sql, page.workspaceId, after, 500);
      rows.push(...batch);
      const last = batch.at(-1);
      if (batch.length < 500 || !last || rows.length >= MAX_SUBSCRIPTIONS) break;
      after = { t: Number(last.created_at), i: last.id };
    }
    const name = await ctx.memberNamer(page.workspaceId);
    const visible = rows.filter((s) => ctx.readable(page, s));
    const proposals = (await listPendingProposals(db.sql, page.workspaceId, now)).filter((p) => ctx.readable(page, p));
    await page.send(200, {
      title: 'Webhooks',
      html: ctx.views.render('webhooks', {
        csrf: page.csrf,
        manage: page.manage,
        subscriptions: visible.map((s) => subscriptionSummary(s, page.manage, name, now)),
        hiddenCount: rows.length - visible.length,
        proposals: await Promise.all(proposals.map((p) => proposalSummary(db.sql, p, page.manage, name, now))),
        flash: await doneText(req, page),
        problem: heldProblem(await page.take()),
      }),
    });
  });

  router.get('/settings/webhooks/:id', async (req: Request<IdParams>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const s = await subscriptionOf(ctx, page, req.params.id);
    if (!s) return;
    const before = parsePagePosition(req.query.before);
    if (before === 'invalid') {
      return page.notice(400, 'Bad request', ['The “before” position in this address is not one this page made (it looks like 1795000000000.whd_…). Open the webhook from the list again.']);
    }
    const filter = typeof req.query.status === 'string' && (STATUSES as readonly string[]).includes(req.query.status) ? req.query.status : '';
    const rows = await listDeliveries(db.sql, s.id, filter || undefined, before && { t: before.at, i: before.id }, DELIVERIES_PER_PAGE + 1, true);
    const shown = rows.slice(0, DELIVERIES_PER_PAGE);
    const attempts = new Map<string, DbWebhookAttemptRow[]>();
    for (const a of await attemptsOfDeliveries(db.sql, shown.map((d) => d.id))) attempts.set(a.delivery_id, [...(attempts.get(a.delivery_id) ?? []), a]);
    const last = shown.at(-1);
    const base = subscriptionHref(s.id);
    const query = (more: Record<string, string>) => {
      const q = new URLSearchParams({ ...(filter ? { status: filter } : {}), ...more }).toString();
      return q ? `${base}?${q}` : base;
    };
    const name = await ctx.memberNamer(page.workspaceId);
    const held = (await page.take()) as { flash?: unknown; response?: unknown } | undefined;
    await page.send(200, {
      title: `Webhook ${s.id}`,
      html: ctx.views.render('subscription', {
        csrf: page.csrf,
        manage: page.manage,
        s: subscriptionSummary(s, page.manage, name, clock.now()),
        flash: (await doneText(req, page)) || (typeof held?.flash === 'string' ? held.flash : ''),
        problem: heldProblem(held),
        testResponse: typeof held?.response === 'string' ? held.response : '',
        filter,
        filters: [{ label: 'All', href: base, current: filter === '' }, ...STATUSES.map((st) => ({ label: st, href: `${base}?status=${st}`, current: filter === st }))],
        deliveries: shown.map((d) => deliverySummary(d, attempts.get(d.id) ?? [])),
        older: rows.length > DELIVERIES_PER_PAGE && last ? query({ before: positionOf(last.created_at, last.id) }) : '',
        newest: before ? query({}) : '',
      }),
    });
  });
}

/** The forms of those who manage settings: disable, test-and-enable, rotate, delete. */
export function subscriptionActions(router: express.Router, ctx: WebhookPageContext): void {
  const { db, clock, config, pages } = ctx.deps;

  /** Where a form goes back to: the subscription's page or the list. */
  const backOf = (req: Request, id: string) => (((req.body ?? {}) as Record<string, unknown>).back === 'subscription' ? subscriptionHref(id) : LIST);

  /** The subscription and page of an action of those who manage settings; null after answering (404 or 403 page). */
  async function managed(req: Request<IdParams>, res: Response, what: string): Promise<{ page: MemberPage; s: DbWebhookSubscriptionRow } | null> {
    const page = await pages.member(req, res);
    if (!page) return null;
    const s = await subscriptionOf(ctx, page, req.params.id);
    if (!s) return null;
    if (!page.manage) {
      await ctx.notAllowed(page, what);
      return null;
    }
    return { page, s };
  }

  /** A WebhookActionError as a page (a 404 when the subscription went away meanwhile). */
  function actionFailed(page: MemberPage, err: unknown, id: string): Promise<void> {
    if (!(err instanceof WebhookActionError)) throw err;
    if (err.status === 404) return noSubscription(page, id);
    return page.notice(err.status, 'Not done', [err.message]);
  }

  router.post('/settings/webhooks/:id/disable', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const got = await managed(req, res, 'disable webhooks');
    if (!got) return;
    try {
      await disableSubscription(db, clock, got.page.workspaceId, got.s.id, `member ${got.page.member.id}`);
    } catch (err) {
      return actionFailed(got.page, err, got.s.id);
    }
    res.redirect(303, `${backOf(req, got.s.id)}?done=disabled&webhook=${encodeURIComponent(got.s.id)}`);
  });

  router.post('/settings/webhooks/:id/enable', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const got = await managed(req, res, 'enable webhooks');
    if (!got) return;
    let test;
    try {
      test = await enableSubscription(db, clock, got.page.workspaceId, got.s.id, config.egress);
    } catch (err) {
      return actionFailed(got.page, err, got.s.id);
    }
    const back = backOf(req, got.s.id);
    if (test.ok) return res.redirect(303, `${back}?done=enabled&webhook=${encodeURIComponent(got.s.id)}`);
    // The outcome is shown once on the page the form was on; the subscription stays disabled.
    const problem = `The test delivery to ${got.s.url} failed: ${test.error ?? 'no answer'}${test.durationMs ? ` (after ${test.durationMs} ms)` : ''}. The webhook stays disabled. Fix the receiver (it must answer 2xx within 10 seconds and verify the signature), then enable it again.`;
    await got.page.hold(back, { problem });
    res.redirect(303, back);
  });

  // Resend: the event again, as a new delivery (webhooks.ReplayWebhookEvent's rule), beside the automatic retries.
  router.post('/settings/webhooks/:id/resend', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const got = await managed(req, res, 'resend webhook events');
    if (!got) return;
    const back = `/settings/webhooks/${got.s.id}`;
    const eventId = ((req.body ?? {}) as Record<string, unknown>).event_id;
    if (typeof eventId !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(eventId)) return got.page.notice(400, 'Bad request', ['The form named no event to resend. Open the webhook again and use its Resend button.']);
    const outcome = await db.tx(async (sql) => {
      const s = await findSubscription(sql, got.page.workspaceId, got.s.id, true);
      return s ? replayEvent(sql, s, eventId, clock.now()) : ({ refused: 'gone', message: `The webhook ${got.s.id} is gone.` } as const);
    });
    await got.page.hold(back, 'refused' in outcome ? { problem: outcome.message } : { flash: `Event ${eventId} is queued to be sent again (delivery ${outcome.id}); it appears at the top of the deliveries.` });
    res.redirect(303, back);
  });

  // A signed webhook.test event sent now, its answer shown once (at most TEST_EVENT_BUDGET per subscription, counted in the database).
  router.post('/settings/webhooks/:id/test', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const got = await managed(req, res, 'send test events');
    if (!got) return;
    const back = `/settings/webhooks/${got.s.id}`;
    if (!got.s.enabled) {
      await got.page.hold(back, { problem: 'The webhook is disabled: use “Test and enable”, which sends a test delivery and enables it when it succeeds.' });
      return res.redirect(303, back);
    }
    const quota = await db.tx((sql) => takeQuota(sql, `webhook-test:${got.s.id}`, TEST_EVENT_BUDGET, 1, clock.now()));
    if (!quota.ok) {
      await got.page.hold(back, { problem: `At most ${TEST_EVENT_BUDGET.cap} test events an hour per webhook: try again in ${Math.ceil(quota.retryAfterS / 60)} min.` });
      return res.redirect(303, back);
    }
    // A `webhooks listen` subscription has no address to call: the test event is a delivery its listener takes.
    if (got.s.url.startsWith(LISTENER_SCHEME)) {
      const now = clock.now();
      const eventId = newId('evt');
      const payload = JSON.stringify({ event: 'webhook.test', event_id: eventId, webhook_id: got.s.id, occurred_at: now });
      await db.tx((sql) => insertDelivery(sql, newDelivery({ workspace_id: got.s.workspace_id, webhook_id: got.s.id, event_id: eventId, event_type: TEST_EVENT as WebhookEventName, resource_type: null, record_id: null, event_occurred_at: now, payload }, now, null)));
      await got.page.hold(back, { flash: `Test event queued for the listener (${got.s.url}): webhooks listen prints it within a second, and its attempt appears below.` });
      return res.redirect(303, back);
    }
    // The request to the receiver runs after the quota's transaction, never inside it.
    const test = await testDelivery(got.s, clock.now(), config.egress);
    const answer = `${test.status !== null ? `HTTP ${test.status}` : 'no answer'} after ${test.durationMs} ms`;
    await got.page.hold(back, test.ok ? { flash: `Test event sent to ${got.s.url}: ${answer}.`, response: test.response ?? '' } : { problem: `The test event to ${got.s.url} failed: ${test.error ?? 'no answer'} (${answer}).`, response: test.response ?? '' });
    res.redirect(303, back);
  });

  router.post('/settings/webhooks/:id/rotate', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const got = await managed(req, res, 'rotate webhook secrets');
    if (!got) return;
    let rotated: { secret: string; previous_valid_until: number };
    try {
      rotated = await rotateSecret(db, clock, got.page.workspaceId, got.s.id, actorOf(got.page));
    } catch (err) {
      return actionFailed(got.page, err, got.s.id);
    }
    const held: HeldSecret = {
      kind: 'rotated',
      webhookId: got.s.id,
      secret: rotated.secret,
      destination: got.s.url,
      legacy: got.s.signing_contract === 'legacy',
      graceUntil: timeInWords(rotated.previous_valid_until),
      graceHours: Math.round(ROTATION_GRACE_MS / 3_600_000),
    };
    await got.page.hold(secretHref(got.s.id), held);
    res.redirect(303, secretHref(got.s.id));
  });

  router.post('/settings/webhooks/:id/signing-contract', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const got = await managed(req, res, 'change how webhooks are signed');
    if (!got) return;
    const body = (req.body ?? {}) as Record<string, unknown>;
    const back = subscriptionHref(got.s.id);
    if (body.to !== 'v1') return got.page.notice(400, 'Not done', ['The only move is to the timestamped v1 signature (to=v1); it is one-way.']);
    if (body.confirm !== 'receiver-ready') {
      await got.page.hold(back, { problem: 'Not moved: tick that the receiver already accepts the v1 signature. The move cannot be undone, and a receiver that only checks the bare signature would reject every delivery after it.' });
      return res.redirect(303, back);
    }
    try {
      await changeSigningContract(db, clock, got.page.workspaceId, got.s.id, 'v1', actorOf(got.page));
    } catch (err) {
      return actionFailed(got.page, err, got.s.id);
    }
    res.redirect(303, `${back}?done=signing_v1&webhook=${encodeURIComponent(got.s.id)}`);
  });

  async function deletePage(page: MemberPage, s: DbWebhookSubscriptionRow, status: number, problem: string) {
    const name = await ctx.memberNamer(page.workspaceId);
    await page.send(status, {
      title: `Delete webhook ${s.id}?`,
      html: ctx.views.render('delete', { csrf: page.csrf, s: subscriptionSummary(s, true, name, clock.now()), problem }),
    });
  }

  router.get('/settings/webhooks/:id/delete', async (req: Request<IdParams>, res: Response) => {
    const got = await managed(req, res, 'delete webhooks');
    if (got) await deletePage(got.page, got.s, 200, '');
  });

  router.post('/settings/webhooks/:id/delete', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const got = await managed(req, res, 'delete webhooks');
    if (!got) return;
    if (((req.body ?? {}) as Record<string, unknown>).confirm !== 'delete') return deletePage(got.page, got.s, 400, 'Tick the box to confirm: deleting cannot be undone.');
    try {
      await deleteSubscription(db, got.page.workspaceId, got.s.id);
    } catch (err) {
      return actionFailed(got.page, err, got.s.id);
    }
    res.redirect(303, `${LIST}?done=deleted`);
  });
}
