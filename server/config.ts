import { DEFAULT_DATABASE_URL } from '../db/database.ts';
import { type EgressPolicy, egressPolicyFromEnv } from './egress.ts';

export interface ServiceConfig {
  port: number;
  /** The address people reach this service at (links in answers, e.g. a webhook's approval_url): PUBLIC_URL, default http://localhost:PORT. */
  publicUrl: string;
  databaseUrl: string;
  /** Sustained requests per second per credential. */
  rateLimitPerSecond: number;
  /** Requests a credential may send at once above the sustained rate. */
  rateLimitBurst: number;
  /** How long idempotency receipts are kept (at least 24 h). */
  idempotencyRetentionHours: number;
  /** After this long an unfinished idempotency lock is considered abandoned (its process died). */
  idempotencyLockTimeoutMs: number;
  /** Validate responses against the document (development and tests). */
  validateResponses: boolean;
  logLevel: string;
  /** Trusted proxy header with the client address (first of a list), e.g. x-forwarded-for; null = the socket address. */
  collectClientIpHeader: string | null;
  /** Trusted proxy header with the visitor's country (ISO 3166-1 alpha-2), e.g. cf-ipcountry; null = no country. */
  collectCountryHeader: string | null;
  /** How often collected events are written (ms); 0 = only when a batch is full or on flush() (tests). */
  collectFlushIntervalMs: number;
  /** Events written per batch; a full buffer is written at once. */
  collectBatchSize: number;
  /** Buffered events above which POST /v1/track answers 503. */
  collectBufferMax: number;
  /** Where batches are written: `thread` (a worker thread with its own connection, default) or `inline`. */
  collectWriter: 'thread' | 'inline';
  /**
   * Which proxies in front are trusted for X-Forwarded-Proto / -For (express `trust proxy`): false
   * (none, the default), true (all), a hop count, or addresses/subnets such as `loopback, 10.0.0.0/8`.
   */
  trustProxy: boolean | number | string;
  /** Bearer token that `GET /metrics` requires; null (METRICS_TOKEN unset) turns metrics off. */
  metricsToken: string | null;
  /** How often the change-event consumers (the outbox) look for new events (ms); events wait for the next poll. */
  outboxPollMs: number;
  /** How often the job runner looks for due jobs (ms); jobs enqueued by this process's consumers wake it at once. */
  jobsPollMs: number;
  /**
   * Outbound HTTPS (webhook deliveries): public HTTPS on 443 only unless relaxed for test receivers
   * (EGRESS_ALLOWED_PORTS, EGRESS_ALLOW_DESTINATIONS, EGRESS_TEST_CA_FILE; see server/egress.ts).
   */
  egress: EgressPolicy;
}

function trustProxyFrom(raw: string | undefined): boolean | number | string {
  const value = raw?.trim();
  if (!value || value === 'false') return false;
  if (value === 'true') return true;
  if (/^\d+$/.test(value)) return Number(value);
  return value;
}

const headerName = (env: NodeJS.ProcessEnv, name: string): string | null => {
  const raw = env[name]?.trim().toLowerCase();
  if (!raw) return null;
  if (!/^[a-z0-9!#$%&'*+.^_`|~-]+$/.test(raw)) throw new Error(`${name} must be an HTTP header name (got "${env[name]}")`);
  return raw;
};

function numberFrom(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min) throw new Error(`${name} must be a number >= ${min} (got "${raw}")`);
  return value;
}

function collectWriterFrom(raw: string | undefined): 'thread' | 'inline' {
  if (raw === undefined || raw === '' || raw === 'thread') return 'thread';
  if (raw === 'inline') return 'inline';
  throw new Error(`COLLECT_WRITER must be thread or inline (got "${raw}")`);
}

function publicUrlFrom(raw: string | undefined, port: number): string {
  const value = raw?.trim();
  if (!value) return `http://localhost:${port}`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`PUBLIC_URL must be an absolute http(s) URL (got "${raw}")`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`PUBLIC_URL must be http or https (got "${raw}")`);
  return url.origin;
}

/** Reads the service configuration from the environment; throws a readable error on bad values. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  return {
    port: numberFrom(env, 'PORT', 8080, 0),
    publicUrl: publicUrlFrom(env.PUBLIC_URL, numberFrom(env, 'PORT', 8080, 0)),
    databaseUrl: env.DATABASE_URL || DEFAULT_DATABASE_URL,
    rateLimitPerSecond: numberFrom(env, 'RATE_LIMIT_PER_SECOND', 100, 0.001),
    rateLimitBurst: numberFrom(env, 'RATE_LIMIT_BURST', 200, 1),
    idempotencyRetentionHours: numberFrom(env, 'IDEMPOTENCY_RETENTION_HOURS', 24, 24),
    idempotencyLockTimeoutMs: numberFrom(env, 'IDEMPOTENCY_LOCK_TIMEOUT_MS', 60_000, 1000),
    validateResponses: (env.VALIDATE_RESPONSES ?? (env.NODE_ENV === 'production' ? 'false' : 'true')) === 'true',
    logLevel: env.LOG_LEVEL || 'info',
    collectClientIpHeader: headerName(env, 'COLLECT_CLIENT_IP_HEADER'),
    collectCountryHeader: headerName(env, 'COLLECT_COUNTRY_HEADER'),
    collectFlushIntervalMs: numberFrom(env, 'COLLECT_FLUSH_INTERVAL_MS', 200, 0),
    collectBatchSize: numberFrom(env, 'COLLECT_BATCH_SIZE', 2000, 1),
    collectBufferMax: numberFrom(env, 'COLLECT_BUFFER_MAX', 20_000, 1),
    collectWriter: collectWriterFrom(env.COLLECT_WRITER),
    trustProxy: trustProxyFrom(env.TRUST_PROXY),
    metricsToken: env.METRICS_TOKEN?.trim() || null,
    outboxPollMs: numberFrom(env, 'OUTBOX_POLL_MS', 250, 10),
    jobsPollMs: numberFrom(env, 'JOBS_POLL_MS', 1000, 10),
    egress: egressPolicyFromEnv(env),
  };
}
