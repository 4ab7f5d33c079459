/**
 * The module's secret-bearing URLs (its `secretPaths`: `/files/`, never logged):
 * - `PUT /files/parts/<token>`: one part's raw bytes (not JSON: the /v1 body limit does not apply; the
 *   part's own size is the limit), streamed into the blob store and hashed while written;
 * - `GET` / `HEAD /files/<token>`: a file's bytes as an attachment (downloadUrl in files.ts).
 * Neither needs an Authorization header: the signed token is the credential. A GET or HEAD changes nothing.
 */
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import express, { type Request, type Response } from 'express';
import { conflict, forbidden, invalidInput, methodNotAllowed, notFound, payloadTooLarge, ServiceError } from '../../server/errors.ts';
import { type AtUseVerdict, judgeAtUse } from '../../server/atUse.ts';
import { partPutBucket, takeQuota, workspaceLimits } from '../../server/limits.ts';
import type { RawEndpoint } from '../../server/module.ts';
import { BlobTooLarge } from '../../server/storage.ts';
import type { DocumentsDeps, PartBodyPace } from './deps.ts';
import { documentDisposition, findFile, readDownloadToken } from './files.ts';
import { findPart, findUploadById, upsertPart } from './queries.ts';
import { readToken } from './tokens.ts';

interface PartClaims {
  /** Upload id. */
  u: string;
  /** Part number. */
  p: number;
  /** Exact size in bytes. */
  s: number;
  /** SHA-256 the bytes must have, or null. */
  h: string | null;
  /** The acted-for member's role when the URL was issued (absent in URLs issued before it was recorded). */
  r?: string | null;
  e: number;
}

const PART_PREFIX = '/files/parts/';

/** Why a part URL no longer works, once the key or member it was issued for changed (checked at use). */
function partRefusal(verdict: Extract<AtUseVerdict, { ok: false }>): string {
  if (verdict.loss === 'credential_revoked') return `The credential this upload belongs to was revoked (${verdict.reason}); its part URLs no longer work.`;
  return `This part URL no longer works: ${verdict.reason} since it was issued. Part URLs are checked when used; ask documents.GetUploadPart again with a key (and member) that may upload.`;
}

type Answer = { status: number; body: unknown; close?: boolean; headers?: Record<string, string> } | null;

const refusal = (err: ServiceError, close = false): Answer => ({ status: err.status, body: err.body(), close, headers: err.headers });

/**
 * The part's body as it arrives, held to a pace: after `graceMs`, the bytes so far must average at
 * least `minBytesPerSecond`, or the body ends with an error and `slow()` says so (a client that
 * trickles a byte every few seconds would hold a connection and a blob write for as long as it likes).
 */
function pacedBody(req: IncomingMessage, pace: PartBodyPace): { body: Transform; slow: () => boolean } {
  const started = performance.now();
  let bytes = 0;
  let slow = false;
  const body = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      done(null, chunk);
    },
  });
  const timer = setInterval(
    () => {
      const elapsed = performance.now() - started;
      if (elapsed >= pace.graceMs && bytes < (pace.minBytesPerSecond * elapsed) / 1000) {
        slow = true;
        clearInterval(timer);
        body.destroy(new Error('the part arrived too slowly'));
        req.unpipe(body);
        req.pause();
      }
    },
    Math.max(50, Math.min(1000, pace.graceMs || 1000)),
  );
  const stop = () => clearInterval(timer);
  body.on('close', stop);
  body.on('finish', stop);
  req.on('error', (err) => body.destroy(err));
  req.on('aborted', () => body.destroy(new Error('the client went away')));
  req.pipe(body);
  return { body, slow: () => slow };
}

