/**
 * `npm start`: migrate, serve on PORT, run background jobs, shut down gracefully on SIGTERM / SIGINT.
 * `npm start` runs it compiled (`node dist/scripts/start.js`, after `npm run build` when dist/ is older
 * than the sources); `npm run dev` runs these sources through tsx. Under a process manager or in a
 * container run `node dist/scripts/start.js` itself, so SIGTERM and SIGINT reach this process.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createService, migrations } from '../app.ts';
import { openDatabase } from '../db/database.ts';
import { systemClock } from '../server/clock.ts';
import { loadConfig } from '../server/config.ts';
import { relaxations } from '../server/egress.ts';
import { createLogger } from '../server/logger.ts';

const config = loadConfig();
const logger = createLogger(config.logLevel);
// Every relaxation of the webhook egress policy (a test CA, loopback receivers, extra ports), loudly.
for (const line of relaxations(config.egress)) logger.warn({ egress: 'relaxed' }, line);
const db = openDatabase(config.databaseUrl);
await db.migrate(migrations);
db.startCheckpointer();
const service = createService({ db, clock: systemClock, config, logger });
const { handler, jobs, outbox } = service;
const server = http.createServer(handler);
try {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, () => {
      server.off('error', reject);
      resolve();
    });
  });
} catch (err) {
  const code = (err as NodeJS.ErrnoException).code;
  const why =
    code === 'EADDRINUSE' ? `port ${config.port} is already in use (another copy of the service?); set PORT to a free port`
    : code === 'EACCES' ? `port ${config.port} needs privileges this process lacks; set PORT to 1024 or above`
    : `cannot listen on port ${config.port}: ${(err as Error).message}`;
  process.stderr.write(`start: ${why}\n`);
  logger.flush();
  await db.close();
  process.exit(1);
}
const { port } = server.address() as AddressInfo;
logger.info({ port, database: db.description }, `listening on http://localhost:${port}/v1`);
// Signals are handled from the moment requests are: a SIGTERM right after the first answer still stops cleanly.
let stopping = false;
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
await jobs.scheduleRecurring();
await outbox.prepare();
if (process.env.JOBS !== 'off' && !stopping) {
  jobs.start(config.jobsPollMs);
  outbox.start(config.outboxPollMs);
  service.workers.start();
}
server.keepAliveTimeout = 65_000;

const workspaces = await db.sql.one<{ n: number }>('SELECT COUNT(*) AS n FROM workspaces');
if (Number(workspaces?.n ?? 0) === 0) {
  logger.info('no workspace yet: run `npm run demo` for a demo workspace and a ready-to-paste curl call');
}

/** One shutdown step: exits with 1 (after logging `late`) when it takes longer than `ms`. */
async function within<T>(ms: number, late: string, work: Promise<T>): Promise<T> {
  const timer = setTimeout(() => {
    logger.error({ lost: service.queued || undefined }, late);
    process.exit(1);
  }, ms);
  timer.unref();
  try {
    return await work;
  } finally {
    clearTimeout(timer);
  }
}

async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'shutting down: finishing requests in flight');
  await within(10_000, 'requests still running after 10 s; exiting', new Promise<void>((resolve) => server.close(() => resolve())));
  // Background work stops first (it may still send mail or deliver webhooks through what closeEndpoints closes).
  // A webhook attempt in flight may take its whole 10 s limit: the background work gets 20 s, as in the worker.
  await within(
    20_000,
    'jobs, event consumers or workers still not stopped after 20 s; exiting',
    Promise.all([jobs.stop(), outbox.stop(), service.workers.stop()]),
  );
  // Collected events are queued in memory: write them all before exiting (at most COLLECT_BUFFER_MAX).
  if (service.queued) logger.info({ events: service.queued }, 'writing queued collected events');
  await within(
    60_000,
    'queued collected events still not written after 60 s; exiting',
    service.closeEndpoints().catch((err: unknown) => logger.error({ err, lost: service.queued }, 'collected events could not be written')),
  );
  await within(10_000, 'the database still not closed after 10 s; exiting', db.close());
  logger.info('stopped');
  logger.flush();
  process.exit(0);
}
