/**
 * The signed archive's cost: a 100-page PDF (BENCH_ARCHIVE_PAGES) with two signers, archived as the
 * `signing.archive` job does it (handlers/signing/archive/archiveJob.ts: read the original from the blob store,
 * evidence pages, one PAdES seal, store the archive and register it), on SQLite in a temporary folder,
 * BENCH_ARCHIVE_RUNS times (default 5) after one warm-up run (the warm-up also makes the installation's
 * RSA-3072 certificate, once per installation, and is reported apart). With SIGNING_TSA_URL set, each
 * seal also fetches an RFC 3161 timestamp from it (the network round trip counts).
 *
 * Run alone with `npx tsx scripts/bench-archive.ts` (SQLite), or as one measurement of
 * `npm run bench:documents` (`archiveMeasurement`, on each of its databases, PUBLIC_URL its origin).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import { migrations } from '../app.ts';
import { type Database, openDatabase } from '../db/database.ts';
import { createFile, documentFilesService } from '../handlers/documents/files.ts';
import { storedPdfChecks } from '../handlers/documents/pdf.ts';
import { documentFiles } from '../handlers/interfaces/documentFiles.ts';
import { archiveRequest } from '../handlers/signing/archive/archiveJob.ts';
import { sealSettingsFromEnv } from '../handlers/signing/archive/sealSettings.ts';
import { insertRecipient, insertRequest } from '../handlers/signing/queries.ts';
import { applyWorkspace } from '../server/admin.ts';
import { systemClock } from '../server/clock.ts';
import { loadConfig } from '../server/config.ts';
import { newId } from '../server/ids.ts';
import type { ModuleDeps } from '../server/module.ts';
import { provide, ServiceRegistry } from '../server/services.ts';
import { createBlobStore } from '../server/storage.ts';
import type { Measurement } from './bench-documents.ts';

export interface ArchiveBenchResult {
  pages: number;
  originalBytes: number;
  archiveBytes: number;
  archivePages: number;
  timestamped: boolean;
  /** The first archive of the installation, which also makes its certificate (ms). */
  firstMs: number;
  runs: Array<{ totalMs: number; buildMs: number; sealMs: number; storeMs: number }>;
  medianMs: number;
  maxMs: number;
}

