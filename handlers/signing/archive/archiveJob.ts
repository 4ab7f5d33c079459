/**
 * The `signing.archive` job: a completed request's signed archive. The original PDF with evidence pages
 * after it (evidence.ts), sealed once over the whole file (seal.ts; an RFC 3161 timestamp when
 * SIGNING_TSA_URL is set), stored as a file of the documents module (source `signing_archive`, the
 * source file's owner and scope), and recorded on the request (archive_file_id, archive_sha256, event
 * `archive.completed`); the "completed" mails to every party are enqueued in that transaction
 * (completedMail.ts).
 *
 * Crash-safe and idempotent. The job is enqueued in the transaction that completes the request (key =
 * request id) and claimed under a lease, so a process killed at any point leaves it to be taken again.
 * A run first removes the blob a killed run may have written but not registered (each blob is listed in
 * signing_archive_blobs before it is written and unlisted in the transaction that registers it), then
 * finds the archive done (nothing to do) or builds it again; the transaction that registers the file
 * re-checks under the request's row lock that no archive was registered meanwhile, so a request never
 * gets two. A failure is written to archive_error (the request itself is untouched; the first failure
 * of a request also writes the event `archive.failed`) and the job kit retries it with backoff (1 s
 * doubling, at most an hour); a later success clears the error.
 */
import { createHash } from 'node:crypto';
import type { Sql } from '../../../db/database.ts';
import { filesOf } from '../files.ts';
import type { JobDefinition } from '../../../server/jobs.ts';
import type { ModuleDeps } from '../../../server/module.ts';
import { newBlobId } from '../../../server/storage.ts';
import { archiveBankIdRequest } from '../bankid/flow.ts';
import { sealingCertificate, type SealSettings } from './sealSettings.ts';
import { registerArchive } from './registerArchive.ts';
import { buildArchive, type Evidence } from './evidence.ts';
import { storedDrawnSignature } from '../signer/drawnSignature.ts';
import { appendEvent, type DbSigningRequestRow, findMember, findRequestById, keyOf, listFields, listRecipients, recipientAsOf, signersOf, updateRequest, workspaceName } from '../queries.ts';
import { ARCHIVE_JOB, type ArchiveJobPayload } from '../request/lifecycle.ts';
import { seal } from './seal.ts';

export { ARCHIVE_JOB };

/** Test seam: called after the archive's blob is written and before it is registered (the kill -9 test pauses here). */
export const archiveHooks: { afterPut?: (requestId: string, blobId: string) => Promise<void> } = {};

export interface ArchiveResult {
  /** `built`: this run made the archive; `done`: it existed; `skipped`: the request is gone or not completed. */
  outcome: 'built' | 'done' | 'skipped';
  fileId: string | null;
  sha256?: string;
  pages?: number;
  ms?: { build: number; seal: number; store: number };
}

function payloadOf(payload: unknown): ArchiveJobPayload {
  const p = payload as Partial<ArchiveJobPayload> | null;
  if (!p || typeof p.requestId !== 'string' || typeof p.workspaceId !== 'string') throw new Error('signing.archive needs {requestId, workspaceId}');
  return { requestId: p.requestId, workspaceId: p.workspaceId };
}

/** Removes blobs of earlier runs of this request that were written but never registered (a killed process). */
async function removeUnregistered(deps: Pick<ModuleDeps, 'db' | 'storage'>, requestId: string): Promise<number> {
  const rows = await deps.db.sql.all<{ blob_id: string }>(`SELECT blob_id FROM signing_archive_blobs WHERE request_id = ?`, [requestId]);
  let removed = 0;
  for (const { blob_id } of rows) {
    const used = await deps.db.sql.one(`SELECT id FROM document_files WHERE blob_id = ?`, [blob_id]);
    if (!used) {
      await deps.storage.delete(blob_id);
      removed++;
    }
    await deps.db.sql.run(`DELETE FROM signing_archive_blobs WHERE blob_id = ?`, [blob_id]);
  }
  return removed;
}

/** Who sent the request, as the evidence pages say it: the member (name and address) and the API key, if any. */
async function senderOf(sql: Sql, request: DbSigningRequestRow): Promise<string> {
  const key = request.created_by_key_id ? await keyOf(sql, request.created_by_key_id) : undefined;
  const memberId = request.owner_member_id ?? key?.created_by ?? null;
  const member = memberId ? await findMember(sql, request.workspace_id, memberId) : undefined;
  const person = member ? `${member.name} <${member.email}>` : null;
  const through = key ? `API key "${key.name}" (${key.id})` : null;
  if (person && through) return request.owner_member_id ? `${person}, through ${through}` : `${through}, made by ${person}`;
  if (person) return person;
  if (through) return through;
  return `the workspace ${await workspaceName(sql, request.workspace_id)}`;
}

