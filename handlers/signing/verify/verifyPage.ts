/**
 * The public verification page: anyone holding a file checks it without an account or a support ticket.
 *
 *   GET  /verify   a form to choose a PDF (and how to check it without this service: pdfsig).
 *   POST /verify   the PDF as `multipart/form-data` (field `file`, what the form sends) or as the raw body
 *                  (`Content-Type: application/pdf` or `application/octet-stream`, e.g. `curl --data-binary`);
 *                  at most 50 MiB. Answers the result page: the seal (valid or not, covering the whole
 *                  file or not, who sealed it and when, the RFC 3161 timestamp) and whether the file's
 *                  SHA-256 is the sealed archive of a request of this service, with its title, id and
 *                  signers' names and times. Nothing is stored or logged of the file; no document
 *                  contents, e-mail or IP addresses are shown (the archive itself carries those).
 *
 * It changes nothing, so it needs no session and no CSRF token; a post whose `Origin` names another site
 * is refused all the same (403).
 *
 * Holding it shut: the whole body is read first, under a deadline (VERIFY_BODY_TIMEOUT_MS, 120 s) and
 * a minimum pace (after VERIFY_BODY_GRACE_MS, 10 s, at least VERIFY_BODY_MIN_BYTES_PER_SECOND, 64 KiB/s
 * on average), or the post is cut (408, connection closed); a client address reads at most
 * VERIFY_READS_PER_ADDRESS (2) bodies at once (429 with Retry-After), a process at most
 * VERIFY_READS (12) (503). Only a whole body takes a check slot: checking costs CPU (hashing and
 * verifying up to 50 MiB), so a process checks at most 4 files at once, at most 2 of one client address
 * (503 / 429 with Retry-After beyond). The counters are per process (a CPU and memory guard of the
 * process itself, not a budget shared through the database); the client address is `req.ip`, so
 * TRUST_PROXY decides. The file is at most 50 MiB however it comes (a multipart part of 50 MiB + 1
 * byte is 413 like a raw body).
 */
import fs from 'node:fs';
import type { Readable } from 'node:stream';
import type { Request, Response, Router } from 'express';
import { envNumber, type ServiceEnv } from '../../../server/config.ts';
import type { ModuleDeps } from '../../../server/module.ts';
import { sameOrigin } from '../../../server/pages.ts';
import { timeInWords } from '../../../server/pages/format.ts';
import { verifyDocument, type Verification } from './verifyDocument.ts';

/** The largest file the page takes (the documents module's file limit). */
export const VERIFY_MAX_BYTES = 50 * 1024 * 1024;
const MULTIPART_OVERHEAD = 64 * 1024;
const VERIFY_CONCURRENCY = 4;
const VERIFY_CONCURRENCY_PER_ADDRESS = 2;

/** How a body must arrive, and how many may be read at once (see the file's comment). */
export interface VerifyReadLimits {
  timeoutMs: number;
  graceMs: number;
  minBytesPerSecond: number;
  readsPerAddress: number;
  reads: number;
}

export function verifyReadLimits(env: ServiceEnv): VerifyReadLimits {
  return {
    timeoutMs: envNumber(env, 'VERIFY_BODY_TIMEOUT_MS', 120_000, 100),
    graceMs: envNumber(env, 'VERIFY_BODY_GRACE_MS', 10_000, 0),
    minBytesPerSecond: envNumber(env, 'VERIFY_BODY_MIN_BYTES_PER_SECOND', 64 * 1024, 0),
    readsPerAddress: envNumber(env, 'VERIFY_READS_PER_ADDRESS', 2, 1),
    reads: envNumber(env, 'VERIFY_READS', 12, 1),
  };
}

const PAGES_DIR = new URL('./pages/', import.meta.url);
const CSS_PATH = '/assets/verify.css';
const CSS = fs.readFileSync(new URL('verify.css', PAGES_DIR));

class BodyError extends Error {
  constructor(
    readonly status: 400 | 408 | 413 | 415,
    message: string,
  ) {
    super(message);
  }
}

/** The client went away before its body was whole: nothing to answer. */
class Gone extends Error {}

const TOO_LARGE = 'The file is larger than the limit of 50 MiB.';

/**
 * The request body, refusing more than `max` bytes as soon as they arrive, and a body that is not whole
 * by the deadline or arrives slower than the minimum pace (408).
 */
