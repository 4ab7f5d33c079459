/**
 * The bankid signer's flow through the configured provider (provider.ts), on the signer's link:
 *
 *   POST /sign/<token>/bankid/start          with the review page's agreement (`agree=yes`), opens a
 *                                            provider order for this recipient (30 min) and follows the
 *                                            provider's `start`: 303 to its redirect, or its page.
 *   GET  /sign/<token>/bankid/test/<order>   the test provider's page (TEST in its banner, title and
 *                                            button): a test personal number and "Confirm and sign".
 *                                            Changes and records nothing.
 *   POST /sign/<token>/bankid/return         the provider sends the signer back here (fields `order`
 *                                            and the provider's own): the provider's `complete` signs the
 *                                            request's working PDF; the signature is recorded
 *                                            (recordSigned, with the provider's evidence), 303 to the
 *                                            signer's done page. A refusal (a wrong personal number)
 *                                            shows why, with "Try again".
 *
 * The working PDF: the original for the first signer, then each provider output in turn
 * (signing_provider_documents, a blob per version). The provider's output must be the PDF it was
 * given followed by more bytes (an incremental update), so every earlier signature stays valid. Two
 * signers finishing at once: the second one's output was made from an older version; it is discarded
 * and the provider signs the newer one (compare-and-set on the version, under the request's row lock).
 * When the last signer has signed, the last output is the archive, unmodified (no evidence pages: seed
 * 4.9), registered as a file (source `signing_archive`, same owner and scope as the original) in that
 * same transaction, with the event `archive.completed`. The archive job that recordSigned enqueues
 * finds the archive there (archiveBankIdRequest is idempotent).
 *
 * The token in the path is the credential (as on every signer's page). Start refuses posts from
 * another origin; the return accepts them (a provider on another site posts back), and takes only an
 * order this recipient opened, still open and not expired.
 */
import fs from 'node:fs';
import type { Readable } from 'node:stream';
import type express from 'express';
import type { Request, Response } from 'express';
import type { Sql } from '../../../db/database.ts';
import { newId } from '../../../server/ids.ts';
import type { JobDefinition, JobQueue } from '../../../server/jobs.ts';
import type { ModuleDeps } from '../../../server/module.ts';
import { sameOrigin } from '../../../server/pages.ts';
import { BlobExists, type BlobInfo } from '../../../server/storage.ts';
import { type DocumentFiles, filesOf, type StoredFile } from '../files.ts';
import { registerArchive } from '../archive/registerArchive.ts';
import { type DbSigningRecipientRow, type DbSigningRequestRow, findRequestById } from '../queries.ts';
import { recordSigned } from '../request/lifecycle.ts';
import { resolveSignerLink } from '../signer/links.ts';
import { testPersonalNumber } from './personalNumber.ts';
import { type BankIdSettings, providerOf, type ProviderInfo, ProviderRefusal, type ProviderSigner } from './provider.ts';

/** How long a provider order may take from start to return. */
export const ORDER_TTL_MS = 30 * 60_000;
const ORDER_ID = /^spo_[0-9a-z]{24}$/;
const USER_AGENT_MAX = 1000;
const PARAM_MAX = 2000;

/** The bankid pages' stylesheet (these pages and the settings page, credit/settingsPage.ts). */
export const BANKID_STYLESHEET_PATH = '/assets/signing-bankid.css';
const PAGES_DIR = new URL('./pages/', import.meta.url);
const BANKID_CSS = fs.readFileSync(new URL('bankid.css', PAGES_DIR));

interface DbOrderRow {
  id: string;
  request_id: string;
  recipient_id: string;
  provider: string;
  provider_ref: string | null;
  status: 'open' | 'completed' | 'failed';
  error: string | null;
  created_at: number;
  expires_at: number;
  completed_at: number | null;
}

interface DbWorkingRow {
  request_id: string;
  blob_id: string;
  sha256: string;
  size: number;
  signatures: number;
  updated_at: number;
}

/** The request's working PDF as it is now. */
interface WorkingDocument {
  bytes: Buffer;
  sha256: string;
  /** Signatures it carries (0: the original). */
  signatures: number;
  /** The blob of a provider output (null: the original file's, which is never deleted here). */
  blobId: string | null;
}

