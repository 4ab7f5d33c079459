/** `npm run admin -- audit list`: a workspace's audit log for the operator, in the page's words. */
import type { Command } from 'commander';
import { findAuditRow } from '../../db/queries/audit.ts';
import { AdminError } from '../../server/admin.ts';
import { auditFamilies, readAudit } from '../../server/audit.ts';
import { existingWorkspace, limitOption } from '../../server/adminCli.ts';
import type { AdminDeps } from '../../server/module.ts';

const ACTION_PREFIX = /^[a-z][a-z_.]{0,63}$/;

/** Adds the `audit` commands to the admin CLI. */
export function auditAdmin(program: Command, deps: AdminDeps): void {
  const audit = program.command('audit').description('the audit log: who changed keys, members, roles and webhooks, and when (kept AUDIT_RETENTION_DAYS, default 400)');
  audit
    .command('list')
    .requiredOption('--workspace <id>', 'workspace id (ws_...)')
    .option('--limit <n>', 'at most this many entries, newest first (1-500)', '50')
    .option('--before <entry>', 'continue after this entry (the id of the last entry printed: au_...)')
    .option('--action <prefix>', 'only actions starting with this (e.g. key. or member.role_changed), or a family: keys, members, webhooks, connections')
    .description("a workspace's audit log, newest first: id, time (UTC), who, action, what happened in words, subject")
    .action((o: { workspace: string; limit: string; before?: string; action?: string }) => {
      const limit = limitOption(o.limit);
      const action = o.action?.trim().toLowerCase();
      const family = action === undefined ? undefined : auditFamilies().get(action);
      if (action !== undefined && !family && !ACTION_PREFIX.test(action)) {
        throw new AdminError(`--action must be an action or its start, such as key. or member.role_changed, or one of ${[...auditFamilies().keys()].join(', ')} (got "${o.action}")`);
      }
      const actions = action === undefined ? undefined : family ? family.prefixes : [action];
      return deps.withDb(async (db) => {
        await existingWorkspace(db.sql, o.workspace);
        let before: { at: number; id: string } | undefined;
        if (o.before !== undefined) {
          const row = await findAuditRow(db.sql, o.workspace, o.before.trim());
          if (!row) throw new AdminError(`--before: no entry ${o.before} in workspace ${o.workspace} (give the id of an entry printed by audit list; old entries are deleted)`);
          before = { at: row.at, id: row.id };
        }
        const { entries, older } = await readAudit(db.sql, o.workspace, { limit, before, actions });
        if (older) process.stderr.write(`older entries: add --before ${older}\n`);
        return entries.map((e) => ({ id: e.id, at: e.when, who: e.who, action: e.action, what: e.what, subject: e.subject }));
      });
    });
}