async function evidenceOf(sql: Sql, request: DbSigningRequestRow, source: { filename: string; sha256: string; size: number; pageCount: number }, sealedBy: string, verifyUrl: string): Promise<Evidence> {
  const recipients = await listRecipients(sql, request.id);
  const byId = new Map(recipients.map((r) => [r.id, r]));
  const events = await sql.all<{ seq: number | string; kind: string; recipient_id: string | null; data: string; occurred_at: number | string }>(
    // A failed attempt at this very archive (archive.failed) is the service's own trouble, not part of the signing: left out.
    `SELECT seq, kind, recipient_id, data, occurred_at FROM signing_events WHERE request_id = ? AND kind <> 'archive.failed' ORDER BY seq`,
    [request.id],
  );
  // Events before a replacement name the recipient as they were then.
  const asOf = recipientAsOf(events);
  return {
    requestId: request.id,
    title: request.title,
    sentBy: await senderOf(sql, request),
    signatureMethod: request.signature_method === 'bankid' ? 'BankID' : 'Standard (typed name, link sent by e-mail)',
    source: { filename: source.filename, sha256: source.sha256, size: source.size, pages: source.pageCount },
    createdAt: Number(request.created_at),
    completedAt: Number(request.completed_at ?? request.updated_at),
    signers: signersOf(recipients).map((r) => ({
      name: r.name,
      email: r.email,
      typedName: r.typed_name,
      signedAt: Number(r.signed_at),
      ip: r.ip,
      userAgent: r.user_agent,
      method: r.provider_evidence ? 'BankID (identity confirmed by the provider)' : null,
      drawn: storedDrawnSignature(r.drawn_signature),
    })),
    events: events.map((e) => {
      const who = e.recipient_id ? byId.get(e.recipient_id) : undefined;
      let data: Record<string, unknown> = {};
      try {
        const parsed: unknown = JSON.parse(e.data);
        if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) data = parsed as Record<string, unknown>;
      } catch {
        /* an unreadable data field shows as none */
      }
      const then = who ? asOf(who.id, Number(e.seq), { name: who.name, email: who.email }) : null;
      return { occurredAt: Number(e.occurred_at), kind: e.kind, recipient: then, data };
    }),
    sealedBy,
    verifyUrl,
    fields: (await listFields(sql, request.id)).flatMap((f) => {
      const r = byId.get(f.recipient_id);
      if (!r || r.status !== 'signed') return [];
      const typed = (r.typed_name ?? r.name).trim();
      const text =
        f.kind === 'date' ? new Date(Number(r.signed_at)).toISOString().slice(0, 10)
        : f.kind === 'initials' ? typed.split(/\s+/).filter(Boolean).map((w) => [...w][0]!.toUpperCase()).slice(0, 3).join('')
        : f.kind === 'text' || f.kind === 'checkbox' ? (f.value ?? '')
        : typed;
      const drawing = f.kind === 'signature' ? storedDrawnSignature(r.drawn_signature) : null;
      return [{ page: f.page, x: f.x, y: f.y, width: f.width, height: f.height, kind: f.kind, text, drawing, cover: Boolean(f.tag) }];
    }),
  };
}

/**
 * The error as the API shows it: addresses of the service's own infrastructure (the timestamp
 * authority's URL, host and port, which may carry credentials) are not the caller's business; the log
 * keeps the full text.
 */
export function publicError(message: string): string {
  return message
    .replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+/gi, '<the timestamp authority>')
    .replace(/\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b/g, '<address>')
    .replace(/\[[0-9a-f:]+\](?::\d+)?/gi, '<address>')
    .slice(0, 500);
}

/**
 * A failed attempt: archive_error says why (shown on the request while the job retries), and the
 * first failure of a request writes the event `archive.failed` (its retries write none).
 */
async function recordFailure(db: ModuleDeps['db'], request: DbSigningRequestRow, raw: string, now: number): Promise<void> {
  const message = publicError(raw);
  await db.tx(async (sql) => {
    const current = await findRequestById(sql, request.id, true);
    if (!current || current.archive_file_id) return;
    await updateRequest(sql, request.id, { archive_error: message }, now);
    const before = await sql.one(`SELECT seq FROM signing_events WHERE request_id = ? AND kind = 'archive.failed'`, [request.id]);
    if (!before) await appendEvent(sql, { requestId: request.id, workspaceId: request.workspace_id, kind: 'archive.failed', data: { error: message }, at: now });
  });
}

