import { AUDIT_RETENTION_DAYS_DEFAULT } from '../../server/audit.ts';
import { envNumber } from '../../server/config.ts';
import type { ServiceModule } from '../../server/module.ts';
import { auditAdmin } from './admin.ts';
import { AUDIT_CSS, auditNavigation, auditRoutes, pruneAuditJob } from './pages.ts';

/** The audit log module's settings. */
export interface AuditSettings {
  /** Entries older than this (days, at least 1; default 400) are deleted by the daily `audit.prune` job (AUDIT_RETENTION_DAYS). */
  retentionDays: number;
}

/** AUDIT_RETENTION_DAYS, read when the process starts (a bad value stops it with a readable error). */
export const auditSettings = (env: Readonly<Record<string, string | undefined>>): AuditSettings => ({
  retentionDays: envNumber(env, 'AUDIT_RETENTION_DAYS', AUDIT_RETENTION_DAYS_DEFAULT, 1),
});

/**
 * The audit log, a platform feature: its page (`/settings/audit`, owners and admins), the operator's
 * `audit list`, and the daily `audit.prune` job. Entries are written by the kernel's `recordAudit`
 * (server/audit.ts) in the transaction of each change, by whichever module makes it.
 */
export const audit: ServiceModule<'audit', AuditSettings> = {
  namespace: 'audit',
  handlers: {},
  config: auditSettings,
  routes: (deps) => auditRoutes(deps),
  navigation: () => auditNavigation,
  stylesheet: AUDIT_CSS,
  jobs: (deps) => ({ 'audit.prune': pruneAuditJob(deps.db, deps.clock, deps.logger, deps.settings.retentionDays) }),
  admin: auditAdmin,
};
