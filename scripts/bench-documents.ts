/**
 * `npm run bench:documents`: the documents path's costs, each measured through real HTTP against the
 * service running in this process (its real handlers, blob store and database), on SQLite (a fresh
 * file) and, when BENCH_POSTGRES_URL, DATABASE_URL or TEST_POSTGRES_URL names one, on PostgreSQL (schema
 * `bench_documents`, reset first).
 *
 * Measurements (the `measurements` list; another one is one more entry, e.g. the signed archive):
 *  - upload: a ~20 MB PDF (40 pages, each of the first 20 drawing an incompressible 1 MB image) sent as
 *    documents.CreateUpload, GetUploadPart and a raw PUT per 5 MiB part (the 4 parts in parallel, as
 *    clients do), then documents.CompleteUpload (joins the parts, checks the SHA-256, scans: strict PDF
 *    parse, page count; no ClamAV). The time is from CreateUpload to CompleteUpload's answer; the aim is
 *    under 2 s. BENCH_RUNS (default 5) runs per database; the median is reported.
 *  - scan: the same 20 MB PDF through the upload scan alone (inspectPdf: a copy to a PDF checking
 *    thread, the strict parse under the parse budget, the page and active-content checks); aim 100 ms.
 *  - bomb: two decompression bombs of 0.8 MB at once (a catalog in an object stream inflating to
 *    768 MiB, test/documents/pdfs.ts bombPdf), each uploaded and completed, while /healthz is asked
 *    every 50 ms: the time until both are refused (aim under 10 s), /healthz's slowest answer meanwhile
 *    (aim under 1 s) and the process's peak RSS (the checking threads included; aim under 1 GiB).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import { createService, migrations } from '../app.ts';
import { type Database, openDatabase } from '../db/database.ts';
import { createClient, type ServiceClient } from '../generated/client.ts';
import { applyWorkspace } from '../server/admin.ts';
import { systemClock } from '../server/clock.ts';
import { loadConfig } from '../server/config.ts';
import { inspectPdf } from '../handlers/documents/pdf.ts';
import { bombPdf, makePdf, sha256 } from '../test/documents/pdfs.ts';
import { archiveMeasurement } from './bench-archive.ts';
import { fmt, log, positive, resetPostgres, runMain, table } from './bench-support.ts';

export type BenchDatabase = 'sqlite' | 'postgres';

/** What every measurement gets: a running service on one database and a key of a fresh workspace. */
export interface BenchContext {
  database: BenchDatabase;
  /** The service's origin (http://127.0.0.1:PORT); its PUBLIC_URL too. */
  origin: string;
  db: Database;
  /** A key with every documents and signing operation, acting for no member. */
  api: ServiceClient;
  /** The same key, with `Service-Act-As` the workspace's owner. */
  owner: ServiceClient;
  workspaceId: string;
  ownerId: string;
}

export interface MeasurementResult {
  /** Milliseconds of each run. */
  runs: number[];
  /** A line about what was measured (sizes, pages). */
  detail: string;
}

export interface Measurement {
  name: string;
  /** The aim in milliseconds (the median is compared with it). */
  aimMs: number;
  run(ctx: BenchContext, runs: number): Promise<MeasurementResult>;
}

const MiB = 1024 * 1024;
const PART = 5 * MiB;

/** Sends one part's bytes to the URL GetUploadPart answered. */
async function putPart(url: string, bytes: Uint8Array): Promise<void> {
  const res = await fetch(url, { method: 'PUT', body: bytes as unknown as BodyInit, headers: { 'Content-Type': 'application/octet-stream' } });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`PUT ${res.status}: ${text.slice(0, 300)}`);
}

