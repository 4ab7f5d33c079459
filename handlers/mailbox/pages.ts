/**
 * The development mailbox's pages, for owners and admins while no SMTP_URL is set (and, with
 * NODE_ENV=production, only when MAILBOX_PAGE=on): `GET /mailbox` lists the mail the service stored for
 * their workspace (newest first), `GET /mailbox/<id>` shows one, `/mailbox/<id>/html` its HTML part
 * alone, sandboxed, running no script. A mail's links act for its recipients (sign-in links,
 * invitations, signers' `/sign/` links), so they are live only for the viewer's own mail (addressed to
 * their address): in anyone else's mail every link and token-like text is hidden and the HTML part is
 * refused, the sender of a signing request included (a signer's link signs in the signer's name).
 * Reading changes nothing. With SMTP configured the pages do not exist (mail left the service).
 */
import type express from 'express';
import type { Request, Response } from 'express';
import type { Database } from '../../db/database.ts';
import { findWorkspaceMember } from '../../db/queries/workspaces.ts';
import type { MemberPage, NavEntry, PageKit } from '../../server/pages.ts';
import { listMailbox, type MailboxSummary, readMailbox } from '../../server/mailer/mailbox.ts';

export const MAILBOX_PATH = '/mailbox';
const SHOWN = 100;
const MAIL_ID = /^ml_[0-9a-z]{1,40}$/;

/** The navigation entry: owners and admins only. */
export const mailboxNavigation: NavEntry[] = [{ label: 'Mailbox', path: MAILBOX_PATH, order: 95, visible: (viewer) => viewer.manage, section: 'settings', summary: 'Development only: the mail the service kept instead of sending it (no SMTP server configured); links only in your own mail.' }];

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Plain text as HTML with http(s) links made clickable (escaped first; only the URL text becomes the href). */
export function linkify(text: string): string {
  return escape(text).replace(/https?:\/\/[^\s<>"']+/g, (url) => {
    const clean = url.replace(/[.,;:)]+$/, '');
    return `<a href="${clean}" rel="noreferrer noopener">${clean}</a>${url.slice(clean.length)}`;
  });
}

/** What stands for a link in someone else's mail. */
export const HIDDEN_LINK = '[link hidden: it acts for the recipient]';

/**
 * Someone else's mail as plain text: every URL (any scheme, `www.` too) and every run that looks like a
 * secret (a `wso_`/`wss_` credential, 32+ characters of base64url or hex) replaced, so nothing in it acts
 * for its recipient.
 */
export function withoutLinks(text: string): string {
  return text
    .replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+|\bwww\.\S+/gi, HIDDEN_LINK)
    .replace(/\bws[os]_\S+|[A-Za-z0-9_-]{32,}/g, '[hidden]');
}

/** Whether a mail is addressed to the viewer (one of its recipients is their address, compared without case). */
const addressedTo = (mail: Pick<MailboxSummary, 'to'>, address: string) => mail.to.some((a) => a.toLowerCase() === address);

export function mailboxRoutes(pages: PageKit, db: Database): express.Router {
  const views = pages.views(new URL('./pages/', import.meta.url));
  const router = pages.router();
  const refuse = (page: { notice(status: number, title: string, p: string[]): Promise<void> }) =>
    page.notice(403, 'Owners and admins only', ['The development mailbox shows mail sent to anyone in this workspace; only owners and admins read it.']);
  /** The viewer's own address (lower case): their mail is the only mail whose links they see. */
  const addressOf = async (page: MemberPage) => (await findWorkspaceMember(db.sql, page.workspaceId, page.member.id))?.email.toLowerCase() ?? null;
  const at = (iso: string) => iso.replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  /** One mail of the viewer's workspace, and whether it is theirs; null after a 403 or 404 page. */
  const mailFor = async (req: Request<{ id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return null;
    if (!page.manage) {
      await refuse(page);
      return null;
    }
    const mail = MAIL_ID.test(req.params.id) ? await readMailbox(db, req.params.id) : undefined;
    // Another workspace's mail is as absent as an unknown one.
    if (!mail || mail.workspace_id !== page.workspaceId) {
      await page.notice(404, 'Not found', ['No such mail in this workspace’s development mailbox (mail is kept for 7 days).']);
      return null;
    }
    const address = await addressOf(page);
    return { page, mail, own: address !== null && addressedTo(mail, address) };
  };

  router.get(MAILBOX_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    if (!page.manage) return refuse(page);
    const address = await addressOf(page);
    const mails = await listMailbox(db, { workspaceId: page.workspaceId, limit: SHOWN });
    await page.send(200, {
      title: 'Development mailbox',
      html: views.render('mailbox', { mails: mails.map((m) => ({ ...m, own: address !== null && addressedTo(m, address), href: `${MAILBOX_PATH}/${m.id}`, at: at(m.created_at) })), shown: SHOWN }),
    });
  });

  router.get(`${MAILBOX_PATH}/:id`, async (req: Request<{ id: string }>, res: Response) => {
    const found = await mailFor(req, res);
    if (!found) return;
    const { page, mail, own } = found;
    await page.send(200, {
      title: mail.subject,
      html: views.render('message', {
        mail,
        own,
        at: at(mail.created_at),
        textHtml: own ? linkify(mail.text) : escape(withoutLinks(mail.text)),
        back: MAILBOX_PATH,
        htmlHref: own ? `${MAILBOX_PATH}/${mail.id}/html` : null,
      }),
    });
  });
  // The HTML part alone, under a policy that runs nothing and loads nothing (a sandboxed document); only the recipient's own.
  router.get(`${MAILBOX_PATH}/:id/html`, async (req: Request<{ id: string }>, res: Response) => {
    const found = await mailFor(req, res);
    if (!found) return;
    if (!found.own) return found.page.notice(403, 'Addressed to someone else', [`This mail is addressed to ${found.mail.to.join(', ')}: its links act for them, so its HTML part is shown only to them. Operators read it with npm run admin -- mail show --id ${found.mail.id}.`]);
    res.setHeader('Content-Security-Policy', "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'");
    res.status(200).type('html').send(found.mail.html);
  });
  return router;
}

/** The pages' CSS, appended to the one stylesheet while the mailbox is in use. */
export const MAILBOX_CSS = new URL('./pages/mailbox.css', import.meta.url);