function readBody(req: Readable, max: number, limits: VerifyReadLimits): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const started = performance.now();
    const done = (err: Error | null) => {
      clearTimeout(deadline);
      clearInterval(pace);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      if (err) {
        req.pause();
        reject(err);
      } else resolve(Buffer.concat(chunks, size));
    };
    const slow = () => new BodyError(408, `The file did not arrive in time (it must arrive within ${Math.round(limits.timeoutMs / 1000)} s, at least ${Math.round(limits.minBytesPerSecond / 1024)} KiB a second). Try again on a faster connection, or check it with pdfsig.`);
    const deadline = setTimeout(() => done(slow()), limits.timeoutMs);
    const pace = setInterval(() => {
      const elapsed = performance.now() - started;
      if (elapsed >= limits.graceMs && size < (limits.minBytesPerSecond * elapsed) / 1000) done(slow());
    }, Math.max(50, Math.min(1000, limits.graceMs || 1000)));
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) done(new BodyError(413, TOO_LARGE));
      else chunks.push(chunk);
    };
    const onEnd = () => done(null);
    const onError = () => done(new Gone());
    const onClose = () => done(new Gone());
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/** The `file` part of a multipart/form-data body (the first part with a filename when none is called file). */
export function multipartFile(body: Buffer, contentType: string): Buffer {
  const m = /boundary=(?:"([^"]{1,70})"|([^;\s]{1,70}))/i.exec(contentType);
  if (!m) throw new BodyError(400, 'The form data has no boundary.');
  const delimiter = Buffer.from(`--${m[1] ?? m[2]}`, 'latin1');
  const parts: Array<{ headers: string; content: Buffer }> = [];
  let at = body.indexOf(delimiter);
  while (at >= 0) {
    const start = at + delimiter.length;
    if (body.subarray(start, start + 2).toString('latin1') === '--') break;
    const headerEnd = body.indexOf('\r\n\r\n', start);
    if (headerEnd < 0) break;
    const next = body.indexOf(Buffer.concat([Buffer.from('\r\n', 'latin1'), delimiter]), headerEnd + 4);
    if (next < 0) break;
    parts.push({ headers: body.subarray(start, headerEnd).toString('utf8'), content: body.subarray(headerEnd + 4, next) });
    at = next + 2;
  }
  const named = (p: { headers: string }) => /content-disposition:[^\r\n]*\bname="file"/i.test(p.headers);
  const part = parts.find(named) ?? parts.find((p) => /content-disposition:[^\r\n]*\bfilename=/i.test(p.headers));
  if (!part) throw new BodyError(400, 'Choose a PDF file to check.');
  if (part.content.length > VERIFY_MAX_BYTES) throw new BodyError(413, TOO_LARGE);
  return part.content;
}

async function uploadedFile(req: Request, limits: VerifyReadLimits): Promise<Buffer> {
  const type = (req.headers['content-type'] ?? '').toLowerCase();
  const announced = Number(req.headers['content-length'] ?? 0);
  if (type.startsWith('multipart/form-data')) {
    if (announced > VERIFY_MAX_BYTES + MULTIPART_OVERHEAD) throw new BodyError(413, TOO_LARGE);
    return multipartFile(await readBody(req, VERIFY_MAX_BYTES + MULTIPART_OVERHEAD, limits), req.headers['content-type']!);
  }
  if (type.startsWith('application/pdf') || type.startsWith('application/octet-stream')) {
    if (announced > VERIFY_MAX_BYTES) throw new BodyError(413, TOO_LARGE);
    return readBody(req, VERIFY_MAX_BYTES, limits);
  }
  throw new BodyError(415, 'Send the PDF from the form, or as the request body with Content-Type application/pdf.');
}

/** Counts per client address (this process's own). */
class PerAddress {
  private readonly n = new Map<string, number>();
  total = 0;
  count(address: string): number {
    return this.n.get(address) ?? 0;
  }
  enter(address: string): void {
    this.n.set(address, this.count(address) + 1);
    this.total++;
  }
  leave(address: string): void {
    const left = this.count(address) - 1;
    if (left > 0) this.n.set(address, left);
    else this.n.delete(address);
    this.total--;
  }
}

type Verdict = 'sealed' | 'unknown-seal' | 'appended' | 'broken' | 'none';

/** The one-line answer a person reads first. */
function verdictOf(v: Verification): { kind: Verdict; heading: string; text: string } {
  const s = v.seal;
  if (!s.present)
    return { kind: 'none', heading: 'No seal', text: 'This file carries no seal. It is not a signed archive of this service (an original document before signing, or another PDF).' };
  if (!s.valid)
    return { kind: 'broken', heading: 'The seal is broken', text: 'This file carries a seal that does not verify: the file was changed after it was sealed, or the seal is damaged. Do not rely on its contents.' };
  if (!s.covers_whole_document)
    return { kind: 'appended', heading: 'Changed after sealing', text: 'The seal verifies, but it covers only part of the file: something was added after sealing. Do not rely on the added part.' };
  if (!v.signing_request)
    return { kind: 'unknown-seal', heading: 'Valid seal, unknown to this service', text: 'The seal verifies and covers the whole file, but no signing request of this service has this archive. It was sealed elsewhere or by someone else.' };
  return { kind: 'sealed', heading: 'Signed and unchanged', text: 'This is the sealed archive of a completed signing request of this service, exactly as the service made it.' };
}

