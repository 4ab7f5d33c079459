/**
 * The public collection path (`POST /v1/track`, its CORS preflight, `GET /v1/track.js`), on plain
 * node:http in front of the express app: browsers send one event per request, so this path does the
 * least work it can. Per request: take a token of the client address's bucket, parse and validate
 * the body, look the collect key up in a cache, take a token of the key's bucket, hash the visitor
 * under the cached day salt, parse the User-Agent (cached), queue the event (collectQueue.ts).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import type { Database } from '../../db/database.ts';
import type { Clock } from '../../server/clock.ts';
import { notFound, ServiceError } from '../../server/errors.ts';
import { bundleByCollectKey, type CollectBundle } from './collectQueries.ts';
import { CollectQueue, inlineWriter, threadWriter } from './collectQueue.ts';
import { normalizeEvent } from './input.ts';
import { TokenBuckets } from './rateLimit.ts';
import type { AnalyticsSettings } from './settings.ts';
import { type Agent, clientIp, countryOf, parseAgent, parseTrackBody } from './trackInput.ts';
import { VisitorIds } from './visitors.ts';

export const MAX_BODY_BYTES = 8 * 1024;
const KEY_TTL_MS = 60_000;
const UNKNOWN_KEY_TTL_MS = 10_000;
const CACHE_MAX = 10_000;

const CORS = { 'Access-Control-Allow-Origin': '*', 'X-Content-Type-Options': 'nosniff' } as const;
/** Answers about one request (the script alone may be cached). */
const NO_STORE = { 'Cache-Control': 'no-store' } as const;
// Answers that do not depend on the request are built once: an Error costs a stack capture, which
// showed as the largest single cost of the collection thread when one was made per request.
const TOO_LARGE = new ServiceError(413, 'invalid_input', `The body is larger than ${MAX_BODY_BYTES / 1024} KB.`);
const QUEUE_FULL = new ServiceError(503, 'unavailable', 'Too many events are waiting to be written; retry after 1 s.', { 'Retry-After': '1' });
const BAD_TYPE = new ServiceError(400, 'invalid_json', 'Content-Type must be application/json or text/plain (UTF-8).');
const INTERNAL = new ServiceError(500, 'internal_error', 'Internal server error.');
const limited = (who: string, seconds: number) =>
  new ServiceError(429, 'rate_limited', `Too many events from this ${who}; retry after ${seconds} s.`, { 'Retry-After': String(seconds) });

export interface CollectorDeps {
  db: Database;
  clock: Clock;
  config: { databaseUrl: string };
  settings: AnalyticsSettings;
  logger: Logger;
}

export interface Collector {
  /** Answers the collection endpoints; returns false for any other request (left to the next handler). */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** Writes every queued event now (waits for a write in progress first); rejects when a batch fails (it stays queued). */
  flush(): Promise<void>;
  /** Stops the timer and writes what is queued (shutdown). */
  close(): Promise<void>;
  /** Events queued and not yet written. */
  readonly queued: number;
  /** Events refused (503) because the queue was full, since the process started. */
  readonly refused: number;
}

function sendError(res: ServerResponse, e: ServiceError, close = false): void {
  const requestId = crypto.randomUUID();
  const body = JSON.stringify(e.bodyFor(requestId));
  res.writeHead(e.status, {
    ...CORS,
    ...NO_STORE,
    ...e.headers,
    'Request-Id': requestId,
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    ...(close ? { Connection: 'close' } : {}),
  });
  res.end(body);
}

/** Reads a body of at most MAX_BODY_BYTES; answers 413 itself (and calls nothing) when it is larger. */
function readBody(req: IncomingMessage, res: ServerResponse, then: (text: string) => void): void {
  if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) return sendError(res, TOO_LARGE, true);
  const chunks: Buffer[] = [];
  let size = 0;
  let refused = false;
  req.on('data', (chunk: Buffer) => {
    if (refused) return;
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      refused = true;
      sendError(res, TOO_LARGE, true);
    } else chunks.push(chunk);
  });
  req.on('error', () => {});
  req.on('end', () => {
    if (!refused) then(Buffer.concat(chunks).toString('utf8'));
  });
}

const acceptsType = (type: string) =>
  /^\s*(application\/json|text\/plain)\s*(;|$)/i.test(type) && (!/charset/i.test(type) || /charset\s*=\s*"?utf-8"?\s*(;|$)/i.test(type));

/** The tracker script answer (200, or 304 for a matching ETag). */
function trackerScript() {
  const script = fs.readFileSync(new URL('./tracker/track.js', import.meta.url));
  const etag = `"${crypto.createHash('sha256').update(script).digest('base64url').slice(0, 22)}"`;
  return (req: IncomingMessage, res: ServerResponse) => {
    const headers = { ...CORS, 'Request-Id': crypto.randomUUID(), 'Cross-Origin-Resource-Policy': 'cross-origin', 'Cache-Control': 'public, max-age=3600', ETag: etag };
    if (req.headers['if-none-match'] === etag) {
      res.writeHead(304, headers);
      return void res.end();
    }
    res.writeHead(200, { ...headers, 'Content-Type': 'text/javascript; charset=utf-8', 'Content-Length': script.length });
    res.end(req.method === 'HEAD' ? undefined : script);
  };
}

