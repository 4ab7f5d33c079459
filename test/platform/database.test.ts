import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { openDatabase } from '../../db/database.ts';
import { listMigrations } from '../../db/migrations/source.ts';
import { acme, createCompany, createDeal, createPipeline } from '../support/fixtures.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';

const postgres = databases.find((d) => d.name === 'postgres');

describe('database connections [postgres]', function () {
  this.timeout(30_000);
  before(function () {
    if (!postgres) this.skip();
  });

  it('survives PostgreSQL ending its connections: no crash, the next requests are served on new connections', async () => {
    // Its connections carry their own application_name: the test ends those alone, never those of test files running beside it.
    const url = new URL(postgres!.url());
    const tag = `wso-ended-${process.pid}-${Date.now()}`;
    url.searchParams.set('application_name', tag);
    const svc = await startTestService(url.toString());
    try {
      const ws = await svc.apply(acme());
      const api = svc.client(ws.keys.ci!.secret);
      assert.equal((await api.customers.CreateSalesPipeline(createPipeline('Before'))).response.status, 200);
      // What a server restart or a failover does to every open connection of the service.
      const admin = new pg.Client({ connectionString: process.env.TEST_POSTGRES_URL });
      await admin.connect();
      try {
        const ended = await admin.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND usename = current_user AND state = 'idle' AND application_name = $1`,
          [tag],
        );
        assert.ok(ended.rowCount! > 0);
      } finally {
        await admin.end();
      }
      await new Promise((resolve) => setTimeout(resolve, 200)); // the sockets' close events reach the pools
      let status = 0;
      for (let i = 0; i < 5 && status !== 200; i++) status = (await api.customers.CreateSalesPipeline(createPipeline('After'))).response.status;
      assert.equal(status, 200);
      assert.equal((await api.customers.ListSalesPipelines({})).data!.items.length, 2);
    } finally {
      await svc.close();
    }
  });
});

/**
 * The previous release's databases (test/fixtures/previous-release/: made by that release's own
 * scripts, see make.ts there) upgraded by this one: every migration it ran stays recorded once under
 * its name, whichever folder holds it now; no table loses a row; the release's read answers are still
 * given (fields may be added, none lost or changed); and writes that lean on its constraints still work.
 */
/** The token of a sign-in link stored by the previous release (a made-up 43-character base64url string). */
const MAILED_TOKEN = 'Mailed-before-the-upgrade_0123456789abcdefg';
const RELEASE = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/previous-release');
interface ReleaseData {
  release: string;
  schema: string;
  sqlite: ReleaseRun;
  postgres: ReleaseRun;
}
interface ReleaseRun {
  madeAt: number;
  workspace: { members: Record<string, string>; keys: Record<string, { secret: string }> };
  pipeline: string;
  deal: string;
  reads: Array<{ operation: string; body: unknown; actAs?: string; response: unknown }>;
}

/** Fails unless `actual` holds everything of `expected`: the same values, the same array lengths, maybe more object keys. */
function assertHolds(actual: unknown, expected: unknown, at: string): void {
  if (expected === null || typeof expected !== 'object') return assert.deepEqual(actual, expected, at);
  assert.equal(typeof actual, 'object', at);
  assert.notEqual(actual, null, at);
  if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual), `${at}: not an array`);
    assert.equal(actual.length, expected.length, `${at}: length`);
    expected.forEach((e, i) => assertHolds(actual[i], e, `${at}[${i}]`));
    return;
  }
  for (const [key, value] of Object.entries(expected)) assertHolds((actual as Record<string, unknown>)[key], value, `${at}.${key}`);
}

/** Restores the release's dump into the (empty) database of `url`; returns each table's row count. */
async function restoreRelease(url: string, data: ReleaseData): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  if (url.startsWith('sqlite:')) {
    const file = new BetterSqlite3(url.slice('sqlite:'.length));
    try {
      file.exec(fs.readFileSync(path.join(RELEASE, 'sqlite.sql'), 'utf8'));
      for (const { name } of file.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`).all() as Array<{ name: string }>) {
        counts.set(name, (file.prepare(`SELECT COUNT(*) AS n FROM "${name}"`).get() as { n: number }).n);
      }
    } finally {
      file.close();
    }
    return counts;
  }
  const schema = new URL(url).searchParams.get('schema')!;
  const admin = new pg.Client({ connectionString: process.env.TEST_POSTGRES_URL });
  await admin.connect();
  try {
    await admin.query(fs.readFileSync(path.join(RELEASE, 'postgres.sql'), 'utf8').replaceAll(data.schema, schema));
    const tables = await admin.query<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE'`, [schema]);
    for (const { table_name } of tables.rows) counts.set(table_name, Number((await admin.query(`SELECT COUNT(*) AS n FROM ${schema}."${table_name}"`)).rows[0].n));
  } finally {
    await admin.end();
  }
  return counts;
}

for (const database of databases) {
  describe(`upgrading a database of the previous release [${database.name}]`, function () {
    this.timeout(30_000);
    const data = JSON.parse(fs.readFileSync(path.join(RELEASE, 'release.json'), 'utf8')) as ReleaseData;
    const run = data[database.name];
    let svc: TestService;
    let rowsBefore: Map<string, number>;
    before(async () => {
      const url = database.url();
      rowsBefore = await restoreRelease(url, data);
      // A sign-in link mailed before the upgrade (its token known only to its member's inbox).
      const raw = openDatabase(url);
      try {
        const member = (await raw.sql.one<{ id: string; workspace_id: string }>('SELECT id, workspace_id FROM members ORDER BY id'))!;
        await raw.sql.run('INSERT INTO signin_links (token_hash, workspace_id, member_id, next, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)', [
          crypto.createHash('sha256').update(MAILED_TOKEN).digest('hex'), member.workspace_id, member.id, '/dashboard', run.madeAt, run.madeAt + 15 * 60_000,
        ]);
      } finally {
        await raw.close();
      }
      svc = await startTestService(url); // migrates, as every process does at start
      svc.clock.set(run.madeAt + 60_000);
    });
    after(async () => {
      await svc?.close();
    });

    it(`keeps ${data.release}'s migrations recorded once each, under their names, and runs only the new ones`, async () => {
      const names = (await svc.db.sql.all<{ name: string }>('SELECT name FROM knex_migrations ORDER BY id')).map((r) => r.name);
      assert.equal(new Set(names).size, names.length, `a migration ran twice: ${names.join(', ')}`);
      assert.equal(rowsBefore.get('knex_migrations'), 9);
      assert.deepEqual(names.slice(0, 9), [
        '20261122000000_foundation.ts',
        '20261122010000_analytics.ts',
        '20261122020000_collection.ts',
        '20261122040000_signin.ts',
        '20261201000000_service_secrets.ts',
        '20261201010000_companies_and_deals.ts',
        '20261201030000_outbox.ts',
        '20261202000000_automation.ts',
        '20261203000000_webhooks.ts',
      ]);
    });

    it('loses no row of any table that is still there', async () => {
      const lost: string[] = [];
      for (const [table, n] of rowsBefore) {
        const exists = svc.db.dialect === 'pg'
          ? await svc.db.sql.one(`SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?`, [table])
          : await svc.db.sql.one(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`, [table]);
        if (!exists) continue;
        const after = Number((await svc.db.sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM ${table}`))!.n);
        if (after < n) lost.push(`${table}: ${n} before, ${after} after`);
      }
      assert.deepEqual(lost, []);
      assert.ok((rowsBefore.get('deals') ?? 0) >= 2 && (rowsBefore.get('analytics_events') ?? 0) >= 3 && (rowsBefore.get('automation_runs') ?? 0) >= 1);
    });

    it("answers the release's reads as the release did (with its keys, records, rules, runs and analytics)", async () => {
      const secret = run.workspace.keys.all!.secret;
      for (const read of run.reads) {
        const res = await svc.post(read.operation, read.body, { Authorization: `Bearer ${secret}`, ...(read.actAs ? { 'Service-Act-As': read.actAs } : {}) });
        assert.equal(res.status, 200, `${read.operation}: ${JSON.stringify(res.body)}`);
        assertHolds(res.body, read.response, read.operation);
      }
    });

    it('keeps a sign-in link mailed before the upgrade working once, from the one store of one-time links', async () => {
      const first = await fetch(`${svc.origin}/signin/${MAILED_TOKEN}`, { redirect: 'manual' });
      assert.equal(first.status, 303);
      assert.equal(first.headers.get('location'), '/dashboard');
      assert.equal((await fetch(`${svc.origin}/signin/${MAILED_TOKEN}`, { redirect: 'manual' })).status, 410);
    });

    it("writes on the release's records, its constraints still holding", async () => {
      const api = svc.client(run.workspace.keys.all!.secret);
      const moved = await api.customers.CreateDeal(createDeal(run.pipeline, 'lead'));
      assert.equal(moved.response.status, 200, JSON.stringify(moved.error));
      const unknownStage = await api.customers.CreateDeal(createDeal(run.pipeline, 'nowhere'));
      assert.equal(unknownStage.response.status, 400);
      const inUse = await api.customers.DeleteSalesPipeline({ id: run.pipeline });
      assert.equal(inUse.response.status, 409);
      const reopened = await api.customers.UpdateDeal({ id: run.deal, data: { stage_id: 'lead' }, expected: { stage_id: 'won' } });
      assert.equal(reopened.response.status, 200, JSON.stringify(reopened.error));
      const taken = await api.customers.CreateCompany(createCompany('Globex again', 'globex.com'));
      assert.equal(taken.response.status, 409);
    });
  });
}

