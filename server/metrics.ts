/**
 * Prometheus metrics of one service process (`GET /metrics`, text format, prom-client): requests by
 * operation and status with their latency, the lean endpoints' queue depth and refusals (collection),
 * the background job backlog and failures, the change-event consumers' failures, and the database
 * connections. Off unless METRICS_TOKEN is set; a scrape then needs `Authorization: Bearer <token>`.
 * Each process has its own registry (several processes: scrape each, as Prometheus does).
 */
import crypto from 'node:crypto';
import type { RequestHandler } from 'express';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Database } from '../db/database.ts';
import type { Clock } from './clock.ts';

export interface MetricsSources {
  db: Database;
  clock: Clock;
  /** Items the lean endpoints hold, and refused, by namespace. */
  endpoints: () => Record<string, { queued: number; refused: number }>;
}

export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({ name: 'wsops_requests_total', help: 'HTTP requests answered, by operation (or route) and status.', labelNames: ['operation', 'status'] as const, registers: [this.registry] });
  private readonly latency = new Histogram({
    name: 'wsops_request_duration_seconds',
    help: 'Time from request to response, by operation (or route).',
    labelNames: ['operation'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  constructor(private readonly token: string | null, sources: MetricsSources) {
    const { db, clock } = sources;
    new Gauge({
      name: 'wsops_queue_depth',
      help: 'Items held in memory by a lean endpoint and not yet stored (collection: events).',
      labelNames: ['endpoint'] as const,
      registers: [this.registry],
      collect() {
        for (const [name, e] of Object.entries(sources.endpoints())) this.set({ endpoint: name }, e.queued);
      },
    });
    new Gauge({
      name: 'wsops_queue_refused_total',
      help: 'Items refused (503) because a lean endpoint\'s queue was full, since the process started.',
      labelNames: ['endpoint'] as const,
      registers: [this.registry],
      collect() {
        for (const [name, e] of Object.entries(sources.endpoints())) this.set({ endpoint: name }, e.refused);
      },
    });
    new Gauge({
      name: 'wsops_jobs',
      help: 'Background jobs: due now (backlog), waiting for a retry after a failure (failing), all.',
      labelNames: ['state'] as const,
      registers: [this.registry],
      async collect() {
        const now = clock.now();
        const row = await db.sql.one<{ due: number; failing: number; total: number }>(
          `SELECT COALESCE(SUM(CASE WHEN run_at <= ? THEN 1 ELSE 0 END), 0) AS due,
                  COALESCE(SUM(CASE WHEN last_error IS NOT NULL THEN 1 ELSE 0 END), 0) AS failing,
                  COUNT(*) AS total FROM jobs`,
          [now],
        );
        this.set({ state: 'due' }, Number(row?.due ?? 0));
        this.set({ state: 'failing' }, Number(row?.failing ?? 0));
        this.set({ state: 'total' }, Number(row?.total ?? 0));
      },
    });
    new Gauge({
      name: 'wsops_outbox_consumer_failures',
      help: 'Failed attempts at the event a change-event consumer is stuck on (0 when it is not).',
      labelNames: ['consumer'] as const,
      registers: [this.registry],
      async collect() {
        for (const c of await db.sql.all<{ name: string; attempts: number }>('SELECT name, attempts FROM outbox_consumers')) this.set({ consumer: c.name }, Number(c.attempts));
      },
    });
    new Gauge({
      name: 'wsops_db_connections',
      help: 'Database connections of this process: open, idle, and requests waiting for one.',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        const s = db.poolStats();
        this.set({ state: 'open' }, s.total);
        this.set({ state: 'idle' }, s.idle);
        this.set({ state: 'waiting' }, s.waiting);
      },
    });
  }

  /** Records one answered request. */
  observe(operation: string, status: number, seconds: number): void {
    this.requests.inc({ operation, status: String(status) });
    this.latency.observe({ operation }, seconds);
  }

  /** `GET /metrics`: 404 while METRICS_TOKEN is unset, 401 without the token, else the text format. */
  readonly handler: RequestHandler = async (req, res) => {
    if (this.token === null) {
      res.status(404).json({ error: 'not_found', message: 'Metrics are off: set METRICS_TOKEN to turn them on.' });
      return;
    }
    const presented = Buffer.from(/^Bearer (\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? '');
    const expected = Buffer.from(this.token);
    if (presented.length !== expected.length || !crypto.timingSafeEqual(presented, expected)) {
      res.status(401).set('WWW-Authenticate', 'Bearer realm="metrics"').json({ error: 'invalid_key', message: 'Send Authorization: Bearer <METRICS_TOKEN>.' });
      return;
    }
    res.type(this.registry.contentType).send(await this.registry.metrics());
  };
}
