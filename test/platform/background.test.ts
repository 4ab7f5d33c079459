import assert from 'node:assert/strict';
import type { Sql } from '../../db/database.ts';
import { jobsOfKind } from '../../db/queries/jobs.ts';
import pino from 'pino';
import { ATTEMPT_BACKOFF } from '../../handlers/webhooks/worker.ts';
import { MAIL_RETRY } from '../../handlers/signing/request/invitationMail.ts';
import { claim, type ClaimQuery, failLeased, finishLeased, JOB_BACKOFF, type Lease, nextAttempt, renewLease, WorkPool } from '../../server/background.ts';
import { PollLoop } from '../../server/workers.ts';
import { killFixtureWhen, until } from '../support/process.ts';
import { forEachDatabase } from '../support/service.ts';

interface Deferred {
  promise: Promise<void>;
  resolve(): void;
}
function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('background kit: retry schedules', () => {
  it('exponential: base after the first failure, doubling, capped', () => {
    const s = { kind: 'exponential', baseMs: 1000, capMs: 3_600_000 } as const;
    assert.deepEqual([1, 2, 3, 13, 40].map((f) => nextAttempt(s, f, { now: 0 })), [1000, 2000, 4000, 3_600_000, 3_600_000]);
  });
  it('offsets: counted from the first attempt, jitter within a fraction of the gap, none after the last', () => {
    const s = { kind: 'offsets', offsetsMs: [0, 30_000, 150_000], jitter: 0.1 } as const;
    assert.equal(nextAttempt(s, 1, { now: 99_999, firstAt: 1000 }, () => 0), 31_000);
    assert.equal(nextAttempt(s, 2, { now: 99_999, firstAt: 1000 }, () => 0.999), 151_000 + Math.floor(0.999 * 120_000 * 0.1));
    assert.equal(nextAttempt(s, 3, { now: 0, firstAt: 0 }), null);
  });
  it('offsets with minGap: an attempt that ran late is retried no sooner than that fraction of the gap from now', () => {
    const s = { kind: 'offsets', offsetsMs: [0, 30_000, 150_000, 630_000], jitter: 0.1, minGap: 0.5 } as const;
    assert.equal(nextAttempt(s, 1, { now: 1000, firstAt: 1000 }, () => 0), 31_000, 'on time: the offset');
    assert.equal(nextAttempt(s, 2, { now: 500_000, firstAt: 1000 }, () => 0.999), 500_000 + 60_000, 'late: half of the 120 s gap from now');
    assert.equal(nextAttempt(s, 3, { now: 300_000, firstAt: 1000 }, () => 0), 631_000, 'the offset, when it is further than the floor (240 s from now)');
  });
  it("the service's schedules keep their documented figures", () => {
    const never = () => 0;
    const always = () => 0.999_999;
    // Webhooks (seed: nominal retries 30 s, 2 min 30 s, 10 min 30 s, 30 min, 2 h, 8 h, 24 h after the first; README: up to 10 % jitter).
    const nominal = [30_000, 150_000, 630_000, 1_800_000, 7_200_000, 28_800_000, 86_400_000];
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map((f) => nextAttempt(ATTEMPT_BACKOFF, f, { now: 0, firstAt: 0 }, never)), nominal);
    const gaps = nominal.map((o, i) => o - (nominal[i - 1] ?? 0));
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map((f) => nextAttempt(ATTEMPT_BACKOFF, f, { now: 0, firstAt: 0 }, always)), nominal.map((o, i) => o + Math.floor(0.999_999 * gaps[i]! * 0.1)));
    assert.equal(nextAttempt(ATTEMPT_BACKOFF, 8, { now: 0, firstAt: 0 }), null, '8 attempts');
    // Jobs: 1 s doubling, at most 1 h. Signing mails: 1, 6, 21, 81 and 321 minutes after the first attempt, then none.
    assert.deepEqual([1, 2, 3, 12, 13, 30].map((f) => nextAttempt(JOB_BACKOFF, f, { now: 0 })), [1000, 2000, 4000, 2_048_000, 3_600_000, 3_600_000]);
    assert.deepEqual([1, 2, 3, 4, 5, 6].map((f) => nextAttempt(MAIL_RETRY, f, { now: 0, firstAt: 0 }, always)), [60_000, 360_000, 1_260_000, 4_860_000, 19_260_000, null]);
  });
});

