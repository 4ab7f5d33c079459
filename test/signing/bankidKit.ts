/**
 * The shared setup of the bankid suites (test/signing/bankid-*.test.ts): the workspace, a sample PDF put
 * straight into storage, the signer's form posts, `pdfsig`, and `testProviderSuite(svc)`, which makes the
 * workspace and its file in a `before` of the calling suite and answers the request body and counters.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import { createFile, findFile } from '../../handlers/documents/files.ts';
import { createBlobStore } from '../../server/storage.ts';
import type { TestService } from '../support/service.ts';

export const run = promisify(execFile);
export const OUT = path.resolve('test-output');

export const spec = () => ({
  workspace: { name: 'Bankid Oy' },
  members: {
    olga: { name: 'Olga Owner', email: 'olga@bankid.test', role: 'owner' as const },
    ada: { name: 'Ada Member', email: 'ada@bankid.test', role: 'member' as const },
  },
  keys: {
    ci: { name: 'Contracts', operations: ['signing.*', 'documents.*'], delegation: ['olga', 'ada'] },
    other: { name: 'Second integration', operations: ['signing.*', 'documents.*'] },
  },
});

export async function samplePdf(pages = 2): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (let i = 1; i <= pages; i++) doc.addPage([595, 842]).drawText(`Supply agreement, page ${i} of ${pages}`, { x: 56, y: 780, size: 16, font });
  return doc.save();
}

/** A workspace file made directly in the store (the upload path has its own tests). */
export async function workspaceFile(svc: TestService, workspaceId: string, bytes: Uint8Array, filename = 'supply-agreement.pdf'): Promise<string> {
  const storage = createBlobStore(svc.db, svc.clock, { backend: 'database' });
  const blob = await storage.put(null, [Buffer.from(bytes)], { contentType: 'application/pdf' });
  const file = await createFile(
    svc.db.sql,
    { workspaceId, ownerMemberId: null, createdByKeyId: null, filename, contentType: 'application/pdf', size: blob.size, sha256: blob.sha256, pageCount: 2, blobId: blob.id, source: 'upload' },
    svc.clock.now(),
  );
  return file.id;
}

export async function fileBytes(svc: TestService, workspaceId: string, fileId: string): Promise<Buffer> {
  const file = await findFile(svc.db.sql, workspaceId, fileId);
  assert.ok(file, `file ${fileId}`);
  const storage = createBlobStore(svc.db, svc.clock, { backend: 'database' });
  const chunks: Buffer[] = [];
  for await (const c of await storage.get(file.blobId)) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

export const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
export let keySeq = 0;
export const idemKey = () => `bankid-test-${process.pid}-${++keySeq}`;

export async function requestSignatures(svc: TestService, secret: string, body: Record<string, unknown>, key = idemKey()) {
  return svc.post('signing.RequestFileSignatures', body, { Authorization: `Bearer ${secret}`, 'Idempotency-Key': key });
}

export const count = async (svc: TestService, sql: string, params: (string | number)[] = []) => Number((await svc.db.sql.one<{ n: number }>(sql, params))!.n);

/** A form post from the signer's page (same origin), without following the redirect. */
export async function form(svc: TestService, pathName: string, fields: Record<string, string> = {}): Promise<{ status: number; location: string; text: string }> {
  const res = await fetch(`${svc.origin}${pathName}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: svc.origin, 'User-Agent': 'bankid-test/1.0' },
    body: new URLSearchParams(fields).toString(),
  });
  return { status: res.status, location: res.headers.get('location') ?? '', text: await res.text() };
}

export async function pdfsig(file: string): Promise<string> {
  try {
    return (await run('pdfsig', [file], { env: { ...process.env, TZ: 'UTC' } })).stdout;
  } catch (err) {
    return (err as { stdout?: string }).stdout ?? '';
  }
}

/** The "bankid with the test provider" suite's workspace and file (a `before` in the calling suite) and its helpers. */
export function testProviderSuite(svc: () => TestService) {
  let ws: Awaited<ReturnType<TestService['apply']>>;
  let fileId: string;
  let original: Uint8Array;
  before(async () => {
    ws = await svc().apply(spec());
    original = await samplePdf();
    fileId = await workspaceFile(svc(), ws.workspace_id, original);
  });
  const bankid = (signers = [{ email: 'sara@example.com', name: 'Sara Signer' }]) => ({ file_id: fileId, title: 'Supply agreement', signers, signature_method: 'bankid' });
  const charges = () => count(svc(), `SELECT COUNT(*) AS n FROM signing_charges WHERE workspace_id = ?`, [ws.workspace_id]);
  const requests = () => count(svc(), `SELECT COUNT(*) AS n FROM signing_requests WHERE workspace_id = ?`, [ws.workspace_id]);
  const mails = () => count(svc(), `SELECT COUNT(*) AS n FROM mailbox_messages`);
  const state = () => ({ ws, fileId, original });
  return { state, bankid, charges, requests, mails };
}