/** One upload of `bytes` in parts of `partSize`, the parts in parallel; answers the file. */
export async function uploadOnce(api: ServiceClient, bytes: Buffer, partSize = PART) {
  const created = await api.documents.CreateUpload({ filename: 'bench.pdf', content_type: 'application/pdf', size: bytes.length, part_size: partSize });
  if (!created.data) throw new Error(`CreateUpload: ${JSON.stringify(created.error)}`);
  const u = created.data;
  await Promise.all(
    u.parts.map(async (p) => {
      const part = await api.documents.GetUploadPart({ upload_id: u.upload_id, part_number: p.part_number });
      if (!part.data) throw new Error(`GetUploadPart: ${JSON.stringify(part.error)}`);
      await putPart(part.data.url, bytes.subarray((p.part_number - 1) * u.part_size, p.part_number * u.part_size));
    }),
  );
  const done = await api.documents.CompleteUpload({ upload_id: u.upload_id });
  if (!done.data) throw new Error(`CompleteUpload: ${JSON.stringify(done.error)}`);
  return { upload: u, file: done.data };
}

export const uploadMeasurement: Measurement = {
  name: 'upload 20 MB PDF in 5 MiB parts, complete and scan',
  aimMs: 2000,
  async run(ctx, runs) {
    const bytes = await makePdf(40, { payloadBytes: 19_950_000, seed: 'bench' });
    const times: number[] = [];
    let parts = 0;
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      const { upload, file } = await uploadOnce(ctx.api, bytes);
      times.push(performance.now() - started);
      parts = upload.part_count;
      if (file.sha256 !== sha256(bytes) || file.size !== bytes.length) throw new Error('the stored file is not the uploaded bytes');
    }
    return { runs: times, detail: `${bytes.length} bytes, 40 pages, ${parts} parts of 5 MiB (the last ${bytes.length - (parts - 1) * PART} bytes), no ClamAV` };
  },
};

export const scanMeasurement: Measurement = {
  name: 'scan a 20 MB PDF (checking thread, parse budget, active content)',
  aimMs: 100,
  async run(_ctx, runs) {
    const bytes = await makePdf(40, { payloadBytes: 19_950_000, seed: 'bench' });
    const times: number[] = [];
    for (let i = 0; i < runs + 1; i++) {
      const started = performance.now();
      const out = await inspectPdf(bytes, { maxBytes: 50 * MiB, maxPages: 500 });
      if (!out.ok) throw new Error(`the scan refused the bench PDF: ${out.reason}`);
      // The first run starts the checking thread; it is reported apart.
      times.push(performance.now() - started);
    }
    const [first, ...rest] = times;
    return { runs: rest, detail: `${bytes.length} bytes, 40 pages; the first scan (starts a checking thread) ${fmt(first!, 0)} ms` };
  },
};

/** Two bombs uploaded at once, /healthz polled meanwhile, the process's RSS sampled (the checking threads are in it). */
export const bombMeasurement: Measurement = {
  name: 'two 0.8 MB decompression bombs at once (768 MiB each) refused',
  aimMs: 10_000,
  async run(ctx, runs) {
    const bomb = bombPdf(768);
    const times: number[] = [];
    let slowestHealth = 0;
    let peakRss = process.memoryUsage().rss;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 10);
    try {
      for (let i = 0; i < runs; i++) {
        let done = false;
        const health = (async () => {
          while (!done) {
            const started = performance.now();
            const res = await fetch(`${ctx.origin}/healthz`);
            await res.arrayBuffer();
            slowestHealth = Math.max(slowestHealth, performance.now() - started);
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        })();
        const started = performance.now();
        const outcomes = await Promise.all([0, 1].map(() => uploadOnce(ctx.api, bomb).then(() => 'accepted', (err: Error) => err.message)));
        times.push(performance.now() - started);
        done = true;
        await health;
        for (const o of outcomes) if (!/invalid_input.*too large to check/.test(o)) throw new Error(`a bomb was not refused as too large: ${o}`);
      }
    } finally {
      clearInterval(sampler);
    }
    const rssMiB = peakRss / MiB;
    return {
      runs: times,
      detail: `${bomb.length} bytes each; slowest /healthz meanwhile ${fmt(slowestHealth, 0)} ms (aim < 1000: ${slowestHealth < 1000 ? 'ok' : 'MISS'}); peak RSS ${fmt(rssMiB, 0)} MiB (aim < 1024: ${rssMiB < 1024 ? 'ok' : 'MISS'})`,
    };
  },
};