async function contract(pages: number): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (let i = 1; i <= pages; i++) {
    const page = doc.addPage([595, 842]);
    page.drawText(`Master services agreement, page ${i} of ${pages}`, { x: 56, y: 780, size: 16, font });
    for (let line = 0; line < 42; line++) page.drawText(`${i}.${line + 1} The supplier shall deliver the services set out in schedule ${line + 1} with due care.`, { x: 56, y: 745 - line * 16, size: 9.5, font });
  }
  return doc.save();
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Archives a `pages`-page PDF with two signers `runs` times in `workspaceId` of `db` (see the file comment). */
export async function archiveRuns(
  db: Database,
  workspaceId: string,
  options: { pages: number; runs: number; publicUrl: string; env: Record<string, string | undefined> },
): Promise<ArchiveBenchResult> {
  const clock = systemClock;
  const config = { ...loadConfig({}), publicUrl: options.publicUrl };
  const storage = createBlobStore(db, clock, { backend: 'database' });
  // No job runner here: the "completed" mails the archive enqueues are not part of the measurement.
  const jobs = { enqueue: async () => true, committed: () => undefined };
  // The documents module's files, as the service provides them to signing.
  const services = new ServiceRegistry();
  services.add('documents', [provide(documentFiles, documentFilesService(storage, storedPdfChecks))]);
  const deps = { db, clock, storage, config, jobs, services, logger: pino({ level: 'silent' }) } as unknown as ModuleDeps<unknown>;
  const settings = sealSettingsFromEnv(options.env);
  const bytes = Buffer.from(await contract(options.pages));
  const blob = await storage.put(null, [bytes], { contentType: 'application/pdf' });
  const source = await createFile(
    db.sql,
    { workspaceId, ownerMemberId: null, createdByKeyId: null, filename: 'Master services agreement.pdf', contentType: 'application/pdf', size: blob.size, sha256: blob.sha256, pageCount: options.pages, blobId: blob.id, source: 'upload' },
    clock.now(),
  );

  /** A completed request over the file, signed by two people (rows as the signer's page leaves them). */
  async function completed(): Promise<string> {
    const id = newId('sr');
    const t = clock.now();
    await insertRequest(db.sql, {
      id, workspace_id: workspaceId, title: 'Master services agreement 2027', message: null, signature_method: 'standard', status: 'completed',
      source_file_id: source.id, source_sha256: source.sha256, private: false, owner_member_id: null, created_by_key_id: null, deadline_at: t + 86_400_000,
      reminder_interval_days: null, created_at: t - 7_200_000, updated_at: t, completed_at: t, cancelled_at: null, cancel_reason: null, expired_at: null,
      archive_file_id: null, archive_sha256: null, archive_error: null,
    });
    const signers = [
      ['Anna Lindqvist', 'anna@customer.test', '203.0.113.7', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:132.0) Gecko/20100101 Firefox/132.0'],
      ['Omar Haddad', 'omar@supplier.test', '198.51.100.23', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1'],
    ] as const;
    for (const [i, [name, email, ip, ua]] of signers.entries()) {
      await insertRecipient(db.sql, {
        id: newId('rcp'), request_id: id, position: i, signing_order: 1, role: 'signer', email, name, status: 'signed', invitation_status: 'sent', invitation_error: null, invitation_attempts: 1,
        invited_at: t - 7_000_000, last_reminded_at: null, auto_reminders: 0, opened_at: t - 3_600_000 * (2 - i), signed_at: t - 3_000_000 * (1 - i), declined_at: null,
        decline_reason: null, typed_name: name, ip, user_agent: ua, provider_evidence: null,
      });
    }
    return id;
  }

  let started = performance.now();
  const first = await archiveRequest(deps, settings, { requestId: await completed(), workspaceId });
  const firstMs = performance.now() - started;
  const results: ArchiveBenchResult['runs'] = [];
  let last = first;
  for (let i = 0; i < options.runs; i++) {
    const requestId = await completed();
    started = performance.now();
    last = await archiveRequest(deps, settings, { requestId, workspaceId });
    const totalMs = performance.now() - started;
    if (last.outcome !== 'built' || !last.ms) throw new Error(`the archive was not built (${last.outcome})`);
    results.push({ totalMs, buildMs: last.ms.build, sealMs: last.ms.seal, storeMs: last.ms.store });
  }
  const archive = await storage.stat((await db.sql.one<{ blob_id: string }>(`SELECT blob_id FROM document_files WHERE id = ?`, [last.fileId]))!.blob_id);
  const totals = results.map((r) => r.totalMs);
  return {
    pages: options.pages,
    originalBytes: bytes.length,
    archiveBytes: archive!.size,
    archivePages: last.pages!,
    timestamped: Boolean(settings.tsaUrl),
    firstMs,
    runs: results,
    medianMs: median(totals),
    maxMs: Math.max(...totals),
  };
}

/** Alone: SQLite in a temporary folder (BENCH_ARCHIVE_PAGES, BENCH_ARCHIVE_RUNS, SIGNING_TSA_URL from the environment). */
export async function benchArchive(options: { pages?: number; runs?: number; env?: Record<string, string | undefined> } = {}): Promise<ArchiveBenchResult> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-archive-'));
  const db = openDatabase(`sqlite:${path.join(dir, 'bench.sqlite')}`);
  try {
    await db.migrate(migrations);
    const ws = await applyWorkspace(db, systemClock, { workspace: { name: 'Bench AB' }, members: { olga: { name: 'Olga Owner', email: 'olga@bench.test', role: 'owner' } } });
    return await archiveRuns(db, ws.workspace_id, {
      pages: options.pages ?? Number(process.env.BENCH_ARCHIVE_PAGES ?? 100),
      runs: options.runs ?? Number(process.env.BENCH_ARCHIVE_RUNS ?? 5),
      publicUrl: 'https://sign.acme.example',
      env: options.env ?? process.env,
    });
  } finally {
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** One measurement of `npm run bench:documents`: the archive of a 100-page PDF with two signers, on its database. */
export const archiveMeasurement: Measurement = {
  name: 'signed archive of a 100-page PDF, two signers (evidence pages, seal, store)',
  aimMs: 2000,
  async run(ctx, runs) {
    const r = await archiveRuns(ctx.db, ctx.workspaceId, { pages: 100, runs, publicUrl: ctx.origin, env: process.env });
    const mid = (pick: (x: ArchiveBenchResult['runs'][number]) => number) => median(r.runs.map(pick)).toFixed(0);
    return {
      runs: r.runs.map((x) => x.totalMs),
      detail:
        `${r.originalBytes} bytes -> ${r.archivePages} pages, ${r.archiveBytes} bytes, ${r.timestamped ? 'with' : 'without'} an RFC 3161 timestamp; ` +
        `median evidence ${mid((x) => x.buildMs)} ms, seal ${mid((x) => x.sealMs)} ms, store ${mid((x) => x.storeMs)} ms; ` +
        `the first archive (also makes the installation certificate) ${r.firstMs.toFixed(0)} ms`,
    };
  },
};

export function printArchiveBench(r: ArchiveBenchResult): void {
  const f = (ms: number) => `${ms.toFixed(0)} ms`;
  console.log(`\nSigned archive: ${r.pages}-page PDF (${(r.originalBytes / 1024).toFixed(0)} KiB), two signers, ${r.timestamped ? 'with' : 'without'} an RFC 3161 timestamp, SQLite`);
  console.log(`  archive: ${r.archivePages} pages, ${(r.archiveBytes / 1024).toFixed(0)} KiB`);
  console.log(`  first archive of the installation (also makes its RSA-3072 certificate): ${f(r.firstMs)}`);
  console.log('  run   total    evidence pages   seal   store + register');
  r.runs.forEach((x, i) => console.log(`  ${String(i + 1).padStart(3)}   ${f(x.totalMs).padStart(7)}   ${f(x.buildMs).padStart(8)}   ${f(x.sealMs).padStart(8)}   ${f(x.storeMs).padStart(8)}`));
  console.log(`  median ${f(r.medianMs)}, max ${f(r.maxMs)} (aim: under 2000 ms)`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  printArchiveBench(await benchArchive());
}
