/**
 * The inbox page of a signed-in member: `GET /inbox` lists their notices newest first (paged with
 * `?before=<created_at>.<notice id>`) with the unread count; `POST /inbox/read` (a CSRF-protected
 * form) marks one notice (`id`) or all of them (`all=1`) read and answers 303 back to the page.
 */
import express, { type Request, type Response } from 'express';
import { listNotifications, markNotificationsRead, unreadCount } from '../../db/queries/inbox.ts';
import type { ModuleDeps } from '../../server/module.ts';
import { isLocalPath, type MemberPage } from '../../server/pages.ts';
import { parsePagePosition, positionOf, timeInWords } from '../../server/pages/format.ts';

export const NOTICES_PER_PAGE = 20;
const NOTICE_ID = /^[a-z]{1,8}_[0-9a-z]{1,40}$/;
const DONE: Record<string, string> = { read: 'Marked as read.', all: 'All notices are marked as read.' };

export function inboxRoutes(deps: ModuleDeps): express.Router {
  const { db, clock, pages } = deps;
  const views = pages.views(new URL('./pages/', import.meta.url));
  const router = pages.router();
  const badPosition = (page: MemberPage) =>
    page.notice(400, 'Bad request', ['The “before” position in this address is not one this page made. Open the inbox again from its first page.']);

  router.get('/inbox', async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const position = parsePagePosition(req.query.before);
    if (position === 'invalid') return badPosition(page);
    const rows = await listNotifications(db.sql, page.member.id, NOTICES_PER_PAGE + 1, position && { createdAt: position.at, id: position.id });
    const shown = rows.slice(0, NOTICES_PER_PAGE);
    const last = shown.at(-1);
    const unread = await unreadCount(db.sql, page.member.id);
    const done = typeof req.query.done === 'string' ? DONE[req.query.done] : undefined;
    await page.send(200, {
      title: unread ? `Inbox (${unread})` : 'Inbox',
      html: views.render('inbox', {
        unread,
        csrf: page.csrf,
        flash: done ?? '',
        position: position?.text ?? '',
        notices: shown.map((n) => ({
          id: n.id,
          title: n.title,
          body: n.body,
          at: timeInWords(Number(n.created_at)),
          unread: n.read_at === null,
          // Written by the service, but a link is only ever a path on this service.
          link: n.link && isLocalPath(n.link) ? n.link : '',
        })),
        older: rows.length > NOTICES_PER_PAGE && last ? `/inbox?before=${positionOf(last.created_at, last.id)}` : '',
      }),
    });
  });

  router.post('/inbox/read', pages.protectForm, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const body = (req.body ?? {}) as Record<string, unknown>;
    const position = parsePagePosition(body.before);
    if (position === 'invalid') return badPosition(page);
    const all = body.all === '1';
    const id = typeof body.id === 'string' && NOTICE_ID.test(body.id) ? body.id : null;
    if (!all && id === null) return page.notice(400, 'Bad request', ['Say which notice to mark as read (id), or all of them (all=1).']);
    // Scoped to the member: another member's notice id changes nothing.
    await markNotificationsRead(db.sql, page.member.id, all ? null : id, clock.now());
    const query = new URLSearchParams({ done: all ? 'all' : 'read', ...(position ? { before: position.text } : {}) });
    res.redirect(303, `/inbox?${query.toString()}`);
  });

  return router;
}
