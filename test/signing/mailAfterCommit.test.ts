/**
 * Mail is a declared effect, run after the command commits (issue 22 §2): while a mail server hangs on
 * an invitation, the command's transaction is closed, so other requests (reads, a command) are answered
 * at once, on SQLite's one connection too; the command still answers with the invitation's outcome
 * (seed 4.7, `invitation_failures`), and a replay of its Idempotency-Key returns that answer and sends
 * nothing. The kernel parts: a declared job is claimed in the transaction (no worker runs it twice, and
 * one runs it if this process dies after the commit); a held receipt is replayed once its lock is stale.
 */
import assert from 'node:assert/strict';
import pino from 'pino';
import { INVITE_JOB } from '../../handlers/signing/request/invitationMail.ts';
import type { ApplyResult } from '../../server/admin.ts';
import { Idempotency } from '../../server/idempotency.ts';
import { JobRunner } from '../../server/jobs.ts';
import { databases, type TestService } from '../support/service.ts';
import { type MailServer, putFile, signingService, signingWorkspace, startMailServer } from './requestSupport.ts';

const HOUR = 3_600_000;

for (const database of databases) {
  describe(`mail after commit [${database.name}]`, function () {
    this.timeout(60_000);
    let smtp: MailServer;
    let svc: TestService;
    let ws: ApplyResult;
    let api: ReturnType<TestService['client']>;

    before(async () => {
      smtp = await startMailServer();
      svc = await signingService(database.url(), smtp);
      ws = await signingWorkspace(svc);
      api = svc.client(ws.keys.sender!.secret);
    });
    after(async () => {
      smtp?.release();
      await svc?.close();
      await smtp?.close();
    });

    const files = new Map<string, string>();
    /** Asks `email` to sign (the same file for the same address, so a retry sends the same body). */
    async function request(email: string, idempotencyKey?: string) {
      const fileId = files.get(email) ?? (await putFile(svc, ws.workspace_id)).file.id;
      files.set(email, fileId);
      return api.signing.RequestFileSignatures({ file_id: fileId, signers: [{ email, name: 'Stella Stall' }] }, idempotencyKey ? { idempotencyKey } : {});
    }

    it('while the mail server hangs on an invitation, reads and another command are answered first; then the request answers with the mail sent', async () => {
      const other = await request('quick-stall@example.test');
      assert.equal(other.response.status, 200);
      const otherId = other.data!.signing_request_id;

      let answered = false;
      const stalled = request('stall-1@example.test').then((res) => {
        answered = true;
        return res;
      });
      await smtp.stalled();
      // The request committed before its mail went out: it is readable while the mail server hangs.
      const list = await api.signing.ListSigningRequests({});
      assert.equal(list.response.status, 200);
      const pendingOne = list.data!.items.find((r) => r.recipients[0]!.email === 'stall-1@example.test');
      assert.ok(pendingOne, 'the stalled request is listed (committed)');
      assert.deepEqual(pendingOne.recipients.map((r) => r.invitation), ['queued']);
      const read = await api.signing.GetSigningRequest({ signing_request_id: otherId });
      assert.equal(read.response.status, 200);
      const moved = await api.signing.UpdateSigningDeadline({ signing_request_id: otherId, deadline_at: svc.clock.now() + 48 * HOUR });
      assert.equal(moved.response.status, 200, JSON.stringify(moved.error));
      assert.equal(answered, false, 'the reads and the command were answered while the invitation still waited on the mail server');
      // A reminder meanwhile sends no second mail: that invitation is going out now.
      const remind = await api.signing.RemindSigners({ signing_request_id: pendingOne.signing_request_id });
      assert.equal(remind.response.status, 409);
      assert.match(String(remind.error?.message), /being sent right now/);

      smtp.release();
      const res = await stalled;
      assert.equal(res.response.status, 200, JSON.stringify(res.error));
      assert.deepEqual(res.data!.invitation_failures, []);
      assert.deepEqual(res.data!.recipients.map((r) => [r.invitation, r.invitation_error]), [['sent', null]]);
      assert.equal(res.data!.recipients[0]!.invited_at, svc.clock.now());
      assert.equal(smtp.to('stall-1@example.test').length, 1);
    });

    it('a replay of the Idempotency-Key returns the first answer and sends no second mail; while the first still waits on its mail, 409', async () => {
      const stalled = request('stall-2@example.test', 'stall-key-2');
      await smtp.stalled();
      const early = await request('stall-2@example.test', 'stall-key-2');
      assert.equal(early.response.status, 409, 'in progress until its answer is stored');
      smtp.release();
      const first = await stalled;
      assert.equal(first.response.status, 200);
      assert.equal(first.data!.recipients[0]!.invitation, 'sent');
      const again = await request('stall-2@example.test', 'stall-key-2');
      assert.equal(again.response.status, 200);
      assert.equal(again.response.headers.get('idempotency-replayed'), 'true');
      assert.deepEqual(again.data, first.data, 'the same answer, the invitation sent');
      assert.equal(smtp.to('stall-2@example.test').length, 1, 'no second mail');
      const jobs = await svc.db.sql.all(`SELECT id FROM jobs WHERE kind = ?`, [INVITE_JOB]);
      assert.equal(jobs.length, 0, 'no mail job left to send it again');
    });

    it('a refused address is reported in invitation_failures of the answer and of its replay', async () => {
      const first = await request('refused-after@example.test', 'refused-key');
      assert.deepEqual(first.data!.invitation_failures, ['refused-after@example.test']);
      const again = await request('refused-after@example.test', 'refused-key');
      assert.equal(again.response.headers.get('idempotency-replayed'), 'true');
      assert.deepEqual(again.data, first.data);
    });

    it('kernel: a job declared beforeAnswer is claimed in its transaction: run once after the commit, by this process; left to a worker if the process dies', async () => {
      const quiet = pino({ level: 'silent' });
      const runs: string[] = [];
      const runner = (owner: string) => {
        const r = new JobRunner(svc.db, svc.clock, quiet, { owner });
        r.define('test.effect', { run: async (p) => void runs.push(`${owner}:${String(p)}`) });
        return r;
      };
      const here = runner('here');
      const worker = runner('worker');
      let tx = null as unknown as Parameters<typeof here.committed>[0];
      await svc.db.tx(async (sql) => {
        tx = sql;
        assert.equal(await here.enqueue(sql, 'test.effect', 'a', { key: 'effect-a', beforeAnswer: { waitMs: 5000 } }), true);
      });
      // (The worker also takes the service's other due jobs, which it cannot run; only this kind's runs are counted.)
      await worker.runDue();
      assert.deepEqual(runs, [], 'a worker does not take a job claimed in its transaction');
      const report = await here.runAfterCommit(tx);
      assert.deepEqual(report, [{ kind: 'test.effect', key: 'effect-a', payload: 'a', settled: true }]);
      await worker.runDue();
      assert.deepEqual(runs, ['here:a'], 'run once, by the process that committed it');

      // The process "dies" after the commit (never runs it): once the lease ends, a worker does.
      await svc.db.tx(async (sql) => void (await here.enqueue(sql, 'test.effect', 'b', { key: 'effect-b', beforeAnswer: { waitMs: 5000 } })));
      await worker.runDue();
      assert.deepEqual(runs, ['here:a']);
      svc.clock.advance(5 * 60_000 + 1);
      await worker.runDue();
      assert.deepEqual(runs, ['here:a', 'worker:b'], 'run by a worker once its lease ended');
    });

    it('kernel: a receipt held while effects run answers 409, and once its lock is stale replays the answer stored at commit (never runs again)', async () => {
      const idem = new Idempotency(svc.db, svc.clock, 60_000);
      const req = { keyId: 'key_held', memberId: null, operationId: 'test.Held', idempotencyKey: 'held-1', body: { n: 1 } };
      let runs = 0;
      const execute = async () => ({ run: ++runs });
      const first = await idem.run(req, execute, { answerAfterEffects: true });
      assert.deepEqual(first.body, { run: 1 });
      assert.ok(first.settle, 'held until settled');
      await assert.rejects(idem.run(req, execute, { answerAfterEffects: true }), (err: { status?: number }) => err.status === 409);
      svc.clock.advance(60_000);
      const stale = await idem.run(req, execute, { answerAfterEffects: true });
      assert.deepEqual(stale, { status: 200, body: { run: 1 }, replayed: true });
      assert.equal(runs, 1);

      const settled = await idem.run({ ...req, idempotencyKey: 'held-2' }, execute, { answerAfterEffects: true });
      await settled.settle!({ run: 2, final: true });
      const replay = await idem.run({ ...req, idempotencyKey: 'held-2' }, execute, { answerAfterEffects: true });
      assert.deepEqual(replay, { status: 200, body: { run: 2, final: true }, replayed: true });
      assert.equal(runs, 2);
    });
  });
}
