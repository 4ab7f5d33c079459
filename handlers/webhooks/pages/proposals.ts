/**
 * The proposal pages: `GET /settings/webhooks/proposals/:id` (the `approval_url` of
 * webhooks.PrepareWebhook: the destination, the event, what each type carries, who proposed it and when
 * it expires) and its Approve and Reject forms. Approving holds the signing secret for one view of
 * the secret page and redirects there (post/redirect/get: a reload never sends the form again).
 */
import type express from 'express';
import type { Request, Response } from 'express';
import type { MemberPage } from '../../../server/pages.ts';
import { type DbWebhookProposalRow, findProposal, findSubscription } from '../queries.ts';
import { approveProposal, rejectProposal, WebhookActionError } from '../subscriptions.ts';
import type { WebhookPageContext } from './context.ts';
import type { HeldSecret } from './secret.ts';
import { proposalHref, proposalSummary, secretHref, subscriptionHref } from './summaries.ts';

const PROPOSAL_ID = /^whp_[0-9a-z]{1,40}$/;
const REJECTED = 'The proposal is rejected: nothing will be delivered.';

type IdParams = { id: string };

export function proposalRoutes(router: express.Router, ctx: WebhookPageContext): void {
  const { db, clock, pages } = ctx.deps;

  const noProposal = (page: MemberPage, id: string) =>
    page.notice(404, 'No such proposal', [`This workspace has no webhook proposal ${id}. It may belong to another workspace, or it was decided or expired more than 30 days ago.`]);

  async function proposalPage(page: MemberPage, p: DbWebhookProposalRow, status: number, flash = '', problem = '') {
    const name = await ctx.memberNamer(page.workspaceId);
    const proposal = await proposalSummary(db.sql, p, page.manage, name, clock.now());
    const live = proposal.webhookId ? await findSubscription(db.sql, page.workspaceId, proposal.webhookId) : undefined;
    await page.send(status, {
      title: proposal.state === 'pending' && page.manage ? 'Approve a webhook?' : 'Webhook proposal',
      html: ctx.views.render('proposal', { csrf: page.csrf, manage: page.manage, proposal, subscriptionHref: live ? subscriptionHref(live.id) : '', flash, problem }),
    });
  }

  /** The proposal of the page's workspace, or null after a 404 page. */
  async function proposalOf(page: MemberPage, id: string): Promise<DbWebhookProposalRow | null> {
    const p = PROPOSAL_ID.test(id) ? await findProposal(db.sql, id) : undefined;
    if (!p || p.workspace_id !== page.workspaceId) {
      await noProposal(page, id);
      return null;
    }
    return p;
  }

  /** A refused decision as a page: the proposal as it stands now, and why (already decided, expired, ...). */
  async function refused(page: MemberPage, p: DbWebhookProposalRow, err: unknown) {
    if (!(err instanceof WebhookActionError)) throw err;
    if (err.status === 404) return noProposal(page, p.id);
    if (err.status === 403) return ctx.notAllowed(page, 'decide on webhooks');
    return proposalPage(page, (await findProposal(db.sql, p.id)) ?? p, err.status, '', err.message);
  }

  router.get('/settings/webhooks/proposals/:id', async (req: Request<IdParams>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const p = await proposalOf(page, req.params.id);
    if (!p) return;
    await proposalPage(page, p, 200, req.query.done === 'rejected' && p.status === 'rejected' ? REJECTED : '');
  });

  router.post('/settings/webhooks/proposals/:id/approve', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const p = await proposalOf(page, req.params.id);
    if (!p) return;
    if (!page.manage) return ctx.notAllowed(page, 'approve webhooks');
    let approved: { webhook_id: string; secret: string };
    try {
      approved = await approveProposal(db, clock, p.id, { workspaceId: page.workspaceId, memberId: page.member.id, role: page.member.role, name: page.member.name });
    } catch (err) {
      return refused(page, p, err);
    }
    const s = await findSubscription(db.sql, page.workspaceId, approved.webhook_id);
    const held: HeldSecret = { kind: 'approved', webhookId: approved.webhook_id, secret: approved.secret, destination: s?.url ?? p.url, legacy: s?.signing_contract === 'legacy', graceUntil: '' };
    await page.hold(secretHref(approved.webhook_id), held);
    res.redirect(303, secretHref(approved.webhook_id));
  });

  router.post('/settings/webhooks/proposals/:id/reject', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const p = await proposalOf(page, req.params.id);
    if (!p) return;
    if (!page.manage) return ctx.notAllowed(page, 'reject webhooks');
    try {
      await rejectProposal(db, clock, p.id, { workspaceId: page.workspaceId, memberId: page.member.id, role: page.member.role, name: page.member.name });
    } catch (err) {
      return refused(page, p, err);
    }
    res.redirect(303, `${proposalHref(p.id)}?done=rejected`);
  });
}