/** The measurements, in order; another is one more entry (helpers append theirs with `measurements.push`). */
export const measurements: Measurement[] = [uploadMeasurement, scanMeasurement, bombMeasurement, archiveMeasurement];

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Starts the service in this process on `databaseUrl`, runs every measurement, stops it. */
async function onDatabase(database: BenchDatabase, databaseUrl: string, runs: number) {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const config = { ...loadConfig({ PORT: String(port), PUBLIC_URL: origin, DATABASE_URL: databaseUrl }), rateLimitPerSecond: 100_000, rateLimitBurst: 100_000 };
  const db = openDatabase(databaseUrl);
  await db.migrate(migrations);
  const service = createService({ db, clock: systemClock, config, logger: pino({ level: 'warn' }) });
  const server = http.createServer(service.handler);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  try {
    const ws = await applyWorkspace(db, systemClock, {
      workspace: { name: `Bench documents ${crypto.randomUUID().slice(0, 8)}` },
      members: { olga: { name: 'Olga Owner', email: 'olga@bench.test', role: 'owner' } },
      keys: { bench: { name: 'Bench', operations: ['documents.*', 'signing.*'], delegation: 'all' } },
    });
    const secret = ws.keys.bench!.secret;
    const ctx: BenchContext = {
      database,
      origin,
      db,
      api: createClient({ baseUrl: `${origin}/v1`, apiKey: secret }),
      owner: createClient({ baseUrl: `${origin}/v1`, apiKey: secret, actAs: ws.members.olga! }),
      workspaceId: ws.workspace_id,
      ownerId: ws.members.olga!,
    };
    const out: Array<{ m: Measurement; result: MeasurementResult }> = [];
    for (const m of measurements) {
      log(`${database}: ${m.name} (${runs} runs)`);
      out.push({ m, result: await m.run(ctx, runs) });
    }
    return out;
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await service.closeEndpoints();
    await db.close();
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function main(): Promise<number> {
  const runs = positive('BENCH_RUNS', 5);
  const targets: Array<[BenchDatabase, string]> = [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-bench-documents-'));
  targets.push(['sqlite', `sqlite:${path.join(dir, 'documents.sqlite')}`]);
  const pgUrl = process.env.BENCH_POSTGRES_URL || process.env.TEST_POSTGRES_URL || (process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : '');
  if (pgUrl) {
    const url = new URL(pgUrl);
    url.searchParams.set('schema', 'bench_documents');
    await resetPostgres(url.toString());
    targets.push(['postgres', url.toString()]);
  } else log('PostgreSQL not measured: set BENCH_POSTGRES_URL (or TEST_POSTGRES_URL / DATABASE_URL) to a PostgreSQL database');
  log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model ?? 'CPU'}, node ${process.version}`);
  const rows = [['database', 'measurement', 'median ms', 'min', 'max', 'aim', '']];
  let missed = 0;
  try {
    for (const [database, url] of targets) {
      for (const { m, result } of await onDatabase(database, url, runs)) {
        const mid = median(result.runs);
        if (mid >= m.aimMs) missed++;
        rows.push([database, m.name, fmt(mid, 0), fmt(Math.min(...result.runs), 0), fmt(Math.max(...result.runs), 0), `< ${m.aimMs}`, mid < m.aimMs ? 'ok' : 'MISS']);
        log(`${database}: ${m.name}: ${result.detail}; runs ${result.runs.map((r) => fmt(r, 0)).join(', ')} ms`);
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(table(rows));
  return missed ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) runMain(main);
