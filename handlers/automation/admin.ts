import type { Command } from 'commander';
import type { Database } from '../../db/database.ts';
import { AdminError } from '../../server/admin.ts';
import type { Clock } from '../../server/clock.ts';
import type { AdminDeps } from '../../server/module.ts';
import { findRule, listRules, setRuleEnabled } from './queries.ts';
import { BUILT_IN_RULES, ruleFromRow } from './rules.ts';

/** Pauses or resumes an operator-authored rule; says when nothing changed. */
export async function setEnabled(db: Database, clock: Clock, workspaceId: string, ruleId: string, enabled: boolean, by: string, appId?: string): Promise<{ rule_id: string; app_id: string; enabled: boolean; changed: boolean }> {
  if (BUILT_IN_RULES.some((r) => r.ruleId === ruleId)) throw new AdminError(`${ruleId} is a built-in rule: it is always enabled`);
  return db.tx(async (sql) => {
    const row = await findRule(sql, workspaceId, ruleId, appId, true);
    if (!row) throw new AdminError(`no automation rule ${ruleId} in workspace ${workspaceId}`);
    const changed = (await setRuleEnabled(sql, workspaceId, row.app_id, row.rule_id, enabled, by, clock.now())) > 0;
    return { rule_id: row.rule_id, app_id: row.app_id, enabled, changed };
  });
}

/** `npm run admin -- automation list | pause | resume` (rules are added in the workspace file: `automations:`). */
export function automationAdmin(program: Command, { withDb, clock }: AdminDeps): void {
  const automation = program.command('automation').description('automation rules (add them in the workspace file under automations:, with apply or workspace add)');
  automation
    .command('list')
    .requiredOption('--workspace <id>', 'workspace id (ws_...)')
    .description("a workspace's authored rules (built-in rules are in every workspace)")
    .action((o: { workspace: string }) =>
      withDb(async (db) => {
        const rows = await listRules(db.sql, o.workspace, {}, null, 1000);
        return {
          built_in: BUILT_IN_RULES.map((r) => ({ rule_id: r.ruleId, app_id: r.appId, name: r.name })),
          rules: rows.map(ruleFromRow).map((r) => ({ rule_id: r.ruleId, app_id: r.appId, name: r.name, enabled: r.enabled, trigger: r.trigger, actions: r.actions.length })),
        };
      }),
    );
  for (const [verb, enabled] of [['pause', false], ['resume', true]] as const) {
    automation
      .command(verb)
      .requiredOption('--workspace <id>', 'workspace id (ws_...)')
      .requiredOption('--rule <id>', 'rule id (ru_...)')
      .description(enabled ? 'resume a paused rule: changes from now on run it (changes made while it was paused are not replayed)' : 'pause a rule: changes from now on do not run it')
      .action((o: { workspace: string; rule: string }) => withDb((db) => setEnabled(db, clock, o.workspace, o.rule, enabled, 'operator')));
  }
}
