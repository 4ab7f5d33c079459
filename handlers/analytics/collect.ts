/**
 * The public collection path (`POST /v1/track`, its CORS preflight, `GET /v1/track.js`), on plain
 * node:http in front of the express app: browsers send one event per request, so this path does the
 * least work it can. Per request: parse and validate the body, look the collect key up in a cache,
 * hash the visitor under the cached day salt, parse the User-Agent (cached), queue the event. Queued
 * events are written in batches through ingestEvents (one transaction per batch, sessions and
 * rollups included), every `collectFlushIntervalMs` or as soon as a batch is full.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Worker } from 'node:worker_threads';
import { Ajv } from 'ajv';
import Bowser from 'bowser';
import { isbot } from 'isbot';
import type { Logger } from 'pino';
import type { Database } from '../../db/database.ts';
import { lastEventOfVisitors, type NewAnalyticsEvent } from '../../db/queries/analytics.ts';
import { bundleByCollectKey, type CollectBundle, daySalt, existingSalt } from '../../db/queries/collection.ts';
import { document } from '../../generated/document.ts';
import type { components } from '../../generated/openapi.ts';
import { type AnalyticsEventInput, dayOf, eventProblem, ingestEvents, normalizeEvent, referrerHost, SESSION_GAP_MS } from './ingest.ts';
import type { Clock } from '../../server/clock.ts';
import type { ServiceConfig } from '../../server/config.ts';
import { invalidInput, invalidJson, notFound, ServiceError } from '../../server/errors.ts';
import { describe, textProblem } from '../../server/validation.ts';
import type { WriterReply, WriterRequest } from './ingestWorker.ts';

export const MAX_BODY_BYTES = 8 * 1024;
const KEY_TTL_MS = 60_000;
const UNKNOWN_KEY_TTL_MS = 10_000;
const CACHE_MAX = 10_000;
/** Batches handed to the writer at once (see drain). */
const WRITES_IN_FLIGHT = 2;

/** ISO 3166-1 alpha-2 codes (officially assigned). */
const COUNTRIES = new Set(
  ('AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR ' +
    'CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ' +
    'ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ ' +
    'MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI ' +
    'SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW').split(' '),
);

/** The request body as the document defines it (components/schemas/TrackEvent.yaml). */
type TrackBody = components['schemas']['TrackEvent'];

const validateBody = new Ajv({ strict: false, allErrors: false, coerceTypes: false }).compile<TrackBody>(
  (document.components.schemas as Record<string, object>).TrackEvent!,
);

const bodyProblem = () => {
  const e = validateBody.errors?.[0];
  return e ? describe('body', e) : 'body is invalid';
};

interface Agent {
  bot: boolean;
  device?: string;
  browser?: string;
  os?: string;
}

const DEVICES = new Set(['desktop', 'mobile', 'tablet', 'tv']);

function parseAgent(ua: string): Agent {
  if (!ua.trim() || isbot(ua)) return { bot: true };
  const p = Bowser.parse(ua);
  const agent: Agent = { bot: false };
  if (p.platform.type && DEVICES.has(p.platform.type)) agent.device = p.platform.type;
  if (p.browser.name) agent.browser = p.browser.name;
  if (p.os.name) agent.os = p.os.name;
  return agent;
}

const CORS = { 'Access-Control-Allow-Origin': '*' } as const;
// Answers that do not depend on the request are built once: an Error costs a stack capture, which
// showed as the largest single cost of the collection thread when one was made per request.
const TOO_LARGE = new ServiceError(413, 'invalid_input', `The body is larger than ${MAX_BODY_BYTES / 1024} KB.`);
/** A batch that takes this long to write is logged (the queue grows meanwhile). */
const SLOW_BATCH_MS = 2000;
const QUEUE_FULL = new ServiceError(503, 'unavailable', 'Too many events are waiting to be written; retry after 1 s.', { 'Retry-After': '1' });

/** Writes one batch of events (sessions and rollups included) in one transaction. */
interface BatchWriter {
  write(events: NewAnalyticsEvent[]): Promise<void>;
  close(): Promise<void>;
}

/** Writes on this thread, on the service's own connection. */
function inlineWriter(db: Database): BatchWriter {
  return { write: async (events) => void (await ingestEvents(db, events)), close: async () => {} };
}