function requestView(v: Verification) {
  const r = v.signing_request;
  if (!r) return null;
  return {
    id: r.signing_request_id,
    title: r.title,
    status: r.status,
    completed: r.completed_at === null ? null : timeInWords(r.completed_at),
    signers: r.signers.map((s) => ({ name: s.name, typedName: s.typed_name, signedAt: s.signed_at === null ? null : timeInWords(s.signed_at) })),
  };
}

export function verifyRoutes(deps: ModuleDeps<unknown>): Router {
  const { db, pages, logger } = deps;
  const views = pages.views(PAGES_DIR);
  const router = pages.router();
  const limits = verifyReadLimits(deps.config.env);
  const reading = new PerAddress();
  const checking = new PerAddress();

  const send = (res: Response, status: number, data: Record<string, unknown>) =>
    pages.send(res, status, {
      title: 'Verify a signed document',
      bodyClass: 'signer',
      styles: ['/assets/signing/signer.css', CSS_PATH],
      html: views.render('verify', { problem: null, result: null, maxMiB: VERIFY_MAX_BYTES / 1024 / 1024, ...data }),
    });

  router.get(CSS_PATH, (_req: Request, res: Response) => {
    res.setHeader('Content-Type', 'text/css; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache');
    res.status(200).send(CSS);
  });

  router.get('/verify', (_req: Request, res: Response) => send(res, 200, {}));

  router.post('/verify', async (req: Request, res: Response) => {
    if (!sameOrigin(req)) return pages.notice(res, 403, 'Refused', ['This form may only be sent from a page of this service.']);
    const address = req.ip ?? req.socket.remoteAddress ?? '';
    const busy = (status: 429 | 503, problem: string) => {
      // The body is not read: the client is told to close the connection.
      res.setHeader('Retry-After', '5');
      res.setHeader('Connection', 'close');
      return send(res, status, { problem });
    };
    if (reading.count(address) >= limits.readsPerAddress) return busy(429, `Your address is already sending ${reading.count(address)} files to check. Wait until they are checked, then try again.`);
    if (reading.total >= limits.reads) return busy(503, 'The service is receiving many files right now. Try again in a few seconds.');
    let bytes: Buffer;
    reading.enter(address);
    try {
      bytes = await uploadedFile(req, limits);
    } catch (err) {
      if (err instanceof Gone) return void res.destroy();
      if (!(err instanceof BodyError)) throw err;
      // An unread body would be left on the connection: the client is told to close it.
      if (err.status === 413 || err.status === 408) res.setHeader('Connection', 'close');
      if (err.status === 408) logger.info({ status: 408 }, 'verify: a post was cut off (too slow)');
      return send(res, err.status, { problem: err.message });
    } finally {
      reading.leave(address);
    }
    if (bytes.length === 0) return send(res, 400, { problem: 'The file is empty. Choose a PDF file to check.' });
    if (checking.count(address) >= VERIFY_CONCURRENCY_PER_ADDRESS) {
      res.setHeader('Retry-After', '5');
      return send(res, 429, { problem: 'Your address is already checking other files. Try again in a few seconds.' });
    }
    if (checking.total >= VERIFY_CONCURRENCY) {
      res.setHeader('Retry-After', '5');
      return send(res, 503, { problem: 'The service is checking other files right now. Try again in a few seconds.' });
    }
    checking.enter(address);
    try {
      const result = await verifyDocument(db.sql, bytes, null);
      const seal = result.seal;
      send(res, 200, {
        result: {
          verdict: verdictOf(result),
          sha256: result.sha256,
          size: bytes.length,
          seal: {
            present: seal.present,
            valid: seal.valid,
            whole: seal.covers_whole_document,
            signer: seal.signer,
            signedAt: seal.signed_at === null ? null : timeInWords(seal.signed_at),
            timestamp: seal.timestamp ? { valid: seal.timestamp.valid, time: seal.timestamp.time === null ? null : timeInWords(seal.timestamp.time) } : null,
          },
          request: requestView(result),
        },
      });
    } catch (err) {
      logger.error({ err }, 'verification failed');
      send(res, 500, { problem: 'The file could not be checked. Try again later.' });
    } finally {
      checking.leave(address);
    }
  });

  return router;
}
