/**
 * The module's secret-bearing URLs (its `secretPaths`: `/files/`, never logged):
 * - `PUT /files/parts/<token>`: one part's raw bytes (not JSON: the /v1 body limit does not apply; the
 *   part's own size is the limit), streamed into the blob store and hashed while written;
 * - `GET` / `HEAD /files/<token>`: a file's bytes as an attachment (downloadUrl in files.ts).
 * Neither needs an Authorization header: the signed token is the credential. A GET or HEAD changes nothing.
 */
import express, { type Request, type Response } from 'express';
import { pipeline } from 'node:stream/promises';
import { conflict, forbidden, invalidInput, notFound, payloadTooLarge } from '../../server/errors.ts';
import { BlobTooLarge } from '../../server/storage.ts';
import type { DocumentsDeps } from './deps.ts';
import { findFile, readDownloadToken } from './files.ts';
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
  e: number;
}

const corsForParts = (res: Response) => {
  res.setHeader('Access-Control-Allow-Origin', '*');
  res.setHeader('Access-Control-Expose-Headers', 'Request-Id');
};

async function receivePart(deps: DocumentsDeps, req: Request<{ token: string }>, res: Response): Promise<void> {
  const { db, clock, storage, logger } = deps;
  corsForParts(res);
  res.setHeader('Cache-Control', 'no-store');
  const token = await readToken<PartClaims>(db.sql, 'part', req.params.token, clock.now());
  // Refusals before the body is read end the connection, so an unread body is not waited for.
  const refuse = (err: Error) => {
    if (!req.complete) res.setHeader('Connection', 'close');
    throw err;
  };
  if (!token.ok) {
    refuse(forbidden(token.why === 'expired' ? 'This part URL has expired; ask documents.GetUploadPart for a new one.' : 'This is not a part URL of this service (malformed or changed); ask documents.GetUploadPart for one.'));
    return;
  }
  const claims = token.claims;
  const upload = await findUploadById(db.sql, claims.u);
  if (!upload || Number(upload.expires_at) <= clock.now()) return refuse(notFound(`Upload ${claims.u} no longer exists (uploads expire 24 hours after creation).`));
  if (upload.state !== 'open') return refuse(conflict(`Upload ${upload.id} is ${upload.state}; it takes no more parts.`));
  const announced = req.headers['content-length'];
  if (announced !== undefined) {
    const n = Number(announced);
    if (n > claims.s) return refuse(payloadTooLarge(`Part ${claims.p} is ${claims.s} bytes; the body announces ${n} (Content-Length). Nothing was stored.`));
    if (n < claims.s) return refuse(invalidInput(`Part ${claims.p} must be exactly ${claims.s} bytes; the body announces ${n} (Content-Length). Nothing was stored.`));
  }

  let blob;
  try {
    blob = await storage.put(null, req, { maxBytes: claims.s, contentType: 'application/octet-stream' });
  } catch (err) {
    if (err instanceof BlobTooLarge) return refuse(payloadTooLarge(`Part ${claims.p} is ${claims.s} bytes; the body is longer. Nothing was stored.`));
    if (!req.complete || req.destroyed) {
      // The client went away mid-body: nothing was kept, and there is nobody to answer.
      logger.info({ upload_id: claims.u, part_number: claims.p }, 'a part upload was cut off; nothing kept');
      res.destroy();
      return;
    }
    throw err;
  }
  if (blob.size !== claims.s) {
    await storage.delete(blob.id);
    throw invalidInput(`Part ${claims.p} must be exactly ${claims.s} bytes; ${blob.size} arrived. Nothing was stored.`);
  }
  if (claims.h && blob.sha256 !== claims.h) {
    await storage.delete(blob.id);
    throw invalidInput(`Part ${claims.p} has SHA-256 ${blob.sha256}, not the ${claims.h} its URL was made for. Nothing was stored.`);
  }
  const outcome = await db.tx(async (sql) => {
    const u = await findUploadById(sql, claims.u, true);
    if (!u || Number(u.expires_at) <= clock.now()) return { refused: notFound(`Upload ${claims.u} no longer exists (uploads expire 24 hours after creation).`) };
    if (u.state !== 'open') return { refused: conflict(`Upload ${u.id} is ${u.state}; it takes no more parts.`) };
    const before = await findPart(sql, u.id, claims.p);
    await upsertPart(sql, { upload_id: u.id, part_number: claims.p, blob_id: blob.id, size: blob.size, sha256: blob.sha256, received_at: clock.now() });
    return { replaced: before?.blob_id ?? null };
  });
  if ('refused' in outcome) {
    await storage.delete(blob.id);
    throw outcome.refused;
  }
  // The last good write wins; the bytes it replaced go.
  if (outcome.replaced && outcome.replaced !== blob.id) await storage.delete(outcome.replaced).catch((err: unknown) => logger.warn({ err }, 'could not delete a replaced part; the upload cleanup removes it'));
  res.status(200).json({ part_number: claims.p, size: blob.size, sha256: blob.sha256 });
}

/** `filename` for a Content-Disposition header: the name as is (express encodes it, with an ASCII fallback). */
async function sendFile(deps: DocumentsDeps, req: Request<{ token: string }>, res: Response): Promise<void> {
  const { db, clock, storage } = deps;
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  const token = await readDownloadToken(db.sql, req.params.token, clock.now());
  if (!token.ok) throw forbidden(token.why === 'expired' ? 'This download link has expired; ask for a new one.' : 'This is not a download link of this service (malformed or changed).');
  const file = await findFile(db.sql, token.claims.w, token.claims.f);
  if (!file) throw notFound('The file of this link does not exist.');
  res.attachment(token.claims.n ?? file.filename);
  res.setHeader('Content-Type', file.contentType);
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
  router.options('/files/parts/:token', (_req, res) => {
    corsForParts(res);
    res.setHeader('Access-Control-Allow-Methods', 'PUT');
    res.setHeader('Access-Control-Allow-Headers', 'Content-Type');
    res.setHeader('Access-Control-Max-Age', '600');
    res.status(204).end();
  });
  router.put('/files/parts/:token', (req: Request<{ token: string }>, res) => receivePart(deps, req, res));
  router.get('/files/:token', (req: Request<{ token: string }>, res) => sendFile(deps, req, res));
  router.head('/files/:token', (req: Request<{ token: string }>, res) => sendFile(deps, req, res));
  return router;
}