/**
 * Writes on a worker thread (ingestWorker.ts) with its own connection: the HTTP thread keeps
 * answering while a batch is written, and the sessionization runs on another core. A thread that
 * dies fails its pending batches (they stay queued) and is started again for the next one.
 */
function threadWriter(databaseUrl: string, logger: Logger): BatchWriter {
  let worker: Worker | null = null;
  let next = 0;
  const pending = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();
  const failAll = (err: Error) => {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  const start = () => {
    const w = new Worker(new URL('./ingestWorker.boot.mjs', import.meta.url), { workerData: { databaseUrl } });
    w.on('message', (reply: WriterReply) => {
      const p = pending.get(reply.id);
      pending.delete(reply.id);
      if (!p) return;
      if (reply.ok) p.resolve();
      else p.reject(Object.assign(new Error(reply.message), { stack: reply.stack }));
    });
    w.on('error', (err) => logger.error({ err }, 'collection: the writer thread failed'));
    w.on('exit', (code) => {
      if (worker === w) worker = null;
      failAll(new Error(`the collection writer thread exited (code ${code})`));
    });
    return w;
  };
  return {
    write(events) {
      worker ??= start();
      const id = ++next;
      const done = new Promise<void>((resolve, reject) => pending.set(id, { resolve, reject }));
      worker.postMessage({ id, events } satisfies WriterRequest);
      return done;
    },
    async close() {
      const w = worker;
      if (!w) return;
      worker = null;
      const exited = new Promise((resolve) => w.once('exit', resolve));
      w.postMessage({ close: true } satisfies WriterRequest);
      await exited;
    },
  };
}

export interface CollectorDeps {
  db: Database;
  clock: Clock;
  config: ServiceConfig;
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

/** The collection endpoints of one process. */
export function createCollector({ db, clock, config, logger }: CollectorDeps): Collector {
  const script = fs.readFileSync(new URL('./tracker/track.js', import.meta.url));
  const scriptEtag = `"${crypto.createHash('sha256').update(script).digest('base64url').slice(0, 22)}"`;

  // --- caches -------------------------------------------------------------------------------
  const keys = new Map<string, { bundle: CollectBundle | null; until: number } | Promise<CollectBundle | null>>();
  async function bundleOf(key: string): Promise<CollectBundle | null> {
    const hit = keys.get(key);
    if (hit instanceof Promise) return hit;
    if (hit && hit.until > clock.now()) return hit.bundle;
    if (keys.size >= CACHE_MAX) keys.clear();
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

  const agents = new Map<string, Agent>();
  function agentOf(ua: string): Agent {
    let agent = agents.get(ua);
    if (!agent) {
      if (agents.size >= CACHE_MAX) agents.clear();
      agents.set(ua, (agent = parseAgent(ua)));
    }
    return agent;
  }

  const salts = new Map<number, Promise<string | null>>();
  function saltOf(day: number, create: boolean): Promise<string | null> {
    let salt = salts.get(day);
    if (!salt) {
      for (const d of salts.keys()) if (d < day - 1) salts.delete(d);
      salt = create ? daySalt(db.sql, day, crypto.randomBytes(32).toString('hex'), clock.now()) : existingSalt(db.sql, day);
      salts.set(day, salt);
      salt.catch(() => salts.delete(day));
    }
    return salt;
  }

  const hash = (salt: string, bundleId: string, ip: string, ua: string) =>
    crypto.createHmac('sha256', salt).update(`${bundleId}\n${ip}\n${ua}`).digest('base64url').slice(0, 22);

  // Today's id -> the id under yesterday's salt when the visitor's session continues across midnight,
  // or null once it is known not to (then it never will: yesterday's id only gets events through here).
  let carryDay = -1;
  const carried = new Map<string, { id: string; lastTs: number } | null>();
  /** Events whose visitor is decided when their batch is written: today's id, or yesterday's if still active. */
  const undecided = new WeakMap<NewAnalyticsEvent, { today: string; previous: string }>();

  /** The visitor id when it is known now; else today's id with yesterday's as the candidate, decided in decide(). */
  async function visitorOf(bundleId: string, ip: string, ua: string, now: number): Promise<{ id: string; previous?: string }> {
    const day = dayOf(now);
    const today = hash((await saltOf(day, true))!, bundleId, ip, ua);
    if (carryDay !== day) {
      carried.clear();
      carryDay = day;
    }
    const known = carried.get(today);
    if (known === null) return { id: today };
    if (known && now - known.lastTs < SESSION_GAP_MS) {
      known.lastTs = now;
      return { id: known.id };
    }
    const yesterdaySalt = await saltOf(day - 1, false);
    return yesterdaySalt ? { id: today, previous: hash(yesterdaySalt, bundleId, ip, ua) } : { id: today };
  }

  /**
   * Decides the visitor of a batch's undecided events, in order, with one set-based read: an
   * event keeps yesterday's id when that id has an event on the site less than 30 minutes earlier
   * (stored, queued, or earlier in this batch). No database read per request.
   */
  async function decide(batch: readonly NewAnalyticsEvent[]): Promise<void> {
    const open = batch.filter((e) => undecided.has(e));
    if (!open.length) return;
    const pairs = new Map<string, readonly [string, string]>();
    for (const e of open) {
      const previous = undecided.get(e)!.previous;
      pairs.set(`${e.bundle_id}\n${previous}`, [e.bundle_id, previous]);
    }
    const latest = new Map<string, number>();
    for (const row of await lastEventOfVisitors(db.sql, [...pairs.values()])) {
      if (row.last !== null) latest.set(`${row.bundle_id}\n${row.visitor}`, Number(row.last));
    }
    for (const e of open) {
      const { today, previous } = undecided.get(e)!;
      undecided.delete(e);
      let id = today;
      const known = carried.get(today);
      if (known && e.ts - known.lastTs < SESSION_GAP_MS) {
        known.lastTs = e.ts;
        id = known.id;
      } else if (known !== null) {
        const k = `${e.bundle_id}\n${previous}`;
        const last = Math.max(latest.get(k) ?? -Infinity, unwritten.get(k)?.lastTs ?? -Infinity);
        const active = last >= e.ts - SESSION_GAP_MS;
        if (carried.size >= 200_000) carried.clear();
        carried.set(today, active ? { id: previous, lastTs: e.ts } : null);
        if (active) id = previous;
      }
      if (id !== e.visitor) {
        forget(e);
        e.visitor = id;
        remember(e);
      }
    }
  }

  // --- the queue ----------------------------------------------------------------------------
  const writer = config.collectWriter === 'thread' ? threadWriter(config.databaseUrl, logger) : inlineWriter(db);
  let queue: NewAnalyticsEvent[] = [];
  let running: Promise<void> | null = null;
  // Queued or being written, per site and visitor: what the database cannot answer yet.
  const unwritten = new Map<string, { n: number; lastTs: number }>();
  function remember(e: NewAnalyticsEvent): void {
    const k = `${e.bundle_id}\n${e.visitor}`;
    const u = unwritten.get(k);
    if (u) {
      u.n++;
      if (e.ts > u.lastTs) u.lastTs = e.ts;
    } else unwritten.set(k, { n: 1, lastTs: e.ts });
  }
  function forget(e: NewAnalyticsEvent): void {
    const k = `${e.bundle_id}\n${e.visitor}`;
    const u = unwritten.get(k);
    if (u && --u.n === 0) unwritten.delete(k);
  }

  /**
   * Writes a batch, then more while full batches are waiting (`all`: until the queue is empty), with
   * up to WRITES_IN_FLIGHT batches handed to the writer at once: while one batch's transaction waits
   * on the database, the next is prepared. Order stays exact: each batch takes the site's advisory
   * lock (PostgreSQL) or the write lock (SQLite) and then reads what the earlier batch committed.
   */
  let deciding: Promise<void> = Promise.resolve();
  // While the queue is full: since when, and how many events were refused (logged when it ends).
  let shedding: { since: number; refused: number } | null = null;
  let refusedTotal = 0;
  async function drain(all: boolean): Promise<void> {
    const inFlight = new Set<Promise<void>>();
    let failure: unknown = null;
    let taken = 0;
    for (;;) {
      const more = failure === null && queue.length > 0 && (taken === 0 || all || queue.length >= config.collectBatchSize);
      if (!more || inFlight.size >= WRITES_IN_FLIGHT) {
        if (!inFlight.size) break;
        await Promise.race(inFlight);
        continue;
      }
      const batch = queue.slice(0, config.collectBatchSize);
      queue = queue.slice(batch.length);
      taken++;
      // Decisions run one batch at a time, in queue order (the midnight carry-over reads what the
      // earlier batch decided); a batch that arrives at the writer out of order is still exact.
      let started = 0;
      const decided = (deciding = deciding.catch(() => {}).then(() => decide(batch)));
      const write = decided
        .then(() => {
          started = performance.now();
          return writer.write(batch);
        })
        .then(
          () => {
            for (const e of batch) forget(e);
            const ms = Math.round(performance.now() - started);
            if (ms >= SLOW_BATCH_MS) logger.warn({ events: batch.length, ms, queued: queue.length }, 'collection: a batch was slow to write');
            if (shedding && queue.length < config.collectBufferMax) {
              logger.warn({ refused: shedding.refused, ms: Math.round(performance.now() - shedding.since) }, 'collection: taking events again');
              shedding = null;
            }
          },
          (err: unknown) => {
            queue = batch.concat(queue); // retried by the next flush, first in line
            logger.error({ err, events: batch.length, queued: queue.length }, 'collection: storing a batch failed; it stays queued and is retried');
            failure ??= err;
          },
        )
        .finally(() => inFlight.delete(write));
      inFlight.add(write);
      // SQLite writes synchronously (inline writer): let waiting requests in between two batches.
      // A partial batch waits for the next tick: small batches cost more per event.
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (failure !== null) throw failure;
  }

  function kick(all = false): Promise<void> {
    if (!running) running = drain(all).finally(() => (running = null));
    return running;
  }

  async function flush(): Promise<void> {
    for (;;) {
      if (running) {
        await running.catch(() => {});
        continue;
      }
      if (!queue.length) return;
      await kick(true);
    }
  }

  const timer = config.collectFlushIntervalMs > 0
    ? setInterval(() => {
        if (queue.length && !running) kick().catch(() => {});
      }, config.collectFlushIntervalMs)
    : null;
  timer?.unref();

  // --- HTTP ---------------------------------------------------------------------------------
  function sendError(res: ServerResponse, e: ServiceError, close = false): void {
    const requestId = crypto.randomUUID();
    const body = JSON.stringify(e.bodyFor(requestId));
    res.writeHead(e.status, {
      ...CORS,
      ...e.headers,
      'Request-Id': requestId,
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(body),
      ...(close ? { Connection: 'close' } : {}),
    });
    res.end(body);
  }

  function clientIp(req: IncomingMessage): string {
    const header = config.collectClientIpHeader ? req.headers[config.collectClientIpHeader] : undefined;
    const raw = (Array.isArray(header) ? header[0] : header)?.split(',')[0]?.trim() || req.socket.remoteAddress || '';
    return raw.startsWith('::ffff:') ? raw.slice(7) : raw;
  }

  function countryOf(req: IncomingMessage): string | undefined {
    if (!config.collectCountryHeader) return undefined;
    const header = req.headers[config.collectCountryHeader];
    const code = (Array.isArray(header) ? header[0] : header)?.trim().toUpperCase();
    return code && COUNTRIES.has(code) ? code : undefined;
  }

  async function accept(req: IncomingMessage, text: string): Promise<void> {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw invalidJson('The body is not valid JSON.');
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidJson('The body must be a JSON object.');
    if (!validateBody(value)) throw invalidInput(bodyProblem());
    const unfit = textProblem('body', value);
    if (unfit) throw invalidInput(unfit);
    const body = value;
    if (body.type === 'engagement' && body.engaged_ms === undefined) throw invalidInput('body.engaged_ms is required for an engagement');
    if (body.type === 'pageview' && body.engaged_ms !== undefined) throw invalidInput('body.engaged_ms is only for an engagement');
    let page: URL;
    try {
      page = new URL(body.url);
    } catch {
      throw invalidInput('body.url must be an absolute http(s) URL');
    }
    if (page.protocol !== 'http:' && page.protocol !== 'https:') throw invalidInput('body.url must be an absolute http(s) URL');

    const input: AnalyticsEventInput = { type: body.type, ts: 0, visitor: '-', path: page.pathname };
    const referrer = body.referrer?.trim();
    if (referrer && referrerHost(referrer) !== page.hostname.toLowerCase()) input.referrer = referrer;
    const source = page.searchParams.get('utm_source')?.trim();
    if (source) input.utm_source = source;
    const campaign = page.searchParams.get('utm_campaign')?.trim();
    if (campaign) input.utm_campaign = campaign;
    if (body.engaged_ms !== undefined) input.engaged_ms = body.engaged_ms;
    const problem = eventProblem(input);
    if (problem) throw invalidInput(`the event derived from the body is invalid: ${problem}`);

    const bundle = await bundleOf(body.key);
    if (!bundle) throw notFound('No site has this collect key.');
    const ua = req.headers['user-agent'] ?? '';
    const agent = agentOf(ua);
    if (agent.bot) return;
    const now = clock.now();
    input.ts = now;
    const visitor = await visitorOf(bundle.id, clientIp(req), ua, now);
    input.visitor = visitor.id;
    const country = countryOf(req);
    if (country) input.country = country;
    if (agent.device) input.device = agent.device;
    if (agent.browser) input.browser = agent.browser;
    if (agent.os) input.os = agent.os;
    const event = normalizeEvent(bundle.id, input);
    if (visitor.previous) undecided.set(event, { today: visitor.id, previous: visitor.previous });
    queue.push(event);
    remember(event);
    if (queue.length >= config.collectBatchSize && !running) kick().catch(() => {});
  }

  function track(req: IncomingMessage, res: ServerResponse): void {
    // A full queue refuses before anything else is done: under overload the refusals must cost
    // next to nothing, or they take the CPU the writer needs to catch up.
    if (queue.length >= config.collectBufferMax) {
      if (!shedding) {
        shedding = { since: performance.now(), refused: 0 };
        logger.warn({ queued: queue.length }, 'collection: the queue is full; refusing events (503) until the writer catches up');
      }
      shedding.refused++;
      refusedTotal++;
      req.resume();
      req.on('end', () => sendError(res, QUEUE_FULL));
      return;
    }
    const type = req.headers['content-type'] ?? '';
    if (!/^\s*(application\/json|text\/plain)\s*(;|$)/i.test(type) || (/charset/i.test(type) && !/charset\s*=\s*"?utf-8"?\s*(;|$)/i.test(type))) {
      req.resume();
      return sendError(res, invalidJson('Content-Type must be application/json or text/plain (UTF-8).'));
    }
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
      if (refused) return;
      accept(req, Buffer.concat(chunks).toString('utf8')).then(
        () => {
          res.writeHead(202, { ...CORS, 'Content-Length': 0 });
          res.end();
        },
        (err: unknown) => {
          if (err instanceof ServiceError) return sendError(res, err);
          logger.error({ err }, 'collection: unexpected error');
          sendError(res, new ServiceError(500, 'internal_error', 'Internal server error.'));
        },
      );
    });
  }

  function preflight(res: ServerResponse): void {
    res.writeHead(204, {
      ...CORS,
      'Access-Control-Allow-Methods': 'POST, OPTIONS',
      'Access-Control-Allow-Headers': 'Content-Type',
      'Access-Control-Max-Age': '86400',
      'Content-Length': 0,
    });
    res.end();
  }

  function tracker(req: IncomingMessage, res: ServerResponse): void {
    const headers = { ...CORS, 'Cross-Origin-Resource-Policy': 'cross-origin', 'Cache-Control': 'public, max-age=3600', ETag: scriptEtag };
    if (req.headers['if-none-match'] === scriptEtag) {
      res.writeHead(304, headers);
      return void res.end();
    }
    res.writeHead(200, { ...headers, 'Content-Type': 'text/javascript; charset=utf-8', 'Content-Length': script.length });
    res.end(req.method === 'HEAD' ? undefined : script);
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
    flush,
    async close() {
      if (timer) clearInterval(timer);
      try {
        await flush();
      } finally {
        await writer.close();
      }
    },
    get queued() {
      return queue.length;
    },
    get refused() {
      return refusedTotal;
    },
  };
}