/** Stores one part's body; the answer to send, or null when the client went away mid-body. */
async function receivePart(deps: DocumentsDeps, token: string, req: IncomingMessage): Promise<Answer> {
  const { db, clock, storage, logger } = deps;
  const read = await readToken<PartClaims>(db, 'part', token, clock.now());
  // Refusals before the body is read close the connection, so an unread body is not waited for.
  if (!read.ok) {
    return refusal(
      forbidden(read.why === 'expired' ? 'This part URL has expired; ask documents.GetUploadPart for a new one.' : 'This is not a part URL of this service (malformed or changed); ask documents.GetUploadPart for one.'),
      true,
    );
  }
  const claims = read.claims;
  const upload = await findUploadById(db.sql, claims.u);
  if (!upload || Number(upload.expires_at) <= clock.now()) return refusal(notFound(`Upload ${claims.u} no longer exists (uploads expire 24 hours after creation).`), true);
  const access = await judgeAtUse(db, deps.credentials, upload.workspace_id, { credentialId: upload.created_by_key_id, memberId: upload.member_id, operation: 'documents.GetUploadPart', role: claims.r });
  if (!access.ok) return refusal(forbidden(partRefusal(access)), true);
  if (upload.state !== 'open') return refusal(conflict(`Upload ${upload.id} is ${upload.state}; it takes no more parts.`), true);
  const announced = req.headers['content-length'];
  if (announced !== undefined) {
    const n = Number(announced);
    if (n > claims.s) return refusal(payloadTooLarge(`Part ${claims.p} is ${claims.s} bytes; the body announces ${n} (Content-Length). Nothing was stored.`), true);
    if (n < claims.s) return refusal(invalidInput(`Part ${claims.p} must be exactly ${claims.s} bytes; the body announces ${n} (Content-Length). Nothing was stored.`), true);
  }
  // The part PUTs of the upload's credential, per minute (server/limits.ts), taken before the body is read.
  const parts = partPutBucket(upload.created_by_key_id, await workspaceLimits(db.sql, upload.workspace_id));
  const quota = await takeQuota(db.sql, parts.bucket, parts.budget, 1, clock.now());
  if (!quota.ok) {
    const err = new ServiceError(429, 'rate_limited', `The uploads of this credential took the workspace's ${parts.budget.cap} part PUTs a minute; retry this part after ${quota.retryAfterS} s. Nothing was stored.`, { 'Retry-After': String(quota.retryAfterS) });
    return refusal(err, true);
  }

  let blob;
  const paced = pacedBody(req, deps.settings.partBody);
  try {
    blob = await storage.put(null, paced.body, { maxBytes: claims.s, contentType: 'application/octet-stream' });
  } catch (err) {
    if (err instanceof BlobTooLarge) return refusal(payloadTooLarge(`Part ${claims.p} is ${claims.s} bytes; the body is longer. Nothing was stored.`), true);
    if (paced.slow()) {
      const { graceMs, minBytesPerSecond } = deps.settings.partBody;
      logger.info({ upload_id: claims.u, part_number: claims.p }, 'a part upload was cut off (too slow); nothing kept');
      return refusal(
        new ServiceError(408, 'invalid_input', `Part ${claims.p} arrived too slowly: after ${Math.round(graceMs / 1000)} s a part must arrive at ${Math.round(minBytesPerSecond / 1024)} KiB a second or more on average. Nothing was stored; send it again.`),
        true,
      );
    }
    if (!req.complete || req.destroyed) {
      logger.info({ upload_id: claims.u, part_number: claims.p }, 'a part upload was cut off; nothing kept');
      return null;
    }
    throw err;
  }
  if (blob.size !== claims.s) {
    await storage.delete(blob.id);
    return refusal(invalidInput(`Part ${claims.p} must be exactly ${claims.s} bytes; ${blob.size} arrived. Nothing was stored.`));
  }
  if (claims.h && blob.sha256 !== claims.h) {
    await storage.delete(blob.id);
    return refusal(invalidInput(`Part ${claims.p} has SHA-256 ${blob.sha256}, not the ${claims.h} its URL was made for. Nothing was stored.`));
  }
  const outcome = await db.tx(async (sql): Promise<{ refused: ServiceError } | { replaced: string | null }> => {
    const u = await findUploadById(sql, claims.u, true);
    if (!u || Number(u.expires_at) <= clock.now()) return { refused: notFound(`Upload ${claims.u} no longer exists (uploads expire 24 hours after creation).`) };
    if (u.state !== 'open') return { refused: conflict(`Upload ${u.id} is ${u.state}; it takes no more parts.`) };
    const before = await findPart(sql, u.id, claims.p);
    await upsertPart(sql, { upload_id: u.id, part_number: claims.p, blob_id: blob.id, size: blob.size, sha256: blob.sha256, received_at: clock.now() });
    return { replaced: before?.blob_id ?? null };
  });
  if ('refused' in outcome) {
    await storage.delete(blob.id);
    return refusal(outcome.refused);
  }
  // The last good write wins; the bytes it replaced go.
  if (outcome.replaced && outcome.replaced !== blob.id) await storage.delete(outcome.replaced).catch((err: unknown) => logger.warn({ err }, 'could not delete a replaced part; the upload cleanup removes it'));
  return { status: 200, body: { part_number: claims.p, size: blob.size, sha256: blob.sha256 } };
}

function send(res: ServerResponse, requestId: string, answer: NonNullable<Answer>, extra: Record<string, string> = {}): void {
  const body = answer.status === 200 ? answer.body : { ...(answer.body as object), request_id: requestId };
  const text = JSON.stringify(body);
  res.writeHead(answer.status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(text)),
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    'Access-Control-Allow-Origin': '*',
    'Access-Control-Expose-Headers': 'Request-Id',
    'Request-Id': requestId,
    ...(answer.close ? { Connection: 'close' } : {}),
    ...answer.headers,
    ...extra,
  });
  res.end(text);
}