function preflight(res: ServerResponse): void {
  res.writeHead(204, {
    ...CORS,
    ...NO_STORE,
    'Request-Id': crypto.randomUUID(),
    'Access-Control-Allow-Methods': 'POST, OPTIONS',
    'Access-Control-Allow-Headers': 'Content-Type',
    'Access-Control-Max-Age': '86400',
    'Content-Length': 0,
  });
  res.end();
}

/** The collection endpoints of one process. */
export function createCollector({ db, clock, config, settings, logger }: CollectorDeps): Collector {
  const tracker = trackerScript();
  const writer = settings.collectWriter === 'thread' ? threadWriter(config.databaseUrl, logger) : inlineWriter(db);
  const queue: CollectQueue = new CollectQueue(settings, writer, logger, (batch) => visitors.decide(batch));
  const visitors = new VisitorIds(db, clock, queue);
  const byAddress = new TokenBuckets(clock, settings.collectAddressRatePerSecond, settings.collectAddressBurst);
  const byKey = new TokenBuckets(clock, settings.collectKeyRatePerSecond, settings.collectKeyBurst);

  const keys = new LRUCache<string, { bundle: CollectBundle | null; until: number } | Promise<CollectBundle | null>>({ max: CACHE_MAX });
  async function bundleOf(key: string): Promise<CollectBundle | null> {
    const hit = keys.get(key);
    if (hit instanceof Promise) return hit;
    if (hit && hit.until > clock.now()) return hit.bundle;
    const lookup = bundleByCollectKey(db.sql, key).then(
      (bundle) => {
        keys.set(key, { bundle: bundle ?? null, until: clock.now() + (bundle ? KEY_TTL_MS : UNKNOWN_KEY_TTL_MS) });
        return bundle ?? null;
      },
      (err: unknown) => {
        keys.delete(key);
        throw err;
      },
    );
    keys.set(key, lookup);
    return lookup;
  }

  const agents = new LRUCache<string, Agent>({ max: CACHE_MAX });
  function agentOf(ua: string): Agent {
    let agent = agents.get(ua);
    if (!agent) agents.set(ua, (agent = parseAgent(ua)));
    return agent;
  }

  async function accept(req: IncomingMessage, ip: string, text: string): Promise<void> {
    const { key, input } = parseTrackBody(text);
    const bundle = await bundleOf(key);
    if (!bundle) throw notFound('No site has this collect key.');
    const wait = byKey.take(bundle.id);
    if (wait) throw limited('collect key', wait);
    const ua = req.headers['user-agent'] ?? '';
    const agent = agentOf(ua);
    if (agent.bot) return;
    const now = clock.now();
    input.ts = now;
    const visitor = await visitors.visitorOf(bundle.id, ip, ua, now);
    input.visitor = visitor.id;
    const country = countryOf(req, settings.collectCountryHeader);
    if (country) input.country = country;
    if (agent.device) input.device = agent.device;
    if (agent.browser) input.browser = agent.browser;
    if (agent.os) input.os = agent.os;
    const event = normalizeEvent(bundle.id, input);
    if (visitor.previous) visitors.hold(event, visitor.previous);
    queue.push(event);
  }

  function track(req: IncomingMessage, res: ServerResponse): void {
    // A full queue refuses before anything else is done: under overload the refusals must cost
    // next to nothing, or they take the CPU the writer needs to catch up.
    if (queue.full()) {
      req.resume();
      req.on('end', () => sendError(res, QUEUE_FULL));
      return;
    }
    // So does an address over its limit: a flood from one client is refused before its body is read.
    const ip = clientIp(req, settings.collectClientIpHeader);
    const wait = byAddress.take(ip);
    if (wait) {
      req.resume();
      req.on('end', () => sendError(res, limited('client address', wait)));
      return;
    }
    if (!acceptsType(req.headers['content-type'] ?? '')) {
      req.resume();
      return sendError(res, BAD_TYPE);
    }
    readBody(req, res, (text) => {
      accept(req, ip, text).then(
        () => {
          res.writeHead(202, { ...CORS, ...NO_STORE, 'Request-Id': crypto.randomUUID(), 'Content-Length': 0 });
          res.end();
        },
        (err: unknown) => {
          if (err instanceof ServiceError) return sendError(res, err);
          logger.error({ err }, 'collection: unexpected error');
          sendError(res, INTERNAL);
        },
      );
    });
  }

  return {
    handle(req, res) {
      const url = req.url ?? '';
      const q = url.indexOf('?');
      const path = q === -1 ? url : url.slice(0, q);
      if (path === '/v1/track') {
        if (req.method === 'POST') track(req, res);
        else if (req.method === 'OPTIONS') preflight(res);
        else return false;
        return true;
      }
      if (path === '/v1/track.js' && (req.method === 'GET' || req.method === 'HEAD')) {
        tracker(req, res);
        return true;
      }
      return false;
    },
    flush: () => queue.flush(),
    close: () => queue.close(),
    get queued() {
      return queue.length;
    },
    get refused() {
      return queue.refused;
    },
  };
}
