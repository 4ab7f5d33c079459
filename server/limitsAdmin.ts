/**
 * The operator's command for a workspace's limits (server/limits.ts):
 * `npm run admin -- workspace limits --workspace ws_... [--mails-per-hour N] ... [--stored-bytes N]`.
 * Without a limit option it prints them; each option sets one (a whole number) or puts it back to the
 * default (`default`). Prints every limit after the change and which ones are the workspace's own.
 */
import type { Command } from 'commander';
import { commandGroup } from './adminCli.ts';
import { AdminError } from './admin.ts';
import { DEFAULT_LIMITS, LIMIT_BOUNDS, LIMIT_NAMES, type LimitName, LimitsError, setWorkspaceLimits } from './limits.ts';
import type { AdminDeps } from './module.ts';

const flag = (name: LimitName) => name.replace(/_/g, '-');
const camel = (name: LimitName) => name.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());

export function limitsAdmin(program: Command, deps: AdminDeps): void {
  const cmd = commandGroup(program, 'workspace', 'workspaces')
    .command('limits')
    .requiredOption('--workspace <id>', 'workspace id (ws_...)')
    .description("print a workspace's limits, or set some (a whole number, or `default`)");
  for (const name of LIMIT_NAMES) {
    const b = LIMIT_BOUNDS[name];
    cmd.option(`--${flag(name)} <n>`, `${b.min} to ${b.max}, or default (${DEFAULT_LIMITS[name]})`);
  }
  cmd.action((o: Record<string, string | undefined> & { workspace: string }) =>
    deps.withDb(async (db) => {
      const changes: Partial<Record<LimitName, number | null>> = {};
      for (const name of LIMIT_NAMES) {
        const raw = o[camel(name)];
        if (raw === undefined) continue;
        if (raw === 'default') changes[name] = null;
        else if (/^\d{1,16}$/.test(raw)) changes[name] = Number(raw);
        else throw new AdminError(`--${flag(name)} must be a whole number or default (got "${raw}")`);
      }
      try {
        const r = await setWorkspaceLimits(db, deps.clock, o.workspace, changes);
        return { workspace_id: r.workspace_id, ...r.limits, set_by_operator: r.own.join(', ') || 'none (every limit is the default)' };
      } catch (err) {
        if (err instanceof LimitsError) throw new AdminError(err.message.replace(/^([a-z_]+) must/, (_m, n: string) => `--${n.replace(/_/g, '-')} must`));
        throw err;
      }
    }),
  );
}