/**
 * `PUT /files/parts/<token>` (and its CORS preflight) as a lean endpoint, before express: the raw body
 * must not meet the form parser the page routers run for every request, nor any JSON limit.
 */
export function partEndpoint(deps: DocumentsDeps): RawEndpoint {
  return {
    handle(req, res) {
      const url = req.url ?? '';
      if (!url.startsWith(PART_PREFIX)) return false;
      const requestId = crypto.randomUUID();
      const started = process.hrtime.bigint();
      // As the request log writes every answer, with the token cut (it is the credential).
      res.on('finish', () =>
        deps.logger.info(
          { request_id: requestId, req: { id: requestId, method: req.method, url: `${PART_PREFIX}[token]` }, res: { statusCode: res.statusCode }, ms: Number((process.hrtime.bigint() - started) / 1000n) / 1000 },
          'request completed',
        ),
      );
      const token = url.slice(PART_PREFIX.length).split('?')[0]!;
      if (req.method === 'OPTIONS') {
        res.writeHead(204, {
          'Access-Control-Allow-Origin': '*',
          'Access-Control-Allow-Methods': 'PUT',
          'Access-Control-Allow-Headers': 'Content-Type',
          'Access-Control-Max-Age': '600',
          'Request-Id': requestId,
        });
        res.end();
        return true;
      }
      if (req.method !== 'PUT' || !token || token.includes('/')) {
        const err = req.method !== 'PUT' ? methodNotAllowed(`A part is sent with PUT, not ${req.method}.`, 'PUT, OPTIONS') : notFound(`No such endpoint ${req.method} ${PART_PREFIX}...`);
        send(res, requestId, refusal(err, true)!, err.headers);
        return true;
      }
      receivePart(deps, token, req).then(
        (answer) => {
          if (answer) send(res, requestId, answer);
          else res.destroy();
        },
        (err: unknown) => {
          deps.logger.error({ err, request_id: requestId }, 'a part upload failed');
          if (!res.headersSent) send(res, requestId, refusal(new ServiceError(500, 'internal_error', 'Internal server error.'), true)!);
          else res.destroy();
        },
      );
      return true;
    },
    flush: async () => undefined,
    close: async () => undefined,
    queued: 0,
    refused: 0,
  };
}

/**
 * A file as an attachment, always as a PDF: `Content-Type: application/pdf`, `nosniff`, and a name
 * ending `.pdf` (documentDisposition). A URL an operation issued to a caller works only while that
 * caller still may: its key live and granted the operation, its member active, delegated and in the
 * same role (server/atUse.ts); otherwise 403, as for an expired link.
 */
async function sendFile(deps: DocumentsDeps, req: Request<{ token: string }>, res: Response): Promise<void> {
  const { db, clock, storage } = deps;
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  const token = await readDownloadToken(db, req.params.token, clock.now());
  if (!token.ok) throw forbidden(token.why === 'expired' ? 'This download link has expired; ask for a new one.' : 'This is not a download link of this service (malformed or changed).');
  const { claims } = token;
  if (claims.o) {
    const access = await judgeAtUse(db, deps.credentials, claims.w, { operation: claims.o, credentialId: claims.k ?? null, memberId: claims.m ?? null, role: claims.r ?? null });
    if (!access.ok) throw forbidden(`This download link no longer works: ${access.reason} since it was issued. Links are checked when used; ask ${claims.o} for a new one.`);
  }
  const file = await findFile(db.sql, claims.w, claims.f);
  if (!file) throw notFound('The file of this link does not exist.');
  res.setHeader('Content-Disposition', documentDisposition('attachment', claims.n ?? file.filename));
  res.setHeader('Content-Type', 'application/pdf');
  res.setHeader('Content-Length', String(file.size));
  res.setHeader('ETag', `"${file.sha256}"`);
  res.status(200);
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  const bytes = await storage.get(file.blobId);
  try {
    await pipeline(bytes, res);
  } catch (err) {
    // Headers are out: a failure (a client that went away, damaged bytes) can only cut the body short.
    if (!res.destroyed) res.destroy(err as Error);
  }
}

export function documentRoutes(deps: DocumentsDeps): express.Router {
  const router = express.Router();
  router.get('/files/:token', (req: Request<{ token: string }>, res) => sendFile(deps, req, res));
  router.head('/files/:token', (req: Request<{ token: string }>, res) => sendFile(deps, req, res));
  return router;
}
