import { DEFAULT_DATABASE_URL } from '../db/database.ts';

export interface ServiceConfig {
  port: number;
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
}

function numberFrom(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min) throw new Error(`${name} must be a number >= ${min} (got "${raw}")`);
  return value;
}

/** Reads the service configuration from the environment; throws a readable error on bad values. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  return {
    port: numberFrom(env, 'PORT', 8080, 0),
    databaseUrl: env.DATABASE_URL || DEFAULT_DATABASE_URL,
    rateLimitPerSecond: numberFrom(env, 'RATE_LIMIT_PER_SECOND', 100, 0.001),
    rateLimitBurst: numberFrom(env, 'RATE_LIMIT_BURST', 200, 1),
    idempotencyRetentionHours: numberFrom(env, 'IDEMPOTENCY_RETENTION_HOURS', 24, 24),
    idempotencyLockTimeoutMs: numberFrom(env, 'IDEMPOTENCY_LOCK_TIMEOUT_MS', 60_000, 1000),
    validateResponses: (env.VALIDATE_RESPONSES ?? (env.NODE_ENV === 'production' ? 'false' : 'true')) === 'true',
    logLevel: env.LOG_LEVEL || 'info',
  };
}
