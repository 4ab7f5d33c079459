/**
 * `npm run bench:stall` (issue 22 §2): how fast reads are answered on SQLite while a mail
 * server hangs on a signing invitation. A real SMTP server (test/support/smtp.ts) holds the RCPT of
 * `stall...@` for BENCH_STALL_MS (default 12 000 ms); one signing.RequestFileSignatures is made to such
 * an address and, while it waits on the mail server, BENCH_READERS (default 4) clients read
 * (signing.GetSigningRequest) back to back through real HTTP, and one client changes a deadline
 * (signing.UpdateSigningDeadline) every 250 ms. Reported: the reads' p50, p99 and slowest (aim: p99 ≤
 * 50 ms), the commands' slowest, and when the stalled request answered. The same reads and commands
 * without a stall first (as long, at most 10 s), as the baseline. The service runs in this process (test
 * support: fake clock, SQLite file, no per-key rate limit); readers and service share its event loop.
 */
import { performance } from 'node:perf_hooks';
import { mailConfigFromEnv } from '../server/mailer.ts';
import { FROM, putFile, signingWorkspace } from '../test/signing/requestSupport.ts';
import { startMailServer } from '../test/support/smtp.ts';
import { databases, startTestService } from '../test/support/service.ts';
import { log, positive } from './bench-support.ts';

const STALL_MS = positive('BENCH_STALL_MS', 12_000);
const READERS = positive('BENCH_READERS', 4);
const HOUR = 3_600_000;

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
const ms = (n: number) => `${n.toFixed(1)} ms`;

async function main(): Promise<void> {
  const sqlite = databases.find((d) => d.name === 'sqlite');
  if (!sqlite) throw new Error('TEST_DATABASES excludes sqlite');
  const smtp = await startMailServer(0, 0, { stallMs: STALL_MS });
  // No per-key rate limit: the readers ask as fast as they are answered.
  const svc = await startTestService(sqlite.url(), {
    mail: mailConfigFromEnv({ SMTP_URL: smtp.url, MAIL_FROM: FROM }),
    publicUrl: 'https://sign.acme.example',
    rateLimitPerSecond: 1e6,
    rateLimitBurst: 1e6,
  });
  try {
    const ws = await signingWorkspace(svc);
    const api = svc.client(ws.keys.sender!.secret);
    const create = async (email: string) => {
      const { file } = await putFile(svc, ws.workspace_id);
      return api.signing.RequestFileSignatures({ file_id: file.id, signers: [{ email, name: 'Bench Signer' }] });
    };
    const readId = (await create('reader@example.test')).data!.signing_request_id;

    /** Reads back to back until `stop()` is true; the latencies, in ms. */
    const readUntil = async (stop: () => boolean) => {
      const lat: number[] = [];
      await Promise.all(
        Array.from({ length: READERS }, async () => {
          while (!stop()) {
            const t = performance.now();
            const res = await api.signing.GetSigningRequest({ signing_request_id: readId });
            lat.push(performance.now() - t);
            if (res.response.status !== 200) throw new Error(`read answered ${res.response.status}`);
          }
        }),
      );
      return lat.sort((a, b) => a - b);
    };

    /** Changes the deadline of the read request every 250 ms until `stop()`; the latencies, in ms. */
    let deadline = svc.clock.now() + 48 * HOUR;
    const writeUntil = async (stop: () => boolean) => {
      const lat: number[] = [];
      while (!stop()) {
        const t = performance.now();
        const res = await api.signing.UpdateSigningDeadline({ signing_request_id: readId, deadline_at: (deadline += 60_000) });
        lat.push(performance.now() - t);
        if (res.response.status !== 200) throw new Error(`command answered ${res.response.status}`);
        await new Promise((r) => setTimeout(r, 250));
      }
      return lat.sort((a, b) => a - b);
    };

    // The baseline: the same reads and commands, for as long as the stall will last, with no mail in flight.
    log('baseline');
    const baseFrom = Date.now();
    const baseEnd = performance.now() + Math.min(STALL_MS, 10_000);
    const [baseline, baseCommands] = await Promise.all([readUntil(() => performance.now() > baseEnd), writeUntil(() => performance.now() > baseEnd)]);

    const baseTo = Date.now();
    log('stalling');
    const started = performance.now();
    let answeredAt = 0;
    const stalled = create('stall-bench@example.test').then((res) => {
      answeredAt = performance.now();
      return res;
    });
    await smtp.stalled();
    const stallFrom = Date.now();
    const [during, commands] = await Promise.all([readUntil(() => answeredAt !== 0), writeUntil(() => answeredAt !== 0)]);
    const res = await stalled;
    const stallTo = Date.now();
    /** The service's own time for the reads between two instants (its request log's `ms`: from arrival to the last byte sent). */
    const served = (from: number, to: number) =>
      svc
        .logs()
        .split('\n')
        .filter((l) => l.includes('"operation":"signing.GetSigningRequest"'))
        .map((l) => JSON.parse(l) as { time: number; ms: number })
        .filter((e) => e.time >= from && e.time <= to)
        .map((e) => e.ms)
        .sort((a, b) => a - b);
    const baseServed = served(baseFrom, baseTo);
    const stallServed = served(stallFrom, stallTo);

    log(`SQLite, SMTP stalled ${STALL_MS} ms at RCPT, ${READERS} readers`);
    log(`baseline reads: n=${baseline.length} p50 ${ms(pct(baseline, 50))} p99 ${ms(pct(baseline, 99))} max ${ms(baseline.at(-1)!)}`);
    log(`reads during the stall: n=${during.length} p50 ${ms(pct(during, 50))} p99 ${ms(pct(during, 99))} max ${ms(during.at(-1)!)} (aim p99 <= 50 ms)`);
    log(`  as the service timed them: baseline p99 ${ms(pct(baseServed, 99))}, during the stall p99 ${ms(pct(stallServed, 99))} max ${ms(stallServed.at(-1) ?? NaN)}`);
    log(`baseline commands: n=${baseCommands.length} p50 ${ms(pct(baseCommands, 50))} max ${ms(baseCommands.at(-1) ?? NaN)}`);
    log(`commands during the stall: n=${commands.length} p50 ${ms(pct(commands, 50))} max ${ms(commands.at(-1) ?? NaN)}`);
    log(`the stalled RequestFileSignatures answered ${res.response.status} after ${ms(answeredAt - started)}: invitation ${res.data?.recipients[0]?.invitation} (${res.data?.recipients[0]?.invitation_error ?? 'no error'})`);
    if (pct(during, 99) > 50) process.exitCode = 1;
  } catch (err) {
    console.log(svc.logs().split('\n').slice(-8).join('\n'));
    throw err;
  } finally {
    smtp.release();
    await svc.jobs.runDue(); // the stalled mail's job, still running, records its outcome before the database closes
    await svc.close();
    await smtp.close();
  }
}

await main();
