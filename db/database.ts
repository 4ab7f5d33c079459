import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import type BetterSqlite3 from 'better-sqlite3';
import { migrationSource } from './migrations/source.ts';

// BIGINT columns hold Unix milliseconds and counters, far below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number.parseInt(value, 10));

export type Dialect = 'sqlite' | 'pg';
export type SqlValue = string | number | boolean | null | undefined;
export type Row = Record<string, unknown>;

/** Runs SQL written with `?` placeholders on one connection; prepared once per connection. */
export interface Sql {
  readonly dialect: Dialect;
  all<T extends object = Row>(text: string, params?: readonly SqlValue[]): Promise<T[]>;
  one<T extends object = Row>(text: string, params?: readonly SqlValue[]): Promise<T | undefined>;
  /** Runs a statement and returns the number of rows it changed. */
  run(text: string, params?: readonly SqlValue[]): Promise<number>;
}

export interface Database {
  readonly dialect: Dialect;
  readonly knex: Knex;
  /** Autocommit statements. */
  readonly sql: Sql;
  /** Runs fn in one transaction (BEGIN IMMEDIATE on SQLite); commits when it resolves, rolls back when it throws. */
  tx<T>(fn: (sql: Sql) => Promise<T>): Promise<T>;
  /** Serializes transactions that take the same key until commit (advisory lock; SQLite writers are already serial). */
  lock(sql: Sql, key: string): Promise<void>;
  migrate(): Promise<void>;
  close(): Promise<void>;
  /** Where the data lives, without credentials, for logs. */
  readonly description: string;
}

interface SqliteConnection { kind: 'sqlite'; db: BetterSqlite3.Database }

const statementCache = new WeakMap<object, Map<string, BetterSqlite3.Statement>>();
const pgText = new Map<string, { text: string; name: string }>();

function sqliteParams(params: readonly SqlValue[]): unknown[] {
  return params.map((v) => (v === undefined ? null : typeof v === 'boolean' ? (v ? 1 : 0) : v));
}

function sqliteExecutor(conn: BetterSqlite3.Database): Sql {
  let cache = statementCache.get(conn);
  if (!cache) statementCache.set(conn, (cache = new Map()));
  const prepare = (text: string) => {
    let stmt = cache.get(text);
    if (!stmt) cache.set(text, (stmt = conn.prepare(text.replace(/\bFOR UPDATE( SKIP LOCKED)?/g, ''))));
    return stmt;
  };
  return {
    dialect: 'sqlite',
    async all<T>(text: string, params: readonly SqlValue[] = []) {
      return prepare(text).all(...sqliteParams(params)) as T[];
    },
    async one<T>(text: string, params: readonly SqlValue[] = []) {
      const stmt = prepare(text);
      if (stmt.reader) return stmt.get(...sqliteParams(params)) as T | undefined;
      stmt.run(...sqliteParams(params));
      return undefined;
    },
    async run(text: string, params: readonly SqlValue[] = []) {
      const stmt = prepare(text);
      if (stmt.reader) return stmt.all(...sqliteParams(params)).length;
      return stmt.run(...sqliteParams(params)).changes;
    },
  };
}

function toPg(text: string): { text: string; name: string } {
  let cached = pgText.get(text);
  if (!cached) {
    let n = 0;
    const converted = text.replace(/\?/g, () => `$${++n}`);
    cached = { text: converted, name: 'q' + crypto.createHash('sha1').update(converted).digest('hex').slice(0, 20) };
    pgText.set(text, cached);
  }
  return cached;
}

function pgExecutor(client: pg.PoolClient | pg.Client): Sql {
  const query = (text: string, params: readonly SqlValue[]) => {
    const { text: q, name } = toPg(text);
    return client.query({ name, text: q, values: params.map((v) => (v === undefined ? null : v)) });
  };
  return {
    dialect: 'pg',
    async all<T>(text: string, params: readonly SqlValue[] = []) {
      return (await query(text, params)).rows as T[];
    },
    async one<T>(text: string, params: readonly SqlValue[] = []) {
      return (await query(text, params)).rows[0] as T | undefined;
    },
    async run(text: string, params: readonly SqlValue[] = []) {
      return (await query(text, params)).rowCount ?? 0;
    },
  };
}