/** Builds, seals and stores the archive of one completed request (see the file comment). */
export async function archiveRequest(deps: ModuleDeps<unknown>, settings: SealSettings, job: ArchiveJobPayload): Promise<ArchiveResult> {
  const { db, clock, storage } = deps;
  await removeUnregistered(deps, job.requestId);
  const request = await findRequestById(db.sql, job.requestId);
  if (!request || request.workspace_id !== job.workspaceId) return { outcome: 'skipped', fileId: null };
  if (request.archive_file_id) return { outcome: 'done', fileId: request.archive_file_id };
  if (request.status !== 'completed') return { outcome: 'skipped', fileId: null };
  if (request.signature_method === 'bankid') {
    // bankid: the provider's signed PDF is the archive, unmodified (bankid/flow.ts registers it when the last signer signs).
    let bankIdSql: Sql | null = null;
    const done = await db.tx((sql) => {
      bankIdSql = sql;
      return archiveBankIdRequest(sql, deps.jobs, filesOf(deps), request.id, clock.now());
    });
    if (bankIdSql) deps.jobs.committed(bankIdSql);
    return done ? { outcome: 'done', fileId: done.fileId } : { outcome: 'skipped', fileId: null };
  }
  try {
    const files = filesOf(deps);
    const source = await files.find(db.sql, request.workspace_id, request.source_file_id);
    if (!source) throw new Error(`the source file ${request.source_file_id} is missing`);
    const original = await files.readBytes(source);
    if (createHash('sha256').update(original).digest('hex') !== request.source_sha256) throw new Error(`the source file ${source.id} does not have the SHA-256 the request was made over`);
    const certificate = await sealingCertificate(db, clock, settings, deps.config.publicUrl);
    const t0 = performance.now();
    const evidence = await evidenceOf(db.sql, request, source, certificate.subject, new URL('/verify', deps.config.publicUrl).toString());
    const built = await buildArchive(original, evidence, files);
    const t1 = performance.now();
    const sealed = await seal(built.bytes, {
      certificate,
      reason: `Signed by all parties: request ${request.id}`,
      location: new URL(deps.config.publicUrl).host,
      signedAt: new Date(clock.now()),
      timestampUrl: settings.tsaUrl ?? undefined,
    });
    const t2 = performance.now();
    const blobId = newBlobId();
    await db.sql.run(`INSERT INTO signing_archive_blobs (blob_id, request_id, created_at) VALUES (?, ?, ?)`, [blobId, request.id, clock.now()]);
    const blob = await storage.put(blobId, [sealed], { contentType: 'application/pdf' });
    await archiveHooks.afterPut?.(request.id, blobId);
    const pages = source.pageCount + built.evidencePages;
    const now = clock.now();
    let txSql: Sql | null = null;
    const registered = await db.tx(async (sql): Promise<{ existing: string | null } | { registered: string }> => {
      const current = await findRequestById(sql, request.id, true);
      if (!current || current.archive_file_id) return { existing: current?.archive_file_id ?? null };
      const file = await registerArchive(
        sql,
        deps.jobs,
        files,
        current,
        { source, blob, pageCount: pages, event: { pages, evidence_pages: built.evidencePages, timestamped: Boolean(settings.tsaUrl) } },
        now,
      );
      await sql.run(`DELETE FROM signing_archive_blobs WHERE blob_id = ?`, [blob.id]);
      txSql = sql;
      return { registered: file.id };
    });
    if (txSql) deps.jobs.committed(txSql);
    if ('existing' in registered) {
      // Another run registered an archive first (or the request vanished): this blob is not needed.
      await storage.delete(blob.id);
      await db.sql.run(`DELETE FROM signing_archive_blobs WHERE blob_id = ?`, [blob.id]);
      return { outcome: 'done', fileId: registered.existing ?? null };
    }
    const t3 = performance.now();
    deps.logger.info({ request: request.id, file: registered.registered, pages, bytes: blob.size, ms: Math.round(t3 - t0) }, 'signed archive stored');
    return { outcome: 'built', fileId: registered.registered, sha256: blob.sha256, pages, ms: { build: t1 - t0, seal: t2 - t1, store: t3 - t2 } };
  } catch (err) {
    const message = (err instanceof Error ? err.message : String(err)).slice(0, 2000);
    await recordFailure(db, request, message, clock.now()).catch(() => undefined);
    throw err;
  }
}

/** The job definition the signing module registers as `signing.archive`. */
export function archiveJob(deps: ModuleDeps<unknown>, settings: SealSettings): JobDefinition {
  return {
    leaseMs: 2 * 60_000,
    run: async (payload) => {
      await archiveRequest(deps, settings, payloadOf(payload));
    },
  };
}
