import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import type BetterSqlite3 from 'better-sqlite3';
import { type MigrationFolder, migrationSource as sourceOf, PLATFORM_MIGRATIONS } from './migrations/source.ts';

// BIGINT columns hold Unix milliseconds and counters, far below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number.parseInt(value, 10));

export type { MigrationFolder };
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
  /**
   * A write whose result nobody reads. Inside a PostgreSQL transaction it is queued and sent, together
   * with the other queued writes, as one statement (a writable CTE) before the next read or the commit,
   * saving round trips; its errors surface there. Queued writes see the same snapshot, so queue only
   * writes that do not depend on each other. Elsewhere it runs at once.
   */
  write(text: string, params?: readonly SqlValue[]): Promise<void>;
}

export interface Database {
  readonly dialect: Dialect;
  readonly knex: Knex;
  /** Autocommit statements. */
  readonly sql: Sql;
  /**
   * Autocommit statements whose commit need not wait for the disk (PostgreSQL synchronous_commit=off):
   * rate-limit buckets and idempotency locks, which a crash may lose without harm. A later durable
   * commit flushes them too, since the log is written in order. On SQLite they run inside an open
   * commit group instead of committing it (see SqliteConnection).
   */
  readonly relaxed: Sql;
  /** Runs fn in one transaction (BEGIN IMMEDIATE on SQLite); commits when it resolves, rolls back when it throws. */
  tx<T>(fn: (sql: Sql) => Promise<T>): Promise<T>;
  /** Serializes transactions that take the same key until commit (advisory lock; SQLite writers are already serial). */
  lock(sql: Sql, key: string): Promise<void>;
  /**
   * Runs the platform's migrations and the modules' (`modules`: every module's folder, `migrations` of
   * app.ts) that have not run yet, in one order by name. Knex refuses when a migration this database
   * has run is in none of the folders, so leaving a module's folder out fails instead of skipping it.
   */
  migrate(modules: readonly MigrationFolder[]): Promise<void>;
  /**
   * SQLite: takes WAL checkpoints off this thread. Otherwise the commit that crosses the WAL size limit
   * copies the whole log into the database file while every request waits (the command path's p99 was
   * 180-220 ms from this); now that connection never checkpoints and a worker thread runs a PASSIVE
   * checkpoint every `intervalMs`. For long-running service processes; no-op on PostgreSQL.
   */
  startCheckpointer(intervalMs?: number): void;
  /** Connections of this process: open, idle and requests waiting for one (PostgreSQL pools; SQLite: one connection, busy while a transaction holds it). */
  poolStats(): { total: number; idle: number; waiting: number };
  close(): Promise<void>;
  /** Where the data lives, without credentials, for logs. */
  readonly description: string;
}

interface SqliteConnection { kind: 'sqlite'; db: BetterSqlite3.Database }

const pgText = new Map<string, { text: string; name: string }>();

function sqliteParams(params: readonly SqlValue[]): unknown[] {
  return params.map((v) => (v === undefined ? null : typeof v === 'boolean' ? (v ? 1 : 0) : v));
}

/** SQLite's executor also says whether a statement only reads (it may then run inside an open commit group). */
type SqliteSql = Sql & { readsOnly(text: string): boolean };

