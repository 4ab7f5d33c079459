/**
 * `/settings/limits` ("Usage and limits"): each of the workspace's limits (server/limits.ts: its own
 * where the operator set one, else the default) with what is used of it now, and the documents
 * retention. Owners and admins read it (anyone else signed in: 403); a GET that changes nothing. The
 * operator changes the limits with `npm run admin -- workspace limits`.
 */
import type { Request, Response, Router } from 'express';
import type { ModuleDeps } from '../../server/module.ts';
import type { NavEntry } from '../../server/pages.ts';
import { invitationBucket, type LimitName, mailBuckets, quotaUsed, workspaceLimits } from '../../server/limits.ts';
import { FILE_RETENTION_DAYS, openUploadsByKey, storedBytes } from './limits.ts';

export const LIMITS_PATH = '/settings/limits';

export const limitsNavigation: NavEntry[] = [
  {
    label: 'Usage and limits',
    path: LIMITS_PATH,
    order: 60,
    section: 'settings',
    summary: 'How much mail, invitations, uploads and storage the workspace may use, and how much it uses now (owners and admins).',
    visible: (viewer) => viewer.manage,
  },
];

const bytes = (n: number) => {
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10 * 1024 ? 1 : 0)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
};
const count = (n: number) => n.toLocaleString('en-US');

interface Row {
  name: LimitName;
  label: string;
  limit: string;
  used: string | null;
  /** For the meter: used and limit as numbers (null: no meter). */
  meter: { value: number; max: number } | null;
  own: boolean;
  note: string;
}

export function limitsRoutes(deps: ModuleDeps<unknown>): Router {
  const { db, pages, clock } = deps;
  const router = pages.router();
  const views = pages.views(new URL('./pages/', import.meta.url));

  router.get(LIMITS_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    if (!page.manage) return page.notice(403, 'Owners and admins only', ['Only owners and admins can read the workspace’s usage and limits.']);
    const now = clock.now();
    const ws = page.workspaceId;
    const l = await workspaceLimits(db.sql, ws);
    const own = new Set(l.own);
    const [hour, day] = mailBuckets(ws, l);
    const mailsHour = await quotaUsed(db.sql, hour!.bucket, hour!.budget, now);
    const mailsDay = await quotaUsed(db.sql, day!.bucket, day!.budget, now);
    const inv = invitationBucket(ws, l);
    const invites = await quotaUsed(db.sql, inv.bucket, inv.budget, now);
    const stored = await storedBytes(db.sql, ws, now);
    const byKey = await openUploadsByKey(db.sql, ws, now);
    const busiest = byKey[0] ? Number(byKey[0].n) : 0;
    const row = (name: LimitName, label: string, limit: string, used: string | null, meter: Row['meter'], note: string): Row => ({ name, label, limit, used, meter, own: own.has(name), note });
    const refill = l.mails_per_hour > 0 ? `${count(l.mails_per_hour)} an hour: all at once, then one every ${Math.round((3600 / l.mails_per_hour) * 10) / 10} seconds` : 'no mail at all while the limit is 0';
    const sections = [
      {
        title: 'Mail',
        lede: `Every mail the service sends for this workspace: signing invitations and reminders, and member invitations. A budget refills continuously (${refill}). Past it, the operation answers 429 with Retry-After and sends nothing.`,
        rows: [
          row('mails_per_hour', 'Mails an hour', count(l.mails_per_hour), `${count(mailsHour)} used`, { value: mailsHour, max: l.mails_per_hour }, 'signing.RequestFileSignatures (one per signer), signing.RemindSigners, member invitations'),
          row('mails_per_day', 'Mails a day', count(l.mails_per_day), `${count(mailsDay)} used`, { value: mailsDay, max: l.mails_per_day }, 'the same mails, over a day'),
          row('recipients_per_request', 'Signers per request', count(l.recipients_per_request), null, null, 'signing.RequestFileSignatures: more signers is 400 invalid_input'),
          row('member_invitations_per_hour', 'Member invitations an hour', count(l.member_invitations_per_hour), `${count(invites)} used`, { value: invites, max: l.member_invitations_per_hour }, 'the Members page'),
        ],
      },
      {
        title: 'Uploads and storage',
        lede: `Stored bytes are the workspace’s files (uploads and signed archives) plus the declared sizes of its open uploads. Uploaded files that no signing request uses are removed ${FILE_RETENTION_DAYS} days after upload; a request’s original and its signed archive stay. An upload expires 24 hours after it was created.`,
        rows: [
          row('stored_bytes', 'Stored bytes', bytes(l.stored_bytes), `${bytes(stored.files + stored.open)} used (files ${bytes(stored.files)}, open uploads ${bytes(stored.open)})`, { value: stored.files + stored.open, max: l.stored_bytes }, 'documents.CreateUpload past it: 413 invalid_input'),
          row('open_uploads_per_key', 'Open uploads per credential', count(l.open_uploads_per_key), `${count(busiest)} at most now`, { value: busiest, max: l.open_uploads_per_key }, 'documents.CreateUpload past it: 429 with Retry-After'),
          row('part_puts_per_minute', 'Part uploads a minute per credential', count(l.part_puts_per_minute), null, null, 'PUT of a part URL past it: 429 with Retry-After'),
        ],
      },
    ];
    await page.send(200, {
      title: 'Usage and limits',
      html: views.render('limits', { sections, workspaceId: ws, anyOwn: l.own.length > 0 }),
    });
  });
  return router;
}