async function findOrder(sql: Sql, id: string): Promise<DbOrderRow | undefined> {
  const row = await sql.one<DbOrderRow>(`SELECT * FROM signing_provider_orders WHERE id = ?`, [id]);
  return row ? { ...row, created_at: Number(row.created_at), expires_at: Number(row.expires_at), completed_at: row.completed_at === null ? null : Number(row.completed_at) } : undefined;
}

async function findWorking(sql: Sql, requestId: string): Promise<DbWorkingRow | undefined> {
  const row = await sql.one<DbWorkingRow>(`SELECT * FROM signing_provider_documents WHERE request_id = ?`, [requestId]);
  return row ? { ...row, size: Number(row.size), signatures: Number(row.signatures), updated_at: Number(row.updated_at) } : undefined;
}

async function streamBytes(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * Registers the request's last provider output as its archive (the file, archive_file_id and
 * archive_sha256, the event archive.completed, the "completed" mails enqueued), in the caller's transaction; the request's row is
 * locked. Idempotent: a request that has its archive answers it unchanged. Null when the request is
 * not a completed bankid request with a working PDF (nothing to archive).
 */
export async function archiveBankIdRequest(sql: Sql, jobs: Pick<JobQueue, 'enqueue'>, files: Pick<DocumentFiles, 'find' | 'create'>, requestId: string, now: number): Promise<{ fileId: string; sha256: string } | null> {
  const request = await findRequestById(sql, requestId, true);
  if (!request || request.signature_method !== 'bankid' || request.status !== 'completed') return null;
  if (request.archive_file_id && request.archive_sha256) return { fileId: request.archive_file_id, sha256: request.archive_sha256 };
  const working = await findWorking(sql, requestId);
  if (!working) return null;
  const source = await files.find(sql, request.workspace_id, request.source_file_id);
  if (!source) return null;
  // Signatures are incremental updates: no page is added.
  const file = await registerArchive(
    sql,
    jobs,
    files,
    request,
    { source, blob: { id: working.blob_id, size: working.size, sha256: working.sha256 }, pageCount: source.pageCount, event: { size: working.size, signature_method: 'bankid', signatures: working.signatures } },
    now,
  );
  return { fileId: file.id, sha256: file.sha256 };
}

/** Rounds of one return (a signer whose output was overtaken by another signer's signs again). */
const ROUNDS = 3;
/** The blob of an order's provider output in a round. */
const orderBlobId = (orderId: string, round: number) => `${orderId}-${round}`;
/** Orders are kept this long after they open (their blobs checked), then removed. */
export const ORDER_RETENTION_MS = 24 * 3600_000;
export const PRUNE_JOB = 'signing.bankid-prune';

/**
 * The hourly `signing.bankid-prune` job: the working PDF of a request that ended without completing
 * (cancelled, declined, expired) is removed; orders a day old are removed, with any provider output of
 * theirs that nothing uses (a process that died between storing it and its commit, or a superseded
 * version whose deletion failed). Completed requests keep theirs: it is the archive's blob.
 */
export function bankIdJobs(deps: Pick<ModuleDeps, 'db' | 'clock' | 'storage' | 'logger'>): Record<string, JobDefinition> {
  const { db, clock, storage, logger } = deps;
  return {
    [PRUNE_JOB]: {
      everyMs: 60 * 60_000,
      run: async () => {
        const ended = await db.sql.all<{ request_id: string; blob_id: string }>(
          `SELECT d.request_id, d.blob_id FROM signing_provider_documents d JOIN signing_requests r ON r.id = d.request_id WHERE r.status IN ('cancelled', 'expired') LIMIT 500`,
        );
        for (const d of ended) {
          await db.sql.run(`DELETE FROM signing_provider_documents WHERE request_id = ? AND blob_id = ?`, [d.request_id, d.blob_id]);
          await storage.delete(d.blob_id);
        }
        const old = await db.sql.all<{ id: string }>(`SELECT id FROM signing_provider_orders WHERE created_at < ? ORDER BY created_at LIMIT 500`, [clock.now() - ORDER_RETENTION_MS]);
        let blobs = 0;
        for (const { id } of old) {
          for (let round = 0; round < ROUNDS; round++) {
            const blobId = orderBlobId(id, round);
            const used =
              (await db.sql.one(`SELECT request_id FROM signing_provider_documents WHERE blob_id = ?`, [blobId])) ??
              (await db.sql.one(`SELECT id FROM document_files WHERE blob_id = ?`, [blobId]));
            if (!used && (await storage.stat(blobId))) {
              await storage.delete(blobId);
              blobs++;
            }
          }
          await db.sql.run(`DELETE FROM signing_provider_orders WHERE id = ?`, [id]);
        }
        if (ended.length || old.length) logger.info({ endedRequests: ended.length, orders: old.length, blobs }, 'pruned bankid working PDFs and orders');
      },
    },
  };
}

