import type { Sql } from '../../db/database.ts';

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
