/** Finding a PostgreSQL to test or benchmark against: reachable as given, or started locally. */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The URL with its password hidden, for messages. */
export const redactUrl = (url: string) => url.replace(/\/\/[^@]*@/, '//***@');

/** Why the database cannot be reached, or null when it answers `SELECT 1`. */
export async function postgresProblem(url: string): Promise<string | null> {
  const parsed = new URL(url);
  parsed.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: parsed.toString(), connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return null;
  } catch (err) {
    return (err as Error).message;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * The URL when it is reachable; otherwise, when `mayStartLocal`, starts this machine's cluster with
 * scripts/postgres-local.sh and tries again. Returns the reason when there is still none.
 */
export async function reachablePostgres(url: string, mayStartLocal: boolean, log: (line: string) => void = () => undefined): Promise<{ url: string } | { why: string }> {
  let problem = await postgresProblem(url);
  if (problem && mayStartLocal) {
    log(`PostgreSQL at ${redactUrl(url)} is not reachable (${problem}); trying scripts/postgres-local.sh`);
    try {
      execFileSync('bash', [path.join(root, 'scripts/postgres-local.sh')], { stdio: ['ignore', 'ignore', 'inherit'] });
      problem = await postgresProblem(url);
    } catch (err) {
      problem = `${problem}; scripts/postgres-local.sh failed: ${(err as Error).message.split('\n')[0]}`;
    }
  }
  return problem ? { why: `${redactUrl(url)} is not reachable (${problem})` } : { url };
}