describe('migration source', () => {
  const folder = (files: string[]) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-migrations-'));
    for (const f of files) fs.writeFileSync(path.join(dir, f), 'export async function up() {}\nexport async function down() {}\n');
    return dir;
  };

  it("orders the platform's and every module's migrations by name, whichever folder holds them, and ignores other files", () => {
    const a = folder(['20260101000000_first.ts', '20260301000000_third.ts', 'README.md']);
    const b = folder(['20260201000000_second.ts', 'helpers.ts']);
    assert.deepEqual(listMigrations([a, pathToFileURL(b + '/')]).map((m) => [m.name, path.dirname(m.file)]), [
      ['20260101000000_first.ts', a],
      ['20260201000000_second.ts', b],
      ['20260301000000_third.ts', a],
    ]);
  });

  it('refuses one name in two folders, and a folder that does not exist', () => {
    const a = folder(['20260101000000_first.ts']);
    const b = folder(['20260101000000_first.ts']);
    assert.throws(() => listMigrations([a, b]), /20260101000000_first\.ts is in two folders/);
    assert.throws(() => listMigrations([path.join(a, 'nowhere')]), /does not exist/);
  });

  it('fails, naming the migration, when a module folder this database ran is not given', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-test-'));
    const module = folder(['20990101000000_module_table.ts']);
    const db = openDatabase(`sqlite:${path.join(dir, 'service.sqlite')}`);
    try {
      await db.migrate([module]);
      await assert.rejects(db.migrate([]), /this database ran 20990101000000_module_table\.ts, found in none of the migration folders given/);
    } finally {
      await db.close();
    }
  });
});