function sqliteExecutor(conn: BetterSqlite3.Database): SqliteSql {
  const cache = new Map<string, BetterSqlite3.Statement>();
  const prepare = (text: string) => {
    let stmt = cache.get(text);
    if (!stmt) cache.set(text, (stmt = conn.prepare(text.replace(/\bFOR (?:UPDATE|SHARE)(?: SKIP LOCKED)?/g, ''))));
    return stmt;
  };
  return {
    dialect: 'sqlite',
    readsOnly: (text) => prepare(text).readonly,
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
    async write(text: string, params: readonly SqlValue[] = []) {
      prepare(text).run(...sqliteParams(params));
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

const pgExecutors = new WeakMap<object, Sql>();

function pgExecutor(client: pg.PoolClient | pg.Client): Sql {
  const cached = pgExecutors.get(client);
  if (cached) return cached;
  const executor = pgExecutorFor(client);
  pgExecutors.set(client, executor);
  return executor;
}

const TX_CONTROL = new Set(['BEGIN', 'COMMIT', 'ROLLBACK']);

function targetTable(text: string): string {
  return /^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)/i.exec(text)?.[1]?.toLowerCase() ?? text;
}

function pgExecutorFor(client: pg.PoolClient | pg.Client): Sql {
  let inTx = false;
  let queued: Array<{ text: string; params: readonly SqlValue[] }> = [];
  const send = (text: string, params: readonly SqlValue[]) => {
    const { text: q, name } = toPg(text);
    return client.query({ name, text: q, values: params.map((v) => (v === undefined ? null : v)) });
  };
  const flush = async () => {
    const pending = queued;
    queued = [];
    // One statement per batch of writes to distinct tables: writes to one table keep their order.
    while (pending.length) {
      const tables = new Set<string>();
      const batch: typeof pending = [];
      while (pending.length && !tables.has(targetTable(pending[0]!.text))) {
        tables.add(targetTable(pending[0]!.text));
        batch.push(pending.shift()!);
      }
      if (batch.length === 1) await send(batch[0]!.text, batch[0]!.params);
      else await send(`WITH ${batch.map((b, i) => `w${i} AS (${b.text})`).join(', ')} SELECT 1`, batch.flatMap((b) => b.params));
    }
  };
  const query = async (text: string, params: readonly SqlValue[]) => {
    if (TX_CONTROL.has(text)) {
      if (text === 'COMMIT') await flush();
      queued = [];
      inTx = text === 'BEGIN';
      return client.query(text);
    }
    await flush();
    return send(text, params);
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
    async write(text: string, params: readonly SqlValue[] = []) {
      if (inTx) queued.push({ text, params });
      else await query(text, params);
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

/**
 * Whether an error only says the database is busy for now: SQLite's write lock held by another
 * process past `busy_timeout` (an import, the demo's bulk load), or a PostgreSQL lock that could not
 * be had or a deadlock victim. Background work waits and tries again; it is not a failure.
 */
export function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED') || code === '55P03' || code === '40P01');
}

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
          // Checkpoint the WAL every ~80 MB instead of every 4 MB: a checkpoint inside a commit was a
          // third of each live analytics batch's time (5,400-5,800 vs 3,900-4,900 events/s measured).
          conn.pragma('wal_autocheckpoint = 20000');
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
  let checkpointer: Worker | null = null;
  let checkpointerExit: Promise<unknown> = Promise.resolve();
  const client = knex.client as { acquireConnection(): Promise<unknown>; releaseConnection(c: unknown): unknown };
  const access = dialect === 'sqlite' ? new SqliteConnection(client) : new PgConnections(client, parsed, options.poolMax);

  const autocommit = (through: <T>(text: string, fn: (s: Sql) => Promise<T>) => Promise<T>): Sql => ({
    dialect,
    all: (text, params) => through(text, (s) => s.all(text, params)),
    one: (text, params) => through(text, (s) => s.one(text, params)),
    run: (text, params) => through(text, (s) => s.run(text, params)),
    write: (text, params) => through(text, (s) => s.write(text, params)),
  });
  const sql = autocommit((text, fn) => access.withConnection(fn, text));
  const relaxed = autocommit(access instanceof PgConnections ? (_text, fn) => access.relaxed(fn) : (_text, fn) => access.withRelaxed(fn));

  return {
    dialect,
    knex,
    sql,
    relaxed,
    description,
    tx: <T>(fn: (sql: Sql) => Promise<T>) => access.transaction(fn),
    async lock(s: Sql, key: string) {
      if (dialect !== 'pg') return;
      const digest = crypto.createHash('sha256').update(key).digest();
      await s.run('SELECT pg_advisory_xact_lock(?)', [digest.readBigInt64BE(0).toString()]);
    },
    migrate: async (modules) => {
      await access.release();
      const migrationSource = sourceOf([PLATFORM_MIGRATIONS, ...modules]);
      const run = async () => {
        if (parsed.schema) await knex.raw(`CREATE SCHEMA IF NOT EXISTS ${parsed.schema}`);
        await knex.migrate.latest({ migrationSource, ...(parsed.schema ? { schemaName: parsed.schema } : {}) }).catch((err: Error) => {
          // Knex says "the migration directory is corrupt": here it means a module's folder was not given.
          const missing = /the following files are missing: (.*)$/.exec(err.message)?.[1];
          throw missing ? new Error(`migrate: this database ran ${missing}, found in none of the migration folders given (pass every module's: app.ts's migrations)`) : err;
        });
      };
      if (parsed.dialect !== 'pg') return run();
      // Several processes starting at once on a new database: knex creates the schema and its own
      // tables before it takes its migration lock, and two creators collide. A session advisory lock
      // on a connection of its own makes the whole step one process at a time; the others then find
      // nothing to do.
      const lock = new pg.Client({ connectionString: parsed.connectionString });
      await lock.connect();
      try {
        await lock.query(`SELECT pg_advisory_lock(hashtext('wsops:migrate'))`);
        await run();
      } finally {
        await lock.end().catch(() => undefined);
      }
    },
    startCheckpointer(intervalMs = 250) {
      if (!(access instanceof SqliteConnection) || checkpointer || parsed.filename === ':memory:') return;
      access.pragma('wal_autocheckpoint = 0');
      const worker = new Worker(new URL('./checkpointer.mjs', import.meta.url), { workerData: { filename: parsed.filename, intervalMs } });
      // A failing checkpointer must not take the process down: commits then checkpoint as before.
      worker.on('error', () => access.pragma('wal_autocheckpoint = 20000'));
      checkpointerExit = new Promise((resolve) => worker.once('exit', resolve));
      worker.unref();
      checkpointer = worker;
    },
    poolStats: () => access.stats(),
    close: async () => {
      if (checkpointer) {
        checkpointer.postMessage('close');
        await checkpointerExit;
        checkpointer = null;
      }
      await access.release();
      await knex.destroy();
    },
  };
}

/**
 * A pool whose broken connections cannot crash the process: a connection that fails (the server
 * restarted, the network dropped) emits 'error' on its client or, idle, on the pool; without a
 * listener Node would end the process. The statement that was running fails on its own.
 */
function guarded(pool: pg.Pool): pg.Pool {
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/** Whether an error is the connection's own failure (a socket error or a terminated connection), not a statement's. */
function connectionFailed(err: unknown): boolean {
  if (!(err instanceof Error) || err instanceof pg.DatabaseError) return false;
  const code = (err as { code?: unknown }).code;
  return (typeof code === 'string' && /^E[A-Z]+$/.test(code)) || /Connection terminated|connection error|not queryable/i.test(err.message);
}

/** Runs fn on a pooled connection; a connection that failed (not a statement error) is discarded, not reused. */
async function using<T>(conn: pg.PoolClient, fn: (sql: Sql) => Promise<T>): Promise<T> {
  let broken = false;
  try {
    return await fn(pgExecutor(conn));
  } catch (err) {
    broken = connectionFailed(err);
    throw err;
  } finally {
    conn.release(broken);
  }
}

interface PoolClientSource {
  acquireConnection(): Promise<unknown>;
  releaseConnection(c: unknown): unknown;
}

async function inTransaction<T>(s: Sql, begin: string, fn: (sql: Sql) => Promise<T>): Promise<T> {
  await s.run(begin);
  try {
    const result = await fn(s);
    await s.run('COMMIT');
    return result;
  } catch (err) {
    await s.run('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** Group commit on SQLite: at most this many transactions share one commit, and a commit waits at most this long for more. */
const GROUP_MAX = 64;
const GROUP_MAX_MS = 10;

interface CommitGroup {
  readonly openedAt: number;
  /** The finished transactions waiting for the group's COMMIT. */
  readonly members: Array<{ resolve: () => void; reject: (err: unknown) => void }>;
}

/**
 * A transaction's own handle on the connection's executor, so that what is keyed by a transaction
 * (declared jobs) stays its own. It refuses statements once its transaction has ended, or once SQLite
 * itself rolled the open transaction back (`INSERT OR ROLLBACK`, an I/O error): a statement then would
 * run in autocommit, outside the group, and be kept while the transaction it belongs to is not.
 */
function transactionSql(s: Sql, conn: BetterSqlite3.Database, state: { ended: boolean }): Sql {
  const open = () => {
    if (state.ended) throw new Error('this transaction has ended: its handle takes no more statements');
    if (!conn.inTransaction) throw new Error('SQLite rolled this transaction back (an error ended it); it takes no more statements');
  };
  return {
    dialect: s.dialect,
    all: (t, p) => (open(), s.all(t, p)),
    one: (t, p) => (open(), s.one(t, p)),
    run: (t, p) => (open(), s.run(t, p)),
    write: (t, p) => (open(), s.write(t, p)),
  };
}

/**
 * SQLite: the process keeps knex's single connection and runs statements on it synchronously. A
 * transaction spans awaits, so it holds a gate; statements from other requests wait at the gate
 * until it ends (they would otherwise land inside it). Other processes are kept out by SQLite's
 * own file lock (BEGIN IMMEDIATE, busy_timeout).
 *
 * Group commit: a COMMIT costs more than a whole small command's statements (it writes every page the
 * transaction changed to the WAL). A transaction ends as a SAVEPOINT released inside one open
 * transaction, which stays open until the end of the event loop's turn (or GROUP_MAX members, or
 * GROUP_MAX_MS): the other transactions of that turn (other requests, those waiting at the gate) run
 * in it, and one COMMIT serves them all. Nobody is answered before the COMMIT that holds its change: each transaction's promise resolves
 * only then (and rejects if that COMMIT fails). A transaction that throws is rolled back to its
 * savepoint alone. An autocommit write commits the open group first; an autocommit read runs inside it
 * (it sees finished transactions only: only an I/O error in the group's COMMIT would undo what it
 * read); `relaxed` writes (rate-limit buckets, idempotency locks: lost in a crash without harm) run
 * inside it too. A member that awaits more than statements (a worker thread, a timer) holds the gate,
 * and so the group's COMMIT, as long as it waits: the members that finished before it are answered
 * after it. A transaction must never await another transaction's promise: that one is answered only
 * at a COMMIT its own gate holds back (as a nested `tx` never could finish either).
 */
class SqliteConnection {
  private conn: BetterSqlite3.Database | null = null;
  private executor: SqliteSql | null = null;
  private acquiring: Promise<void> | null = null;
  private gate: Promise<void> | null = null;
  private group: CommitGroup | null = null;
  /** Transactions waiting for the gate (for `stats`). */
  private waiting = 0;
  private control: Record<'begin' | 'savepoint' | 'release' | 'rollbackTo' | 'commit' | 'rollback', BetterSqlite3.Statement> | null = null;
  private readonly pragmas: string[] = [];

  constructor(private readonly pool: PoolClientSource) {}

  private async acquire(): Promise<void> {
    let conn: BetterSqlite3.Database;
    try {
      conn = this.conn = (await this.pool.acquireConnection()) as BetterSqlite3.Database;
    } catch (err) {
      this.acquiring = null; // not kept: the next statement tries again
      throw err;
    }
    for (const p of this.pragmas) conn.pragma(p);
    this.executor = sqliteExecutor(conn);
    this.control = {
      begin: conn.prepare('BEGIN IMMEDIATE'),
      savepoint: conn.prepare('SAVEPOINT member'),
      release: conn.prepare('RELEASE member'),
      rollbackTo: conn.prepare('ROLLBACK TO member'),
      commit: conn.prepare('COMMIT'),
      rollback: conn.prepare('ROLLBACK'),
    };
    this.acquiring = null;
  }

  /** Resolves when the connection is held and no transaction is running; the caller must then run synchronously. */
  private async idle(): Promise<Sql> {
    for (;;) {
      if (!this.executor) await (this.acquiring ??= this.acquire());
      else if (this.gate) await this.gate;
      else return this.executor;
    }
  }

  /** An autocommit statement (`text`, when known: a statement that only reads runs inside an open group, which holds finished transactions only). */
  async withConnection<T>(fn: (sql: Sql) => Promise<T>, text?: string): Promise<T> {
    // Fast path without an await, so the statement cannot slip into a transaction opened meanwhile.
    if (this.executor && !this.gate) {
      if (this.group && (text === undefined || !this.executor.readsOnly(text))) this.commitGroup();
      return fn(this.executor);
    }
    await this.idle();
    return this.withConnection(fn, text);
  }

  /** A statement a crash may lose without harm: runs inside an open commit group rather than committing it. */
  async withRelaxed<T>(fn: (sql: Sql) => Promise<T>): Promise<T> {
    if (this.executor && !this.gate) {
      const group = this.group;
      if (!group) return fn(this.executor);
      try {
        return await fn(this.executor);
      } catch (err) {
        if (!this.conn!.inTransaction) this.failGroup(group, err); // SQLite rolled the whole transaction back
        throw err;
      }
    }
    await this.idle();
    return this.withRelaxed(fn);
  }

  async transaction<T>(fn: (sql: Sql) => Promise<T>): Promise<T> {
    if (!this.executor || this.gate) {
      this.waiting += 1;
      try {
        await this.idle();
      } finally {
        this.waiting -= 1;
      }
      return this.transaction(fn);
    }
    const conn = this.conn!;
    const control = this.control!;
    let open!: () => void;
    this.gate = new Promise((resolve) => (open = resolve));
    let committed: Promise<void>;
    let result: T;
    try {
      // SQLite ended the open transaction on its own (an error in a statement outside any member): its group failed.
      if (this.group && !conn.inTransaction) this.failGroup(this.group, new Error('SQLite rolled the open transaction back; retry'));
      if (!this.group) {
        control.begin.run();
        this.group = { openedAt: performance.now(), members: [] };
      }
      const group = this.group;
      control.savepoint.run();
      const state = { ended: false };
      try {
        result = await fn(transactionSql(this.executor, conn, state));
        // A member that caught SQLite's own rollback of the whole transaction and went on: the group is gone.
        if (!conn.inTransaction) throw new Error('SQLite rolled this transaction back (an error ended it)');
        control.release.run();
      } catch (err) {
        if (conn.inTransaction) {
          control.rollbackTo.run();
          control.release.run();
          this.endOrLeave(group);
        } else {
          this.failGroup(group, err);
        }
        throw err;
      } finally {
        state.ended = true;
      }
      committed = new Promise<void>((resolve, reject) => group.members.push({ resolve, reject }));
      this.endOrLeave(group);
    } finally {
      this.gate = null;
      open();
    }
    await committed;
    return result;
  }

  /**
   * Commits the group at once when it is full (GROUP_MAX members or GROUP_MAX_MS old); otherwise leaves
   * it open until the end of this turn of the event loop: the transactions that wait at the gate, and
   * those of the other requests this turn reads from their sockets, join it and share its COMMIT.
   */
  private endOrLeave(group: CommitGroup): void {
    if (this.group !== group) return;
    if (group.members.length >= GROUP_MAX || performance.now() - group.openedAt >= GROUP_MAX_MS) {
      this.commitGroup();
      return;
    }
    // A transaction running then (awaiting between its statements) ends the group itself.
    setImmediate(() => {
      if (this.group === group && !this.gate) this.commitGroup();
    });
  }

  private commitGroup(): void {
    const group = this.group!;
    this.group = null;
    try {
      this.control!.commit.run();
    } catch (err) {
      if (this.conn!.inTransaction) {
        try {
          this.control!.rollback.run();
        } catch {
          // the connection is gone; nothing more to undo
        }
      }
      for (const m of group.members) m.reject(err);
      return;
    }
    for (const m of group.members) m.resolve();
  }

  /** SQLite rolled the open transaction back on its own (an I/O error, a full disk): every member of the group fails. */
  private failGroup(group: CommitGroup, err: unknown): void {
    if (this.group === group) this.group = null;
    for (const m of group.members) m.reject(err);
  }

  stats(): { total: number; idle: number; waiting: number } {
    return { total: this.conn ? 1 : 0, idle: this.conn && !this.gate ? 1 : 0, waiting: this.waiting };
  }

  /** Sets a pragma on the connection now and on any later one. */
  pragma(text: string): void {
    this.pragmas.push(text);
    this.conn?.pragma(text);
  }

  /** Hands the connection back to knex (for migrations and shutdown). */
  async release(): Promise<void> {
    while (this.gate) await this.gate;
    if (this.acquiring) await this.acquiring;
    if (this.group) this.commitGroup();
    if (this.conn) this.pool.releaseConnection(this.conn);
    this.conn = null;
    this.executor = null;
    this.control = null;
  }
}

/**
 * PostgreSQL: at run time statements go through node-postgres pools directly (lighter per statement
 * than knex's pool, which serves migrations): one for ordinary work and a small one with
 * synchronous_commit=off for `relaxed`.
 */
class PgConnections {
  private mainPool: pg.Pool | null = null;
  private relaxedPool: pg.Pool | null = null;

  constructor(
    _knexPool: PoolClientSource,
    private readonly target: { connectionString?: string; schema?: string },
    private readonly poolMax?: number,
  ) {}

  private size(): number {
    return this.poolMax ?? Number(process.env.DATABASE_POOL_MAX ?? 10);
  }

  private searchPath(): string {
    return this.target.schema ? ` -c search_path=${this.target.schema}` : '';
  }

  async withConnection<T>(fn: (sql: Sql) => Promise<T>): Promise<T> {
    // idleTimeoutMillis 0: no idle timer armed and cleared around every statement.
    this.mainPool ??= guarded(new pg.Pool({ connectionString: this.target.connectionString, max: this.size(), idleTimeoutMillis: 0, ...(this.target.schema ? { options: this.searchPath().trim() } : {}) }));
    return using(await this.mainPool.connect(), fn);
  }

  transaction<T>(fn: (sql: Sql) => Promise<T>): Promise<T> {
    return this.withConnection((s) => inTransaction(s, 'BEGIN', fn));
  }

  async relaxed<T>(fn: (sql: Sql) => Promise<T>): Promise<T> {
    this.relaxedPool ??= guarded(
      new pg.Pool({
        connectionString: this.target.connectionString,
        max: Math.max(2, Math.ceil(this.size() / 2)),
        idleTimeoutMillis: 0,
        options: `-c synchronous_commit=off${this.searchPath()}`,
      }),
    );
    return using(await this.relaxedPool.connect(), fn);
  }

  stats(): { total: number; idle: number; waiting: number } {
    const pools = [this.mainPool, this.relaxedPool].filter((p): p is pg.Pool => p !== null);
    return {
      total: pools.reduce((n, p) => n + p.totalCount, 0),
      idle: pools.reduce((n, p) => n + p.idleCount, 0),
      waiting: pools.reduce((n, p) => n + p.waitingCount, 0),
    };
  }

  async release(): Promise<void> {
    const pools = [this.mainPool, this.relaxedPool];
    this.mainPool = null;
    this.relaxedPool = null;
    await Promise.all(pools.map((p) => p?.end()));
  }
}
