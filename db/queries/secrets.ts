import type { Sql } from '../database.ts';

/**
 * The shared secret `name`: the proposed one when there is none yet, else the one every process
 * already uses (two processes racing to create it agree on the first insert).
 */
export async function serviceSecret(sql: Sql, name: string, proposed: string, now: number): Promise<string> {
  const found = await sql.one<{ secret: string }>(`SELECT secret FROM service_secrets WHERE name = ?`, [name]);
  if (found) return found.secret;
  await sql.run(`INSERT INTO service_secrets (name, secret, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`, [name, proposed, now]);
  const row = await sql.one<{ secret: string }>(`SELECT secret FROM service_secrets WHERE name = ?`, [name]);
  if (!row) throw new Error(`service secret ${name} vanished`);
  return row.secret;
}
