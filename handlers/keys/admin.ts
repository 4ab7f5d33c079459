/**
 * The API keys' operator commands (`npm run admin -- ...`), beside the key commands of scripts/admin.ts:
 * `workspace api-keys --workspace ws_... (--on | --off | --stop)` and
 * `key delegation --id ak_... --to none|all|mb_...,mb_...`. Both use server/admin.ts (the page's
 * implementation) and are recorded in the audit log with the operator as actor.
 */
import type { Command } from 'commander';
import { commandGroup } from '../../server/adminCli.ts';
import type { ApiKeyAccess } from '../../db/rows.ts';
import { AdminError, changeDelegation, setApiKeyAccess } from '../../server/admin.ts';
import type { AdminDeps } from '../../server/module.ts';

export function keysAdmin(program: Command, deps: AdminDeps): void {
  commandGroup(program, 'workspace', 'workspaces')
    .command('api-keys')
    .requiredOption('--workspace <id>', 'workspace id (ws_...)')
    .option('--on', 'keys may be made and used')
    .option('--off', 'no new keys; existing keys keep working')
    .option('--stop', 'no new keys, and every existing key is refused (403) from its next request')
    .description("turn a workspace's API keys on, off (no new keys) or stop them (existing keys refused too)")
    .action((o: { workspace: string; on?: boolean; off?: boolean; stop?: boolean }) =>
      deps.withDb(async (db) => {
        const chosen = [o.on && 'on', o.off && 'off', o.stop && 'stopped'].filter((x): x is ApiKeyAccess => typeof x === 'string');
        if (chosen.length !== 1) throw new AdminError('give exactly one of --on, --off or --stop');
        return setApiKeyAccess(db, deps.clock, o.workspace, chosen[0]!);
      }),
    );
  commandGroup(program, 'key', 'API keys')
    .command('delegation')
    .requiredOption('--id <id>', 'key id (ak_...)')
    .requiredOption('--to <who>', 'none, all, or comma-separated member ids')
    .description('change whom a key may act for (Service-Act-As), from its next request on')
    .action((o: { id: string; to: string }) =>
      deps.withDb((db) => {
        const to = o.to === 'none' || o.to === 'all' ? o.to : o.to.split(',').map((m) => m.trim()).filter(Boolean);
        if (Array.isArray(to) && !to.length) throw new AdminError('--to: give none, all, or member ids');
        return changeDelegation(db, deps.clock, o.id, to);
      }),
    );
}
