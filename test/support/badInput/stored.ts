import type { Database } from '../../../db/database.ts';
import type { TestService } from '../service.ts';

/** What a refused request must leave as it was: row counts of every table, and what lean endpoints hold. */

/** Tables whose rows change without a request storing anything (budgets, lazily made secrets, consumer positions). */
const UNSTORED = new Set(['rate_limits', 'service_secrets', 'outbox_consumers', 'knex_migrations', 'knex_migrations_lock']);
const tablesOf = new WeakMap<Database, Promise<string[]>>();

async function tables(db: Database): Promise<string[]> {
  let list = tablesOf.get(db);
  if (!list) {
    const rows =
      db.dialect === 'sqlite'
        ? await db.sql.all<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
        : await db.sql.all<{ name: string }>(`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`);
    list = Promise.resolve(rows.map((r) => r.name).filter((n) => !UNSTORED.has(n)));
    tablesOf.set(db, list);
  }
  return list;
}

/** Row counts of every table (one query), and the lean endpoints' queues (collection): what a refused request must leave as it was. */
export async function storedState(svc: TestService): Promise<Record<string, number>> {
  const names = await tables(svc.db);
  const rows = await svc.db.sql.all<{ t: string; n: number | string }>(names.map((n) => `SELECT '${n}' AS t, COUNT(*) AS n FROM ${n}`).join(' UNION ALL '));
  const out: Record<string, number> = { 'held by lean endpoints': Object.values(svc.endpoints).reduce((n, e) => n + e.queued, 0) };
  for (const r of rows) out[r.t] = Number(r.n);
  return out;
}

export function stateDiff(before: Record<string, number>, after: Record<string, number>): string | null {
  const changed = Object.keys({ ...before, ...after })
    .filter((k) => before[k] !== after[k])
    .map((k) => `${k} ${before[k] ?? 0} -> ${after[k] ?? 0}`);
  return changed.length ? changed.join(', ') : null;
}
