/** Helpers for the operator commands modules add to the admin CLI (`ServiceModule.admin`). */
import type { Command } from 'commander';
import type { Sql } from '../db/database.ts';
import { AdminError } from './admin.ts';

/** The command group `name` of the program (`workspace`, `key`), made when no module made it yet. */
export const commandGroup = (program: Command, name: string, description: string): Command =>
  program.commands.find((c) => c.name() === name) ?? program.command(name).description(description);

/** A `--limit` value: a whole number from 1 to `max`, or a one-line AdminError. */
export function limitOption(raw: string, max = 500): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max) throw new AdminError(`--limit must be a whole number from 1 to ${max} (got "${raw}")`);
  return n;
}

/** Refuses, in one line, a workspace id that names no workspace. */
export async function existingWorkspace(sql: Sql, id: string): Promise<void> {
  if (!(await sql.one(`SELECT id FROM workspaces WHERE id = ?`, [id]))) throw new AdminError(`no workspace ${id} (see npm run admin -- workspace list)`);
}
