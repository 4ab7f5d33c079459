import { DEFAULT_DATABASE_URL } from '../db/database.ts';
import { type EgressPolicy, egressPolicyFromEnv } from './egress.ts';
import { type MailConfig, mailConfigFromEnv } from './mailer.ts';
import { type StorageConfig, storageConfigFromEnv } from './storage.ts';

/** The environment settings are read from (process.env, or a test's own). */
export type ServiceEnv = Readonly<Record<string, string | undefined>>;

/** The platform's settings; each module reads its own from `env` (`ServiceModule.config`). */
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
  /**
   * Which proxies in front are trusted for X-Forwarded-Proto / -For (express `trust proxy`): false
   * (none, the default), true (all), a hop count, or addresses/subnets such as `loopback, 10.0.0.0/8`.
   */
  trustProxy: boolean | number | string;
  /** Bearer token that `GET /metrics` requires; null (METRICS_TOKEN unset) turns metrics off. */
  metricsToken: string | null;
  /** How often the change-event consumers (the outbox) look for new events (ms); events wait for the next poll. */
  outboxPollMs: number;
  /** How often the job runner looks for due jobs (ms); jobs enqueued by this process's commands and consumers wake it at once. */
  jobsPollMs: number;
  /** Change events older than this (days, at least 30: webhook replay) are pruned once every consumer has passed them. */
  outboxRetentionDays: number;
  /**
   * Outbound HTTPS (webhook deliveries): public HTTPS on 443 only unless relaxed for test receivers
   * (EGRESS_ALLOWED_PORTS, EGRESS_ALLOW_DESTINATIONS, EGRESS_TEST_CA_FILE; see server/egress.ts).
   */
  egress: EgressPolicy;
  /** Where file bytes are kept (STORAGE: `database` by default, or `filesystem` under STORAGE_PATH): server/storage.ts. */
  storage: StorageConfig;
  /** Where mail goes (SMTP_URL and MAIL_FROM, or the development mailbox): server/mailer.ts. */
  mail: MailConfig;
  /** The environment these settings were read from: the modules read theirs from it. */
  env: ServiceEnv;
}

function trustProxyFrom(raw: string | undefined): boolean | number | string {
  const value = raw?.trim();
  if (!value || value === 'false') return false;
  if (value === 'true') return true;
  if (/^\d+$/.test(value)) return Number(value);
  return value;
}

/** An HTTP header name from the environment, lower-cased; null when unset. */
export const envHeaderName = (env: ServiceEnv, name: string): string | null => {
  const raw = env[name]?.trim().toLowerCase();
  if (!raw) return null;
  if (!/^[a-z0-9!#$%&'*+.^_`|~-]+$/.test(raw)) throw new Error(`${name} must be an HTTP header name (got "${env[name]}")`);
  return raw;
};

/** A number from the environment, `fallback` when unset; throws a readable error below `min`. */
export function envNumber(env: ServiceEnv, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min) throw new Error(`${name} must be a number >= ${min} (got "${raw}")`);
  return value;
}

/** Origins (scheme://host[:port], comma-separated) from the environment; throws a readable error on anything else. */
export function originsFrom(name: string, raw: string | undefined): string[] {
  const out: string[] = [];
  for (const item of (raw ?? '').split(',').map((s) => s.trim()).filter(Boolean)) {
    let url: URL;
    try {
      url = new URL(item);
    } catch {
      throw new Error(`${name} must list origins such as https://app.example.com, comma-separated (got "${item}")`);
    }
    if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.pathname !== '/' || url.search || url.hash || url.username || item.endsWith('/'))
      throw new Error(`${name} must list origins (scheme://host[:port], no path) such as https://app.example.com (got "${item}")`);
    out.push(url.origin);
  }
  return out;
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
    port: envNumber(env, 'PORT', 8080, 0),
    publicUrl: publicUrlFrom(env.PUBLIC_URL, envNumber(env, 'PORT', 8080, 0)),
    databaseUrl: env.DATABASE_URL || DEFAULT_DATABASE_URL,
    rateLimitPerSecond: envNumber(env, 'RATE_LIMIT_PER_SECOND', 100, 0.001),
    rateLimitBurst: envNumber(env, 'RATE_LIMIT_BURST', 200, 1),
    idempotencyRetentionHours: envNumber(env, 'IDEMPOTENCY_RETENTION_HOURS', 24, 24),
    idempotencyLockTimeoutMs: envNumber(env, 'IDEMPOTENCY_LOCK_TIMEOUT_MS', 60_000, 1000),
    validateResponses: (env.VALIDATE_RESPONSES ?? (env.NODE_ENV === 'production' ? 'false' : 'true')) === 'true',
    logLevel: env.LOG_LEVEL || 'info',
    trustProxy: trustProxyFrom(env.TRUST_PROXY),
    metricsToken: env.METRICS_TOKEN?.trim() || null,
    outboxPollMs: envNumber(env, 'OUTBOX_POLL_MS', 250, 10),
    jobsPollMs: envNumber(env, 'JOBS_POLL_MS', 1000, 10),
    outboxRetentionDays: envNumber(env, 'OUTBOX_RETENTION_DAYS', 30, 30),
    egress: egressPolicyFromEnv(env),
    storage: storageConfigFromEnv(env),
    mail: mailConfigFromEnv(env),
    env,
  };
}