type Live = Extract<Awaited<ReturnType<typeof resolveSignerLink>>, { state: 'live' }>;

/** The signer's bankid routes and the bankid pages' stylesheet (mounted on the module's page router). */
export function bankIdRoutes(router: express.Router, deps: ModuleDeps<BankIdSettings>): void {
  const { db, clock, pages, storage, logger, config } = deps;
  const views = pages.views(PAGES_DIR);
  const provider = providerOf(deps.settings);

  router.get(BANKID_STYLESHEET_PATH, (_req: Request, res: Response) => {
    res.setHeader('Content-Type', 'text/css; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.status(200).send(BANKID_CSS);
  });

  const paths = (token: string) => ({
    pagesPath: `/sign/${token}/bankid`,
    start: `/sign/${token}/bankid/start`,
    returnPath: `/sign/${token}/bankid/return`,
    review: `/sign/${token}/review`,
    done: `/sign/${token}/done`,
    first: `/sign/${token}`,
  });

  function send(res: Response, status: number, title: string, html: string): void {
    pages.send(res, status, { title, bodyClass: 'bankid', styles: [BANKID_STYLESHEET_PATH], html });
  }

  function attempt(res: Response, status: number, token: string, p: ProviderInfo | null, heading: string, paragraphs: string[], retry: boolean): void {
    const at = paths(token);
    send(res, status, heading, views.render('attempt', { test: p?.test ?? false, providerName: p?.name ?? 'BankID', heading, paragraphs, retry, startUrl: at.start, backUrl: at.review }));
  }

  /**
   * The live link of a bankid request whose recipient has opened it, or null after answering: unknown
   * or ended links, and links before "Continue", go to the signer's own pages (which say why).
   */
  async function bankIdLink(req: Request<{ token: string }>, res: Response): Promise<Live | null> {
    const token = req.params.token;
    const link = await resolveSignerLink(db.sql, token, clock.now());
    if (link.state === 'unknown') {
      pages.notice(res, 404, 'Unknown link', ['This signing link does not exist. Check that the whole link from the e-mail was copied, or ask the sender for a new one.']);
      return null;
    }
    if (link.state === 'ended') {
      res.redirect(303, link.recipient.status === 'signed' ? paths(token).done : paths(token).first);
      return null;
    }
    if (link.recipient.status === 'pending') {
      res.redirect(303, paths(token).first);
      return null;
    }
    if (link.request.signature_method !== 'bankid') {
      res.redirect(303, paths(token).review);
      return null;
    }
    return link;
  }

  async function workingDocument(request: DbSigningRequestRow): Promise<WorkingDocument> {
    const working = await findWorking(db.sql, request.id);
    if (working) return { bytes: await streamBytes(await storage.get(working.blob_id)), sha256: working.sha256, signatures: working.signatures, blobId: working.blob_id };
    const source = (await filesOf(deps).find(db.sql, request.workspace_id, request.source_file_id)) as StoredFile | null;
    if (!source) throw new Error(`the source file of ${request.id} is missing`);
    return { bytes: await filesOf(deps).readBytes(source), sha256: source.sha256, signatures: 0, blobId: null };
  }

  const signerOf = (r: DbSigningRecipientRow): ProviderSigner => ({ recipientId: r.id, name: r.name, email: r.email });

  router.post('/sign/:token/bankid/start', async (req: Request<{ token: string }>, res: Response) => {
    if (!sameOrigin(req)) return pages.notice(res, 403, 'Refused', ['This form may only be sent from a page of this service.']);
    const link = await bankIdLink(req, res);
    if (!link) return;
    const token = req.params.token;
    if (!provider) {
      return attempt(res, 503, token, null, 'BankID signing is not available', ['This service has no BankID provider configured right now, so the document cannot be signed with BankID. Ask the sender to contact the service’s operator.'], false);
    }
    // The same consent as a typed-name signature: the review page's checkbox.
    if ((req.body as Record<string, unknown> | undefined)?.agree !== 'yes') {
      return attempt(res, 400, token, provider, 'Not signed yet', ['Tick “I agree to sign this document electronically” on the document’s page, then sign with BankID.'], false);
    }
    const { request, recipient } = link;
    const now = clock.now();
    const orderId = newId('spo');
    const document = await workingDocument(request);
    const at = paths(token);
    let started;
    try {
      started = await (await provider.load()).start({
        orderId,
        requestId: request.id,
        title: request.title,
        signer: signerOf(recipient),
        document: document.bytes,
        returnUrl: `${config.publicUrl}${at.returnPath}`,
        pagesPath: at.pagesPath,
        now,
      });
    } catch (err) {
      if (!(err instanceof ProviderRefusal)) logger.error({ err, requestId: request.id, provider: provider.id }, 'bankid provider start failed');
      return attempt(res, 502, token, provider, 'BankID could not start', [err instanceof ProviderRefusal ? err.message : 'The BankID provider did not answer as expected. Try again in a moment.'], true);
    }
    await db.sql.run(
      `INSERT INTO signing_provider_orders (id, request_id, recipient_id, provider, provider_ref, status, error, created_at, expires_at, completed_at)
       VALUES (?, ?, ?, ?, ?, 'open', NULL, ?, ?, NULL)`,
      [orderId, request.id, recipient.id, provider.id, started.providerRef ?? null, now, now + ORDER_TTL_MS],
    );
    if ('redirect' in started) return res.redirect(303, started.redirect);
    send(res, 200, started.page.title, started.page.html);
  });

  /** The order of this link's recipient that may still be completed, or null after a page saying why. */
  async function openOrder(res: Response, token: string, link: Live, orderId: unknown): Promise<DbOrderRow | null> {
    const order = typeof orderId === 'string' && ORDER_ID.test(orderId) ? await findOrder(db.sql, orderId) : undefined;
    if (!order || order.recipient_id !== link.recipient.id || order.request_id !== link.request.id || (provider && order.provider !== provider.id)) {
      attempt(res, 404, token, provider, 'Unknown BankID attempt', ['This BankID attempt does not belong to this signing link. Start again from the document.'], true);
      return null;
    }
    if (order.status !== 'open' || order.expires_at <= clock.now()) {
      attempt(res, 410, token, provider, 'This BankID attempt has ended', [order.status === 'failed' && order.error ? order.error : 'It was used or it expired. Start again from the document.'], true);
      return null;
    }
    return order;
  }

  if (provider?.id === 'test') {
    router.get('/sign/:token/bankid/test/:order', async (req: Request<{ token: string; order: string }>, res: Response) => {
      const link = await bankIdLink(req, res);
      if (!link) return;
      const order = await openOrder(res, req.params.token, link, req.params.order);
      if (!order) return;
      const at = paths(req.params.token);
      send(
        res,
        200,
        `TEST: sign “${link.request.title}” with BankID`,
        views.render('provider-test', {
          providerName: provider.name,
          title: link.request.title,
          signerName: link.recipient.name,
          orderId: order.id,
          returnUrl: at.returnPath,
          backUrl: at.review,
          example: testPersonalNumber('19900101'),
          problem: '',
        }),
      );
    });
  }

  router.post('/sign/:token/bankid/return', async (req: Request<{ token: string }>, res: Response) => {
    const link = await bankIdLink(req, res);
    if (!link) return;
    const token = req.params.token;
    const at = paths(token);
    if (!provider) return attempt(res, 503, token, null, 'BankID signing is not available', ['This service has no BankID provider configured right now. Ask the sender to contact the service’s operator.'], false);
    const body = (req.body ?? {}) as Record<string, unknown>;
    const order = await openOrder(res, token, link, body.order);
    if (!order) return;
    const params: Record<string, string> = {};
    for (const [k, v] of Object.entries(body)) if (typeof v === 'string' && k !== '_csrf') params[k] = v.slice(0, PARAM_MAX);
    const { request, recipient } = link;
    const ip = req.ip ?? null;
    const userAgent = (req.get('user-agent') ?? '').slice(0, USER_AGENT_MAX) || null;

    for (let round = 0; round < ROUNDS; round++) {
      const now = clock.now();
      const document = await workingDocument(request);
      let result;
      try {
        result = await (await provider.load()).complete({
          orderId: order.id,
          providerRef: order.provider_ref,
          requestId: request.id,
          title: request.title,
          signer: signerOf(recipient),
          params,
          document: document.bytes,
          now,
        });
      } catch (err) {
        if (err instanceof ProviderRefusal) {
          // The order stays open (the browser's Back returns to the provider's page); "Try again" opens a new
          // one with the agreement the signer already gave on the review page.
          return attempt(res, 400, token, provider, 'Not signed yet', [err.message], true);
        }
        logger.error({ err, requestId: request.id, provider: provider.id }, 'bankid provider complete failed');
        await db.sql.run(`UPDATE signing_provider_orders SET status = 'failed', error = ? WHERE id = ? AND status = 'open'`, ['The BankID provider did not finish the signature.', order.id]);
        return attempt(res, 502, token, provider, 'BankID did not finish', ['The BankID provider did not finish the signature. Nothing was signed; try again.'], true);
      }
      const pdf = Buffer.from(result.pdf);
      if (pdf.length <= document.bytes.length || !pdf.subarray(0, document.bytes.length).equals(document.bytes)) {
        logger.error({ requestId: request.id, provider: provider.id }, 'bankid provider returned a PDF that does not extend the one it was given');
        await db.sql.run(`UPDATE signing_provider_orders SET status = 'failed', error = ? WHERE id = ? AND status = 'open'`, ['The provider returned a document that changes the one it was given.', order.id]);
        return attempt(res, 502, token, provider, 'BankID did not finish', ['The BankID provider returned a document that changes the one it was given, so it was not kept. Nothing was signed; try again.'], true);
      }
      // Named after the order and the round, so a process that dies before its commit leaves a blob
      // the prune job can find (orderBlobIds) and remove.
      let blob: BlobInfo;
      try {
        blob = await storage.put(orderBlobId(order.id, round), [pdf], { contentType: 'application/pdf' });
      } catch (err) {
        if (!(err instanceof BlobExists)) throw err;
        // The same order sent twice at once (a double submit): the other one completes it.
        return attempt(res, 409, token, provider, 'Signing is in progress', ['This BankID signature is already being completed in another tab or by a second click. Open the document’s page again in a moment.'], false);
      }
      const evidence = JSON.stringify(result.evidence);
      const typedName = typeof result.evidence.name === 'string' && result.evidence.name.trim() ? result.evidence.name.trim() : recipient.name;
      const used: Sql[] = [];
      const outcome = await db.tx(async (sql) => {
        used.push(sql);
        // The request's row first: signatures of one request are serial from here to the commit.
        await findRequestById(sql, request.id, true);
        const current = await findWorking(sql, request.id);
        if ((current?.sha256 ?? request.source_sha256) !== document.sha256 || (current?.signatures ?? 0) !== document.signatures) return { kind: 'stale' as const };
        const fresh = await findOrder(sql, order.id);
        if (!fresh || fresh.status !== 'open') return { kind: 'used' as const };
        const signed = await recordSigned(sql, deps, { recipientId: recipient.id, typedName, ip, userAgent, providerEvidence: evidence, now });
        if (!signed.ok) return { kind: 'ended' as const };
        await sql.run(
          current
            ? `UPDATE signing_provider_documents SET blob_id = ?, sha256 = ?, size = ?, signatures = ?, updated_at = ? WHERE request_id = ?`
            : `INSERT INTO signing_provider_documents (blob_id, sha256, size, signatures, updated_at, request_id) VALUES (?, ?, ?, ?, ?, ?)`,
          [blob.id, blob.sha256, blob.size, document.signatures + 1, now, request.id],
        );
        await sql.run(`UPDATE signing_provider_orders SET status = 'completed', completed_at = ? WHERE id = ?`, [now, order.id]);
        if (signed.completed) await archiveBankIdRequest(sql, deps.jobs, filesOf(deps), request.id, now);
        return { kind: 'signed' as const, previous: current?.blob_id ?? null };
      });
      for (const sql of used) deps.jobs.committed(sql);
      if (outcome.kind === 'signed') {
        // The version it replaced is no longer anyone's (the original file's blob is never one of these).
        if (outcome.previous) await storage.delete(outcome.previous).catch((err: unknown) => logger.warn({ err, requestId: request.id }, 'could not delete a superseded bankid working PDF'));
        return res.redirect(303, at.done);
      }
      await storage.delete(blob.id).catch(() => undefined);
      if (outcome.kind === 'ended') return res.redirect(303, at.first);
      if (outcome.kind === 'used') return res.redirect(303, at.done);
      // stale: another signer's signature landed first; sign the newer version.
    }
    attempt(res, 409, token, provider, 'Not signed yet', ['Other signers were signing at the same moment. Nothing was signed; try again.'], true);
  });
}