/** Parses DATABASE_URL: `sqlite:PATH` (or `sqlite::memory:`) or `postgres://...` (optionally `?schema=NAME`). */
export function parseDatabaseUrl(url: string): { dialect: Dialect; filename?: string; connectionString?: string; schema?: string } {
  if (url.startsWith('sqlite:')) {
    const filename = url.slice('sqlite:'.length).replace(/^\/\//, '');
    if (!filename) throw new Error('DATABASE_URL sqlite: needs a file path, e.g. sqlite:data/service.sqlite');
    return { dialect: 'sqlite', filename };
  }
  if (/^postgres(ql)?:\/\//.test(url)) {
    const parsed = new URL(url);
    const schema = parsed.searchParams.get('schema') ?? undefined;
    if (schema !== undefined && !/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new Error('DATABASE_URL ?schema= must be a lower-case SQL identifier');
    parsed.searchParams.delete('schema');
    return { dialect: 'pg', connectionString: parsed.toString(), ...(schema ? { schema } : {}) };
  }
  throw new Error(`DATABASE_URL must start with sqlite: or postgres:// (got "${url.replace(/\/\/[^@]*@/, '//***@')}")`);
}

export const DEFAULT_DATABASE_URL = 'sqlite:data/service.sqlite';

/** Opens the database named by a DATABASE_URL (knex pool; one connection on SQLite). */
export function openDatabase(url: string = process.env.DATABASE_URL || DEFAULT_DATABASE_URL, options: { poolMax?: number } = {}): Database {
  const parsed = parseDatabaseUrl(url);
  let knex: Knex;
  let description: string;
  if (parsed.dialect === 'sqlite') {
    const filename = parsed.filename!;
    if (filename !== ':memory:') fs.mkdirSync(path.dirname(path.resolve(filename)), { recursive: true });
    description = `sqlite:${filename}`;
    knex = knexFactory({
      client: 'better-sqlite3',
      connection: { filename },
      useNullAsDefault: true,
      pool: {
        min: 1,
        max: 1,
        afterCreate(conn: BetterSqlite3.Database, done: (err: Error | null, conn: unknown) => void) {
          conn.pragma('journal_mode = WAL');
          conn.pragma('synchronous = NORMAL');
          conn.pragma('foreign_keys = ON');
          conn.pragma('busy_timeout = 5000');
          done(null, conn);
        },
      },
    });
  } else {
    description = (parsed.connectionString ?? '').replace(/\/\/[^@]*@/, '//***@');
    knex = knexFactory({
      client: 'pg',
      connection: parsed.connectionString,
      ...(parsed.schema ? { searchPath: [parsed.schema] } : {}),
      pool: { min: 0, max: options.poolMax ?? Number(process.env.DATABASE_POOL_MAX ?? 10) },
    });
    if (parsed.schema) description += ` (schema ${parsed.schema})`;
  }
  const dialect = parsed.dialect;
  const client = knex.client as { acquireConnection(): Promise<unknown>; releaseConnection(c: unknown): unknown };
  const executorFor = (conn: unknown): Sql =>
    dialect === 'sqlite' ? sqliteExecutor(conn as BetterSqlite3.Database) : pgExecutor(conn as pg.PoolClient);

  async function withConnection<T>(fn: (sql: Sql) => Promise<T>): Promise<T> {
    const conn = await client.acquireConnection();
    try {
      return await fn(executorFor(conn));
    } finally {
      client.releaseConnection(conn);
    }
  }

  const sql: Sql = {
    dialect,
    all: (text, params) => withConnection((s) => s.all(text, params)),
    one: (text, params) => withConnection((s) => s.one(text, params)),
    run: (text, params) => withConnection((s) => s.run(text, params)),
  };

  return {
    dialect,
    knex,
    sql,
    description,
    tx: <T>(fn: (sql: Sql) => Promise<T>) =>
      withConnection(async (s) => {
        await s.run(dialect === 'sqlite' ? 'BEGIN IMMEDIATE' : 'BEGIN');
        try {
          const result = await fn(s);
          await s.run('COMMIT');
          return result;
        } catch (err) {
          await s.run('ROLLBACK').catch(() => undefined);
          throw err;
        }
      }),
    async lock(s: Sql, key: string) {
      if (dialect !== 'pg') return;
      const digest = crypto.createHash('sha256').update(key).digest();
      await s.run('SELECT pg_advisory_xact_lock(?)', [digest.readBigInt64BE(0).toString()]);
    },
    migrate: async () => {
      if (parsed.schema) await knex.raw(`CREATE SCHEMA IF NOT EXISTS ${parsed.schema}`);
      await knex.migrate.latest({ migrationSource, ...(parsed.schema ? { schemaName: parsed.schema } : {}) });
    },
    close: () => knex.destroy(),
  };
}