describe('background kit: a pool of lanes', () => {
  it('a slow item holds one lane; the items claimed beside and after it go through the others (automation runs, jobs)', async () => {
    const queue = ['slow', 'q1', 'q2', 'q3', 'q4', 'q5'];
    const release = deferred();
    const done: string[] = [];
    let claims = 0;
    const pool = new WorkPool<string>(
      {
        claim: async (n) => {
          claims++;
          return queue.splice(0, n);
        },
        perform: async (item) => {
          if (item === 'slow') await release.promise;
          done.push(item);
        },
        onError: (err) => {
          throw err;
        },
      },
      { concurrency: 2, intervalMs: 60_000 },
    );
    const loop = new PollLoop('test.pool', pool, pino({ level: 'silent' }));
    loop.start();
    try {
      await until(() => done.length === 5);
      assert.deepEqual(done, ['q1', 'q2', 'q3', 'q4', 'q5']);
      assert.equal(pool.running, 1);
      assert.ok(claims >= 5, 'each freed lane claimed again at once (no wait for the minute-long poll interval)');
    } finally {
      release.resolve();
      await loop.stop();
    }
    assert.deepEqual(done.at(-1), 'slow');
    assert.equal(pool.running, 0);
  });
});

forEachDatabase('background kit', (svc) => {
  const items: ClaimQuery = { table: 'kit_items', due: { text: "status = 'waiting'" }, held: { text: "status = 'working'" }, set: { text: "status = 'working'" }, order: 'id', limit: 10 };
  const lease = (owner: string, ms = 1000): Lease => ({ owner, now: svc().clock.now(), ms });

  before(async () => {
    await svc().db.sql.run(
      `CREATE TABLE kit_items (id varchar(20) PRIMARY KEY, status varchar(20) NOT NULL, leased_by varchar(100), lease_until bigint, due_at bigint, note text)`,
    );
  });
  beforeEach(async () => {
    await svc().db.sql.run('DELETE FROM kit_items');
    for (let i = 0; i < 6; i++) await svc().db.sql.run(`INSERT INTO kit_items (id, status) VALUES (?, 'waiting')`, [`i${i}`]);
  });

  it('claims in one statement: concurrent claimers never take the same row, and a held row is left alone until its lease ends', async () => {
    const [a, b] = await Promise.all([claim<{ id: string }>(svc().db.sql, { ...items, limit: 4 }, lease('a')), claim<{ id: string }>(svc().db.sql, { ...items, limit: 4 }, lease('b'))]);
    const ids = [...a, ...b].map((r) => r.id);
    assert.equal(ids.length, 6);
    assert.equal(new Set(ids).size, 6, 'no row twice');
    assert.deepEqual(await claim(svc().db.sql, items, lease('c')), [], 'all held');
    svc().clock.advance(1001);
    const taken = await claim<{ id: string; leased_by: string }>(svc().db.sql, items, lease('c'));
    assert.equal(taken.length, 6, 'every lease ended: taken over');
    assert.ok(taken.every((r) => r.leased_by === 'c'));
  });

  it('finishes, renews and fails only for the holder', async () => {
    const [row] = await claim<{ id: string }>(svc().db.sql, { ...items, limit: 1 }, lease('a'));
    assert.equal(row!.id, 'i0');
    const t = { table: 'kit_items' };
    assert.equal(await renewLease(svc().db.sql, t, 'i0', lease('b', 5000)), false);
    assert.equal(await renewLease(svc().db.sql, t, 'i0', lease('a', 5000)), true);
    svc().clock.advance(2000);
    assert.deepEqual(await claim(svc().db.sql, { ...items, due: { text: '1 = 0' } }, lease('b')), [], 'the renewed lease still holds');
    assert.equal(await finishLeased(svc().db.sql, t, 'i0', 'b', { text: "status = 'done'" }), false);
    assert.equal(await failLeased(svc().db.sql, t, 'i0', 'a', { column: 'due_at', at: 42 }, { text: "status = 'waiting', note = ?", params: ['boom'] }), true);
    const stored = await svc().db.sql.one<{ status: string; leased_by: string | null; lease_until: number | null; due_at: number; note: string }>(`SELECT * FROM kit_items WHERE id = 'i0'`);
    assert.deepEqual([stored!.status, stored!.leased_by, stored!.lease_until, Number(stored!.due_at), stored!.note], ['waiting', null, null, 42, 'boom']);
  });
});

