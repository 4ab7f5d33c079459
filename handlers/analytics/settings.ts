/**
 * The analytics module's settings (collection), read from the environment when the process starts
 * (`ServiceModule.config`). Each is listed in `.env.example` and the README's configuration table.
 */
import { envHeaderName, envNumber, type ServiceEnv } from '../../server/config.ts';

export interface AnalyticsSettings {
  /** Trusted proxy header with the client address, one value the proxy sets (e.g. x-real-ip; of a list, the first is read); null = the socket address. */
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
  /** Sustained events per second one collect key may send to one process (429 above). */
  collectKeyRatePerSecond: number;
  /** Events one collect key may send at once above its sustained rate. */
  collectKeyBurst: number;
  /** Sustained events per second one client address may send to one process (429 above). */
  collectAddressRatePerSecond: number;
  /** Events one client address may send at once above its sustained rate. */
  collectAddressBurst: number;
}

function collectWriterFrom(raw: string | undefined): 'thread' | 'inline' {
  if (raw === undefined || raw === '' || raw === 'thread') return 'thread';
  if (raw === 'inline') return 'inline';
  throw new Error(`COLLECT_WRITER must be thread or inline (got "${raw}")`);
}

/** Reads the analytics settings; throws a readable error on bad values. */
export function analyticsSettings(env: ServiceEnv): AnalyticsSettings {
  return {
    collectClientIpHeader: envHeaderName(env, 'COLLECT_CLIENT_IP_HEADER'),
    collectCountryHeader: envHeaderName(env, 'COLLECT_COUNTRY_HEADER'),
    collectFlushIntervalMs: envNumber(env, 'COLLECT_FLUSH_INTERVAL_MS', 200, 0),
    collectBatchSize: envNumber(env, 'COLLECT_BATCH_SIZE', 2000, 1),
    collectBufferMax: envNumber(env, 'COLLECT_BUFFER_MAX', 20_000, 1),
    collectWriter: collectWriterFrom(env.COLLECT_WRITER),
    collectKeyRatePerSecond: envNumber(env, 'COLLECT_KEY_RATE_PER_SECOND', 1000, 0.001),
    collectKeyBurst: envNumber(env, 'COLLECT_KEY_BURST', 5000, 1),
    collectAddressRatePerSecond: envNumber(env, 'COLLECT_ADDRESS_RATE_PER_SECOND', 50, 0.001),
    collectAddressBurst: envNumber(env, 'COLLECT_ADDRESS_BURST', 500, 1),
  };
}
