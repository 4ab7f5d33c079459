/**
 * The audit log's page (`/settings/audit`), its operator command (`npm run admin -- audit list`) and the
 * daily `audit.prune` job. Entries are written by `recordAudit` (server/audit.ts) in the transaction of
 * each change; here they are read, in words, by one describer shared by the page and the CLI.
 *
 * - Owners and admins read the page; anyone else signed in gets a 403 page saying only owners and
 *   admins can read the audit log. The page is a GET that changes nothing.
 * - Newest first, 50 a page; "Older entries" links to `?before=<entry id>` (the last entry shown: the
 *   page continues strictly after it, by time then id), keeping the filter. `?family=keys|members|webhooks`
 *   filters by action family (keys: key.* and the workspace's API-key availability; members: member.*,
 *   invitation.* and session.*; webhooks: webhook.*). An unknown family or entry id is a 400 page.
 * - Entries older than AUDIT_RETENTION_DAYS (default 400) are deleted by `audit.prune`, once a day.
 */
import type express from 'express';
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import type { Database } from '../../db/database.ts';
import { findAuditRow } from '../../db/queries/audit.ts';
import { auditFamilies, pruneAudit, readAudit } from '../../server/audit.ts';
import type { Clock } from '../../server/clock.ts';
import type { JobDefinition } from '../../server/jobs.ts';
import type { NavEntry, PageKit } from '../../server/pages.ts';

export const AUDIT_PATH = '/settings/audit';
/** Entries per page. */
export const AUDIT_PAGE_SIZE = 50;
export const AUDIT_CSS = new URL('./audit.css', import.meta.url);
const ENTRY_ID = /^au_[0-9A-Za-z]{1,40}$/;

/** The navigation entry: a settings page, for owners and admins. */
export const auditNavigation: NavEntry[] = [
  {
    label: 'Audit log',
    path: AUDIT_PATH,
    order: 55,
    section: 'settings',
    summary: 'Who changed API keys, members, roles and webhooks, and when (owners and admins).',
    visible: (viewer) => viewer.manage,
  },
];

const link = (family: string | undefined, before?: string) => {
  const q = new URLSearchParams();
  if (family) q.set('family', family);
  if (before) q.set('before', before);
  const s = q.toString();
  return s ? `${AUDIT_PATH}?${s}` : AUDIT_PATH;
};

export function auditRoutes(options: { db: Database; pages: PageKit }): express.Router {
  const { db, pages } = options;
  const router = pages.router();
  const views = pages.views(new URL('./pages', import.meta.url));

  router.get(AUDIT_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    if (!page.manage) return page.notice(403, 'Owners and admins only', ['Only owners and admins can read the audit log.']);
    const q = req.query;
    const rawFamily = q.family === undefined || q.family === '' || q.family === 'all' ? undefined : q.family;
    // The families the modules declare (server/audit.ts: keys, members, webhooks, connections).
    const families = auditFamilies();
    if (rawFamily !== undefined && (typeof rawFamily !== 'string' || !families.has(rawFamily))) {
      return page.notice(400, 'Unknown filter', [`The audit log filters by ${[...families.keys()].join(', ')} (got “${String(rawFamily).slice(0, 40)}”). Open ${AUDIT_PATH} for every entry.`]);
    }
    const family = rawFamily;
    const chosen = family === undefined ? undefined : families.get(family);
    let before: { at: number; id: string } | undefined;
    if (q.before !== undefined && q.before !== '') {
      const id = typeof q.before === 'string' && ENTRY_ID.test(q.before) ? q.before : '';
      const row = id ? await findAuditRow(db.sql, page.workspaceId, id) : undefined;
      if (!row) {
        return page.notice(400, 'Unknown position', ['This link continues after an entry that does not exist (or no longer does: old entries are deleted). Open the audit log again from its newest entries.']);
      }
      before = { at: row.at, id: row.id };
    }
    const { entries, older } = await readAudit(db.sql, page.workspaceId, { limit: AUDIT_PAGE_SIZE, before, actions: chosen?.prefixes });
    await page.send(200, {
      title: 'Audit log',
      html: views.render('audit', {
        entries,
        filters: [
          { label: 'All', href: link(undefined), current: family === undefined },
          ...[...families].map(([name, f]) => ({ label: f.label, href: link(name), current: family === name })),
        ],
        familyLabel: chosen?.label ?? '',
        older: older ? link(family, older) : '',
        newest: before ? link(family) : '',
        pageSize: AUDIT_PAGE_SIZE,
      }),
    });
  });
  return router;
}

/** The daily job deleting entries older than the retention. */
export function pruneAuditJob(db: Database, clock: Clock, logger: Logger, retentionDays: number): JobDefinition {
  return {
    everyMs: 24 * 3_600_000,
    run: async () => {
      const removed = await pruneAudit(db.sql, clock.now(), retentionDays);
      if (removed) logger.info({ removed, retention_days: retentionDays }, 'pruned old audit log entries');
    },
  };
}