forEachDatabase('background jobs: enqueue joins the caller transaction', (svc) => {
  let ran: unknown[] = [];
  before(() => {
    svc().jobs.define('test.record', { run: async (payload) => void ran.push(payload) });
  });
  beforeEach(() => {
    ran = [];
  });

  it('a job enqueued by a transaction that rolls back never exists, so never runs', async () => {
    await assert.rejects(
      svc().db.tx(async (sql) => {
        assert.equal(await svc().jobs.enqueue(sql, 'test.record', { n: 1 }), true);
        throw new Error('the command fails after enqueueing');
      }),
      /the command fails/,
    );
    assert.equal(await svc().jobs.runDue(), 0);
    assert.deepEqual(ran, []);
    assert.deepEqual(await jobsOfKind(svc().db.sql, 'test.record'), []);
  });

  it('a key keeps one job while it waits; once it ran, the key is free again', async () => {
    await svc().db.tx(async (sql) => {
      assert.equal(await svc().jobs.enqueue(sql, 'test.record', { n: 1 }, { key: 'k1' }), true);
      assert.equal(await svc().jobs.enqueue(sql, 'test.record', { n: 2 }, { key: 'k1' }), false);
    });
    assert.equal(await svc().jobs.enqueue(svc().db.sql, 'test.record', { n: 3 }, { key: 'k1' }), false);
    assert.equal(await svc().jobs.runDue(), 1);
    assert.deepEqual(ran, [{ n: 1 }]);
    assert.equal(await svc().jobs.enqueue(svc().db.sql, 'test.record', { n: 4 }, { key: 'k1' }), true);
    assert.equal(await svc().jobs.runDue(), 1);
    assert.deepEqual(ran, [{ n: 1 }, { n: 4 }]);
  });

  it('a job of a later runAt waits for its time (service clock)', async () => {
    await svc().jobs.enqueue(svc().db.sql, 'test.record', { n: 5 }, { runAt: svc().clock.now() + 60_000 });
    assert.equal(await svc().jobs.runDue(), 0);
    svc().clock.advance(60_000);
    assert.equal(await svc().jobs.runDue(), 1);
    assert.deepEqual(ran, [{ n: 5 }]);
  });

  it('refuses a kind no module defines', async () => {
    await assert.rejects(svc().jobs.enqueue(svc().db.sql, 'test.nobody', null), /no job definition for test\.nobody/);
  });

  it('a job committed by a process killed (SIGKILL) right after the commit runs exactly once after the restart', async function () {
    this.timeout(30_000);
    const key = `killed-${Math.random().toString(36).slice(2)}`;
    let once = 0;
    svc().jobs.define('test.once', { run: async (payload) => void (once += (payload as { key: string }).key === key ? 1 : 0) });
    await killFixtureWhen('test/platform/fixtures/enqueueThenDie.ts', [svc().databaseUrl, key, String(svc().clock.now())], 'committed', 25_000);
    // The restarted process (this one) finds the job and runs it once; later polls find nothing.
    assert.equal((await jobsOfKind(svc().db.sql, 'test.once')).length, 1);
    assert.equal(await svc().jobs.runDue(), 1);
    assert.equal(await svc().jobs.runDue(), 0);
    assert.equal(once, 1);
  });
});

