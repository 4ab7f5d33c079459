/**
 * `npm run worker`: migrate, then run the background jobs and the change-event consumers (the outbox)
 * with no HTTP listener, until SIGTERM / SIGINT, which lets the job and the consumer batch in flight
 * finish, releases this process's consumer leases and exits 0. Beside it, the API processes run with
 * `JOBS=off`. Any number of workers may share one PostgreSQL database (jobs are claimed with
 * FOR UPDATE SKIP LOCKED, consumers are leased). Like `scripts/start.ts`, it runs compiled; under a
 * process manager or in a container run it as `node dist/scripts/worker.js` so the signals reach this process.
 *
 * `--migrate-only`: migrate and exit 0 (a deployment's one-shot step before the other processes
 * start: on a fresh PostgreSQL database, processes that migrate at the same moment can collide while
 * knex creates its own migration tables).
 */
import { createService, migrations } from '../app.ts';
import { openDatabase } from '../db/database.ts';
import { systemClock } from '../server/clock.ts';
import { loadConfig } from '../server/config.ts';
import { relaxations } from '../server/egress.ts';
import { createLogger } from '../server/logger.ts';

const args = process.argv.slice(2);
const unknown = args.filter((a) => a !== '--migrate-only');
if (unknown.length) {
  process.stderr.write(`worker: unknown argument ${unknown[0]} (the only one is --migrate-only)\n`);
  process.exit(1);
}
const migrateOnly = args.includes('--migrate-only');
if (!migrateOnly && process.env.JOBS === 'off') {
  process.stderr.write('worker: JOBS=off leaves a worker nothing to do; unset JOBS for the worker (set it only on the API processes)\n');
  process.exit(1);
}

const config = loadConfig();
const logger = createLogger(config.logLevel);
// Every relaxation of the webhook egress policy (a test CA, loopback receivers, extra ports), loudly.
for (const line of relaxations(config.egress)) logger.warn({ egress: 'relaxed' }, line);
const db = openDatabase(config.databaseUrl);
await db.migrate(migrations);
if (migrateOnly) {
  logger.info({ database: db.description }, 'migrated');
  await db.close();
  logger.flush();
  process.exit(0);
}
db.startCheckpointer();
const service = createService({ db, clock: systemClock, config, logger });
const { jobs, outbox } = service;
await jobs.scheduleRecurring();
jobs.start(config.jobsPollMs);
outbox.start(config.outboxPollMs);
service.workers.start();
logger.info({ database: db.description }, 'worker: running background jobs and change-event consumers (no HTTP listener)');

let stopping = false;

async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'shutting down: finishing the job and the consumer batch in flight');
  const timer = setTimeout(() => {
    logger.error('jobs, event consumers or the database still not stopped after 20 s; exiting');
    logger.flush();
    process.exit(1);
  }, 20_000);
  timer.unref();
  try {
    await Promise.all([jobs.stop(), outbox.stop(), service.workers.stop()]);
    await service.closeEndpoints();
    await db.close();
  } catch (err) {
    logger.error({ err }, 'stopping failed');
    logger.flush();
    process.exit(1);
  }
  clearTimeout(timer);
  logger.info('stopped');
  logger.flush();
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
