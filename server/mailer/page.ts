/**
 * The development mailbox's pages, for owners and admins while no SMTP_URL is set: `GET /mailbox` lists
 * the mail the service stored for their workspace (newest first), `GET /mailbox/<id>` shows one (the
 * plain text with its links clickable; `/mailbox/<id>/html` the HTML part alone, sandboxed, running no script).
 * Reading changes nothing. With SMTP configured the pages do not exist (mail left the service).
 */
import type express from 'express';
import type { Request, Response } from 'express';
import type { Database } from '../../db/database.ts';
import type { NavEntry, PageKit } from '../pages.ts';
import { listMailbox, readMailbox } from './mailbox.ts';

export const MAILBOX_PATH = '/mailbox';
const SHOWN = 100;
const MAIL_ID = /^ml_[0-9a-z]{1,40}$/;

/** The navigation entry: owners and admins only. */
export const mailboxNavigation: NavEntry[] = [{ label: 'Mailbox', path: MAILBOX_PATH, order: 95, visible: (viewer) => viewer.manage, section: 'settings', summary: 'Development only: the mail the service kept instead of sending it (no SMTP server configured).' }];

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Plain text as HTML with http(s) links made clickable (escaped first; only the URL text becomes the href). */
export function linkify(text: string): string {
  return escape(text).replace(/https?:\/\/[^\s<>"']+/g, (url) => {
    const clean = url.replace(/[.,;:)]+$/, '');
    return `<a href="${clean}" rel="noreferrer noopener">${clean}</a>${url.slice(clean.length)}`;
  });
}

export function mailboxRoutes(pages: PageKit, db: Database): express.Router {
  const views = pages.views(new URL('./pages/', import.meta.url));
  const router = pages.router();
  const refuse = (page: { notice(status: number, title: string, p: string[]): Promise<void> }) =>
    page.notice(403, 'Owners and admins only', ['The development mailbox shows mail sent to anyone in this workspace; only owners and admins read it.']);

  router.get(MAILBOX_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    if (!page.manage) return refuse(page);
    const mails = await listMailbox(db, { workspaceId: page.workspaceId, limit: SHOWN });
    await page.send(200, {
      title: 'Development mailbox',
      html: views.render('mailbox', { mails: mails.map((m) => ({ ...m, href: `${MAILBOX_PATH}/${m.id}`, at: m.created_at.replace('T', ' ').replace(/\.\d+Z$/, ' UTC') })), shown: SHOWN }),
    });
  });

  router.get(`${MAILBOX_PATH}/:id`, async (req: Request<{ id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    if (!page.manage) return refuse(page);
    const mail = MAIL_ID.test(req.params.id) ? await readMailbox(db, req.params.id) : undefined;
    // Another workspace's mail is as absent as an unknown one.
    if (!mail || mail.workspace_id !== page.workspaceId) return page.notice(404, 'Not found', ['No such mail in this workspace’s development mailbox (mail is kept for 7 days).']);
    await page.send(200, {
      title: mail.subject,
      html: views.render('message', { mail, at: mail.created_at.replace('T', ' ').replace(/\.\d+Z$/, ' UTC'), textHtml: linkify(mail.text), back: MAILBOX_PATH, htmlHref: `${MAILBOX_PATH}/${mail.id}/html` }),
    });
  });
  // The HTML part alone, under a policy that runs nothing and loads nothing (a sandboxed document).
  router.get(`${MAILBOX_PATH}/:id/html`, async (req: Request<{ id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    if (!page.manage) return refuse(page);
    const mail = MAIL_ID.test(req.params.id) ? await readMailbox(db, req.params.id) : undefined;
    if (!mail || mail.workspace_id !== page.workspaceId) return page.notice(404, 'Not found', ['No such mail in this workspace’s development mailbox (mail is kept for 7 days).']);
    res.setHeader('Content-Security-Policy', "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'");
    res.status(200).type('html').send(mail.html);
  });
  return router;
}

/** The pages' CSS, appended to the one stylesheet while the mailbox is in use. */
export const MAILBOX_CSS = new URL('./pages/mailbox.css', import.meta.url);
