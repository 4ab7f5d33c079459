import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { parseDatabaseUrl } from '../../db/database.ts';
import { forEachDatabase } from '../support/service.ts';

forEachDatabase('background jobs', (svc) => {
  it('wait quietly while another process holds the SQLite write lock (a bulk import), then run', async function () {
    if (svc().db.dialect !== 'sqlite') this.skip();
    let ran = 0;
    svc().jobs.define('test.count', { run: async () => void ran++ });
    await svc().jobs.enqueue(svc().db.sql, 'test.count', null);
    await svc().db.sql.run('PRAGMA busy_timeout = 50');
    // Another process (as `npm run demo`'s bulk load) holds the write lock longer than busy_timeout.
    const other = new Database(parseDatabaseUrl(svc().databaseUrl).filename!);
    other.exec('BEGIN IMMEDIATE');
    const logged = svc().logs().length;
    try {
      assert.equal(await svc().jobs.poll(), 0);
      assert.equal(await svc().jobs.poll(), 0);
    } finally {
      other.exec('ROLLBACK');
      other.close();
      await svc().db.sql.run('PRAGMA busy_timeout = 5000');
    }
    const lines = svc().logs().slice(logged).trim().split('\n').map((l) => JSON.parse(l) as { level: number; msg: string; code?: string; err?: unknown });
    assert.deepEqual(lines.map((l) => [l.level, l.code]), [[30, 'SQLITE_BUSY']], 'one quiet info line for the busy spell, no error, no stack');
    assert.match(lines[0]!.msg, /database is busy/);
    assert.equal(lines[0]!.err, undefined);
    assert.equal(await svc().jobs.poll(), 1);
    assert.equal(ran, 1);
  });
});
