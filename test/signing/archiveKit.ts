/**
 * What the archive and verification tests share: a workspace with a signing key, a PDF file put
 * straight into the documents tables, a request made through signing.RequestFileSignatures (invitations
 * go to the development mailbox) and signed by every recipient through the signing core's
 * recordSigned (what the signer's page calls), and the poppler tools.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import { createFile, findFile, readFileBytes, type StoredFile } from '../../handlers/documents/files.ts';
import { listFields, listRecipients } from '../../handlers/signing/queries.ts';
import { recordOpened, recordSigned } from '../../handlers/signing/request/lifecycle.ts';
import type { ApplyResult } from '../../server/admin.ts';
import { createBlobStore } from '../../server/storage.ts';
import type { TestService } from '../support/service.ts';

export const run = promisify(execFile);
export const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

export const FIREFOX = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:132.0) Gecko/20100101 Firefox/132.0';
export const IPHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1';

export const archiveSpec = () => ({
  workspace: { name: 'Archive AB' },
  members: {
    olga: { name: 'Olga Owner', email: 'olga@archive.test', role: 'owner' as const },
    ada: { name: 'Ada Member', email: 'ada@archive.test', role: 'member' as const },
  },
  keys: {
    ci: { name: 'Contracts', operations: ['signing.*', 'documents.*'], delegation: ['olga', 'ada'] },
  },
});

/** A PDF of `pages` text pages (written without object streams when `plain`). */
export async function contractPdf(title: string, pages: number): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (let i = 1; i <= pages; i++) {
    const page = doc.addPage([595, 842]);
    page.drawText(`${title}, page ${i} of ${pages}`, { x: 56, y: 780, size: 16, font });
    for (let line = 0; line < 40; line++) page.drawText(`Clause ${i}.${line + 1}: the parties agree to the terms set out here.`, { x: 56, y: 740 - line * 17, size: 10, font });
  }
  return doc.save();
}

/** A file of the workspace (or `owner`'s private file) with these bytes, as a completed upload leaves it. */
export async function putFile(svc: TestService, workspaceId: string, bytes: Uint8Array, options: { filename?: string; pages: number; owner?: string | null }): Promise<StoredFile> {
  const storage = createBlobStore(svc.db, svc.clock, svc.config.storage);
  const blob = await storage.put(null, [Buffer.from(bytes)], { contentType: 'application/pdf' });
  return createFile(
    svc.db.sql,
    {
      workspaceId,
      ownerMemberId: options.owner ?? null,
      createdByKeyId: null,
      filename: options.filename ?? 'Services agreement.pdf',
      contentType: 'application/pdf',
      size: blob.size,
      sha256: blob.sha256,
      pageCount: options.pages,
      blobId: blob.id,
      source: 'upload',
    },
    svc.clock.now(),
  );
}

export async function bytesOf(svc: TestService, workspaceId: string, fileId: string): Promise<Buffer> {
  const file = await findFile(svc.db.sql, workspaceId, fileId);
  assert.ok(file, `file ${fileId}`);
  return readFileBytes(createBlobStore(svc.db, svc.clock, svc.config.storage), file);
}

let seq = 0;

export interface Signer {
  email: string;
  name: string;
  typedName: string;
  ip: string;
  userAgent: string;
  /** What the signer gives in text and check box fields, by the field's index in the request's `fields`. */
  fieldValues?: Record<number, string>;
  /** A drawn signature (drawnSignature.ts's JSON). */
  drawn?: string;
}

export interface SignedRequest {
  requestId: string;
  source: StoredFile;
  signedAt: number[];
}

/** A request over `file` made through the API and signed by every signer in turn (one hour apart). */
export async function signedRequest(svc: TestService, ws: ApplyResult, file: StoredFile, signers: Signer[], options: { title?: string; actAs?: string; fields?: unknown[] } = {}): Promise<SignedRequest> {
  const res = await svc.post(
    'signing.RequestFileSignatures',
    { file_id: file.id, title: options.title ?? 'Services agreement 2027', signers: signers.map((s) => ({ email: s.email, name: s.name })), ...(options.fields ? { fields: options.fields } : {}) },
    { Authorization: `Bearer ${ws.keys.ci!.secret}`, 'Idempotency-Key': `archive-${process.pid}-${++seq}`, ...(options.actAs ? { 'Service-Act-As': options.actAs } : {}) },
  );
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const requestId = (res.body as { signing_request_id: string }).signing_request_id;
  const recipients = await listRecipients(svc.db.sql, requestId);
  const placed = await listFields(svc.db.sql, requestId);
  const signedAt: number[] = [];
  for (const [i, signer] of signers.entries()) {
    svc.clock.advance(3_600_000);
    const recipient = recipients.find((r) => r.email === signer.email)!;
    const now = svc.clock.now();
    await svc.db.tx(async (sql) => {
      assert.ok((await recordOpened(sql, { recipientId: recipient.id, now })).ok);
      const fieldValues = new Map(Object.entries(signer.fieldValues ?? {}).map(([i, v]) => [placed[Number(i)]!.id, v]));
      const signed = await recordSigned(sql, svc, { recipientId: recipient.id, typedName: signer.typedName, ip: signer.ip, userAgent: signer.userAgent, now, fieldValues, drawnSignature: signer.drawn ?? null });
      assert.ok(signed.ok, `signer ${i}`);
    });
    signedAt.push(now);
  }
  return { requestId, source: file, signedAt };
}

export async function requestRow(svc: TestService, requestId: string) {
  const row = await svc.db.sql.one<{ status: string; archive_file_id: string | null; archive_sha256: string | null; archive_error: string | null }>(
    `SELECT status, archive_file_id, archive_sha256, archive_error FROM signing_requests WHERE id = ?`,
    [requestId],
  );
  assert.ok(row);
  return row;
}

/** pdfsig's report (it exits non-zero for unsigned files; the text is what counts). */
export async function pdfsig(file: string): Promise<string> {
  try {
    return (await run('pdfsig', [file], { env: { ...process.env, TZ: 'UTC' } })).stdout;
  } catch (err) {
    return (err as { stdout?: string }).stdout ?? '';
  }
}

export async function pdfPages(file: string): Promise<number> {
  return Number((await run('pdfinfo', [file])).stdout.match(/Pages:\s+(\d+)/)?.[1]);
}

export async function writeTo(dir: string, name: string, bytes: Uint8Array): Promise<string> {
  const file = path.join(dir, name);
  await fs.writeFile(file, bytes);
  return file;
}
