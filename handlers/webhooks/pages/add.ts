/**
 * A webhook added on the dashboard (`/settings/webhooks/new`, owners and admins): the same proposal as
 * `webhooks.PrepareWebhook` (the destination checked by the egress policy, the event, the record
 * types), made by the member instead of a key, then approved on the same approval page. It delivers
 * with the member's access: their role's `read` on every type, while they are active (access.ts).
 * The proposal's `proposed_by_key` is empty: no key is involved.
 */
import type express from 'express';
import type { Request, Response } from 'express';
import { resourceTypes } from '../../../generated/catalogue.ts';
import { newId } from '../../../server/ids.ts';
import type { MemberPage } from '../../../server/pages.ts';
import { roleAllows } from '../../../server/roles.ts';
import { insertProposal, type WebhookEventName } from '../queries.ts';
import { checkProposedUrl, PROPOSAL_TTL_MS, WebhookActionError } from '../subscriptions.ts';
import type { WebhookPageContext } from './context.ts';
import { EVENT_WORDS, proposalHref } from './summaries.ts';

export const ADD_PATH = '/settings/webhooks/new';
const RECORD_EVENTS = ['resource.created', 'resource.updated', 'resource.deleted'];

export function addRoutes(router: express.Router, ctx: WebhookPageContext): void {
  const { db, clock, pages, config, eventKinds } = ctx.deps;
  /** What may be subscribed to here: record changes and the events the modules declare (not the legacy meeting event). */
  const events = (Object.keys(EVENT_WORDS) as WebhookEventName[]).filter((e) => RECORD_EVENTS.includes(e) || eventKinds.has(e));

  const render = async (page: MemberPage, status: number, body: Record<string, unknown>, problem = '') => {
    const chosen = new Set(Array.isArray(body.type) ? body.type.map(String) : typeof body.type === 'string' ? [body.type] : []);
    await page.send(status, {
      title: 'Add a webhook',
      html: ctx.views.render('add', {
        csrf: page.csrf,
        problem,
        url: typeof body.url === 'string' ? body.url : '',
        events: events.map((e) => ({ value: e, words: EVENT_WORDS[e], selected: e === (body.event ?? 'resource.updated') })),
        types: resourceTypes.map((t) => ({ type: t, checked: chosen.has(t), readable: roleAllows(page.member.role, t, 'read') })),
      }),
    });
  };

  router.get(ADD_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    if (!page.manage) return ctx.notAllowed(page, 'add webhooks');
    await render(page, 200, {});
  });

  router.post(ADD_PATH, pages.protectForm, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    if (!page.manage) return ctx.notAllowed(page, 'add webhooks');
    const body = (req.body ?? {}) as Record<string, unknown>;
    const event = typeof body.event === 'string' ? body.event : '';
    if (!events.includes(event as WebhookEventName)) return render(page, 400, body, 'Choose what to deliver from the list.');
    const raw = body.type === undefined ? [] : Array.isArray(body.type) ? body.type : [body.type];
    const types = [...new Set(raw.map(String))];
    const record = RECORD_EVENTS.includes(event);
    if (record && !types.length) return render(page, 400, body, 'Choose at least one record type: record changes are delivered per type.');
    if (!record && types.length) return render(page, 400, body, `${event} is not a record change: leave the record types unticked.`);
    const unknown = types.find((t) => !(resourceTypes as readonly string[]).includes(t));
    if (unknown) return render(page, 400, body, 'One of the record types does not exist. Choose from the list.');
    const unread = types.find((t) => !roleAllows(page.member.role, t, 'read'));
    if (unread) return render(page, 403, body, `Your role may not read ${unread}: a webhook carries only what the member who adds it may read.`);
    let url: string;
    try {
      url = checkProposedUrl(typeof body.url === 'string' ? body.url.trim() : '', config.egress);
    } catch (err) {
      if (!(err instanceof WebhookActionError)) throw err;
      return render(page, 400, body, `The address is refused: ${err.message}`);
    }
    const now = clock.now();
    const id = newId('whp');
    await insertProposal(db.sql, {
      id,
      workspace_id: page.workspaceId,
      url,
      event: event as WebhookEventName,
      resource_types: JSON.stringify(types),
      proposed_by_key: '',
      proposed_by_member: page.member.id,
      status: 'pending',
      expires_at: now + PROPOSAL_TTL_MS,
      decided_by: null,
      decided_at: null,
      webhook_id: null,
      created_at: now,
    });
    ctx.deps.logger.info({ workspace_id: page.workspaceId, member_id: page.member.id, proposal_id: id }, 'webhook proposed on the dashboard');
    res.redirect(303, proposalHref(id));
  });
}
