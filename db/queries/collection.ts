import type { Sql } from '../database.ts';

export interface CollectBundle {
  id: string;
  domain: string;
}

/** The site a publishable collect key belongs to. */
export function bundleByCollectKey(sql: Sql, key: string): Promise<CollectBundle | undefined> {
  return sql.one<CollectBundle>(`SELECT id, domain FROM bundles WHERE collect_key = ?`, [key]);
}

/** Sets a site's collect key; returns false when there is no such site. */
export async function setCollectKey(sql: Sql, bundleId: string, key: string): Promise<boolean> {
  return (await sql.run(`UPDATE bundles SET collect_key = ? WHERE id = ?`, [key, bundleId])) > 0;
}

export function collectKeyOf(sql: Sql, bundleId: string): Promise<{ collect_key: string | null } | undefined> {
  return sql.one<{ collect_key: string | null }>(`SELECT collect_key FROM bundles WHERE id = ?`, [bundleId]);
}

/** The salt of a UTC day: the proposed one when the day has none yet, else the one every process already uses. */
export async function daySalt(sql: Sql, day: number, proposed: string, now: number): Promise<string> {
  await sql.run(`INSERT INTO analytics_salts (day, salt, created_at) VALUES (?, ?, ?) ON CONFLICT (day) DO NOTHING`, [day, proposed, now]);
  const row = await sql.one<{ salt: string }>(`SELECT salt FROM analytics_salts WHERE day = ?`, [day]);
  if (!row) throw new Error(`salt of day ${day} vanished`);
  return row.salt;
}

/** The salt of a UTC day if one was made (never creates one). */
export async function existingSalt(sql: Sql, day: number): Promise<string | null> {
  return (await sql.one<{ salt: string }>(`SELECT salt FROM analytics_salts WHERE day = ?`, [day]))?.salt ?? null;
}

export function deleteSaltsCreatedBefore(sql: Sql, before: number): Promise<number> {
  return sql.run(`DELETE FROM analytics_salts WHERE created_at < ?`, [before]);
}

/** The latest event time of each of these visitors on a site, among events at or after `since` (index analytics_events_visitor). */
export async function latestEventOfVisitors(sql: Sql, bundleId: string, visitors: readonly string[], since: number): Promise<Array<{ visitor: string; ts: number }>> {
  const out: Array<{ visitor: string; ts: number }> = [];
  for (let i = 0; i < visitors.length; i += 500) {
    const chunk = visitors.slice(i, i + 500);
    // A few list lengths only, so the prepared statements stay few: pad with the last id.
    const size = [1, 10, 100, 500].find((n) => n >= chunk.length)!;
    while (chunk.length < size) chunk.push(chunk[chunk.length - 1]!);
    out.push(...(await sql.all<{ visitor: string; ts: number }>(
      `SELECT visitor, MAX(ts) AS ts FROM analytics_events WHERE bundle_id = ? AND visitor IN (${chunk.map(() => '?').join(', ')}) AND ts >= ? GROUP BY visitor`,
      [bundleId, ...chunk, since],
    )));
  }
  return out;
}
