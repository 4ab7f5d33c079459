/**
 * `GET /settings/webhooks/:id/secret`: the one view of a signing secret, after approval or rotation.
 * The post held it for this session and page (sealed, server/pages/holds.ts) and redirected here;
 * this view takes it, so a reload, Back, or another tab finds nothing and answers 410. The secret is
 * never in a URL or a log.
 */
import type express from 'express';
import type { Request, Response } from 'express';
import type { WebhookPageContext } from './context.ts';
import { subscriptionHref } from './summaries.ts';

/** What the approve and rotate posts hold for the secret page. */
export interface HeldSecret {
  kind: 'approved' | 'rotated';
  webhookId: string;
  secret: string;
  destination: string;
  legacy: boolean;
  graceUntil: string;
  graceHours?: number;
}

const isHeldSecret = (v: unknown): v is HeldSecret =>
  typeof v === 'object' && v !== null && typeof (v as HeldSecret).secret === 'string' && typeof (v as HeldSecret).webhookId === 'string';

export function secretRoutes(router: express.Router, ctx: WebhookPageContext): void {
  router.get('/settings/webhooks/:id/secret', async (req: Request<{ id: string }>, res: Response) => {
    const page = await ctx.deps.pages.member(req, res);
    if (!page) return;
    const held = await page.take();
    if (!isHeldSecret(held) || held.webhookId !== req.params.id) {
      return page.notice(410, 'Shown once already', [
        'A signing secret is shown only once, on the page that follows its approval or rotation, and that page has been shown. The service never shows it again.',
        `If it was not stored, an owner or admin rotates the secret on the webhook's page (${subscriptionHref(req.params.id)}): the old one keeps signing for 24 hours beside the new one.`,
      ]);
    }
    await page.send(200, {
      title: held.kind === 'approved' ? 'Webhook approved' : 'New signing secret',
      html: ctx.views.render('secret', { ...held, href: subscriptionHref(held.webhookId) }),
    });
  });
}