describe('SQLite group commit', () => {
  let dir: string;
  let db: ReturnType<typeof openDatabase>;
  let reader: BetterSqlite3.Database;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-test-'));
    db = openDatabase(`sqlite:${path.join(dir, 'g.sqlite')}`);
    await db.sql.run('CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)');
    reader = new BetterSqlite3(path.join(dir, 'g.sqlite'), { readonly: true }); // another process's view: committed rows only
  });
  afterEach(async () => {
    reader.close();
    await db.close();
  });
  const committed = () => (reader.prepare('SELECT name FROM items ORDER BY id').all() as Array<{ name: string }>).map((r) => r.name);

  it('commits transactions that waited for each other together, answers none before its commit, and rolls back a failing one alone', async () => {
    const seen: string[][] = [];
    const insert = (name: string, fail = false) =>
      db.tx(async (sql) => {
        await sql.run('INSERT INTO items (name) VALUES (?)', [name]);
        await new Promise((resolve) => setImmediate(resolve)); // a handler's await: the others queue at the gate meanwhile
        if (fail) throw new Error(`no ${name}`);
        return name;
      }).then((value) => {
        seen.push(committed()); // when a transaction's promise resolves, another connection sees its row
        return value;
      });
    const results = await Promise.allSettled([insert('a'), insert('b'), insert('c', true), insert('d'), insert('a')]);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'rejected']);
    assert.match(String((results[2] as PromiseRejectedResult).reason), /no c/);
    assert.match(String((results[4] as PromiseRejectedResult).reason), /UNIQUE/); // sees 'a' of its own group
    assert.deepEqual(committed(), ['a', 'b', 'd']);
    // One commit for the group: the first to be answered already sees the last one's row (one at a time, it would see only its own).
    for (const s of seen) assert.deepEqual(s, ['a', 'b', 'd']);
  });

  it('fails the whole group and keeps nothing of it when SQLite itself rolls the transaction back, then goes on', async () => {
    const a = db.tx((sql) => sql.run('INSERT INTO items (name) VALUES (?)', ['a']));
    const b = db.tx(async (sql) => {
      // OR ROLLBACK ends the whole open transaction, a's finished change with it; b swallows the error and goes on.
      await sql.run('INSERT OR ROLLBACK INTO items (name) VALUES (?)', ['a']).catch(() => undefined);
      await sql.run('INSERT INTO items (name) VALUES (?)', ['b']); // refused: it would run outside any transaction
    });
    const results = await Promise.allSettled([a, b]);
    assert.deepEqual(results.map((r) => r.status), ['rejected', 'rejected']);
    assert.match(String((results[1] as PromiseRejectedResult).reason), /rolled this transaction back/);
    assert.deepEqual(committed(), []);
    await db.tx((sql) => sql.run('INSERT INTO items (name) VALUES (?)', ['c']));
    assert.deepEqual(committed(), ['c']);
  });

  it('lets an autocommit read in an open group, commits the group before an autocommit write, and commits a lone transaction at once', async () => {
    const first = db.tx((sql) => sql.run('INSERT INTO items (name) VALUES (?)', ['x']));
    const second = db.tx((sql) => sql.run('INSERT INTO items (name) VALUES (?)', ['y']));
    const read = db.sql.all<{ name: string }>('SELECT name FROM items ORDER BY id');
    const write = db.sql.run('INSERT INTO items (name) VALUES (?)', ['w']);
    assert.deepEqual((await read).map((r) => r.name), ['x', 'y']);
    assert.equal(await write, 1);
    await Promise.all([first, second]);
    assert.deepEqual(committed(), ['x', 'y', 'w']);
    await db.tx((sql) => sql.run('INSERT INTO items (name) VALUES (?)', ['z']));
    assert.deepEqual(committed(), ['x', 'y', 'w', 'z']);
  });
});