forEachDatabase('background jobs never wait for their slowest item', (svc) => {
  let releaseSlow = deferred();
  afterEach(() => {
    releaseSlow.resolve();
    return svc().jobs.stop();
  });

  it('a slow job holds one lane: quick jobs due beside it, and ones enqueued while it runs, finish first', async () => {
    const slowStarted = deferred();
    releaseSlow = deferred();
    const quick: number[] = [];
    let allQuick = deferred();
    svc().jobs.define('test.slow', {
      run: async () => {
        slowStarted.resolve();
        await releaseSlow.promise;
      },
    });
    svc().jobs.define('test.quick', {
      run: async (n) => {
        quick.push(n as number);
        if (quick.length === 5 || quick.length === 8) allQuick.resolve();
      },
    });
    await svc().db.tx(async (sql) => {
      await svc().jobs.enqueue(sql, 'test.slow', null);
      for (let n = 0; n < 5; n++) await svc().jobs.enqueue(sql, 'test.quick', n);
    });
    svc().jobs.start(60_000);
    await slowStarted.promise;
    await allQuick.promise;
    assert.deepEqual([...quick].sort(), [0, 1, 2, 3, 4]);
    await until(() => svc().jobs.running === 1); // only the slow job still runs
    // Enqueued while the slow one runs: the commit wakes the runner (its poll interval is a minute).
    allQuick = deferred();
    let tx!: Sql;
    await svc().db.tx(async (sql) => {
      tx = sql;
      for (let n = 5; n < 8; n++) await svc().jobs.enqueue(sql, 'test.quick', n);
    });
    svc().jobs.committed(tx);
    await allQuick.promise;
    assert.equal(quick.length, 8);
    releaseSlow.resolve();
    await svc().jobs.stop();
    assert.equal((await jobsOfKind(svc().db.sql, 'test.slow')).length + (await jobsOfKind(svc().db.sql, 'test.quick')).length, 0, 'all done and gone');
  });

  it('a long job renews its lease while it runs, so no other process takes it over', async () => {
    const release = deferred();
    const started = deferred();
    let runs = 0;
    // Leases are in service-clock ms; renewals come every third of the lease in real time (here 20 ms).
    svc().jobs.define('test.long', {
      leaseMs: 60,
      run: async () => {
        runs++;
        started.resolve();
        await release.promise;
      },
    });
    await svc().jobs.enqueue(svc().db.sql, 'test.long', null);
    const running = svc().jobs.runDue();
    await started.promise;
    const [job] = await jobsOfKind(svc().db.sql, 'test.long');
    svc().clock.advance(50);
    await until(async () => Number((await jobsOfKind(svc().db.sql, 'test.long'))[0]!.locked_until) === svc().clock.now() + 60);
    svc().clock.advance(50);
    assert.ok(Number(job!.locked_until) < svc().clock.now(), 'the first lease has ended by now');
    await until(async () => Number((await jobsOfKind(svc().db.sql, 'test.long'))[0]!.locked_until) === svc().clock.now() + 60);
    // Another process polling now finds nothing to take over.
    const claimedByOther = await claim(svc().db.sql, { table: 'jobs', owner: 'locked_by', until: 'locked_until', due: { text: 'run_at <= ?', params: [svc().clock.now()] }, order: 'id', limit: 5 }, { owner: 'other-process', now: svc().clock.now(), ms: 1000 });
    assert.deepEqual(claimedByOther, []);
    release.resolve();
    assert.equal(await running, 1);
    assert.equal(runs, 1);
  });
});
