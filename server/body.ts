import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { invalidJson, payloadTooLarge } from './errors.ts';

/** Largest request body accepted on /v1 (the document says so in the Errors section). */
export const MAX_BODY_BYTES = 1024 * 1024;
const TOO_LARGE = `The body is larger than 1 MB (${MAX_BODY_BYTES.toLocaleString('en')} bytes); send at most that much.`;

/** Content-Encodings a body may come in (body-parser inflated the same ones). */
const DECODERS: Record<string, () => zlib.Gunzip | zlib.Inflate | zlib.BrotliDecompress> = {
  gzip: () => zlib.createGunzip(),
  'x-gzip': () => zlib.createGunzip(),
  deflate: () => zlib.createInflate(),
  br: () => zlib.createBrotliDecompress(),
};

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]+)"?/i;
const JSON_TYPE = /^\s*application\/json\s*(;|$)/i;

/** The refusal of a request that says JSON but sends nothing (no body, or only whitespace). */
export const BODY_MISSING = 'The body is missing: send a JSON object ({} when there is nothing to say).';

/**
 * Why a `/v1` POST is refused before its body is read, given `req.is('application/json')`, or null.
 * That is null when the request has no body at all (neither Content-Length nor Transfer-Encoding):
 * with a JSON Content-Type, the body is what is missing.
 */
export function contentTypeProblem(req: IncomingMessage, isJson: string | false | null): string | null {
  if (isJson) return null;
  return isJson === null && JSON_TYPE.test(req.headers['content-type'] ?? '') ? BODY_MISSING : 'Content-Type must be application/json.';
}

/**
 * Reads a `/v1` request body (Content-Type already checked as application/json) and parses it as one
 * JSON object. What body-parser did, without its general machinery on the hot path: UTF-8 (another
 * charset is `400 invalid_json`), as is or gzip / deflate / br encoded (another Content-Encoding, or
 * data that does not decode, is `400 invalid_json`), at most 1 MB after decoding (`413 invalid_input`,
 * checked on Content-Length first and again while reading), and a body that is empty (said to be
 * missing), not JSON, or JSON but not an object is `400 invalid_json`.
 */
export async function readJsonObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const charset = CHARSET.exec(req.headers['content-type'] ?? '')?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') throw invalidJson('The body must be UTF-8 JSON.');
  const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  const decoder = DECODERS[encoding];
  if (encoding !== 'identity' && !decoder) throw invalidJson(`Content-Encoding ${encoding} is not supported: send the body as is, or gzip, deflate or br.`);
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_BODY_BYTES) {
    req.resume(); // drain, so the connection can answer and stay usable
    throw payloadTooLarge(TOO_LARGE);
  }
  const decoding = decoder?.();
  const source: Readable = decoding ? req.pipe(decoding) : req;
  const text = await new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) return void chunks.push(chunk);
      // Too large: stop collecting (and decoding) but keep draining, so the answer reaches the client.
      source.off('data', onData);
      if (decoding) {
        req.unpipe(decoding);
        decoding.destroy();
      }
      req.resume();
      reject(payloadTooLarge(TOO_LARGE));
    };
    source.on('data', onData);
    source.once('end', () => resolve((chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)).toString('utf8')));
    source.once('error', (err) => reject(source === req ? err : invalidJson(`The body is not valid ${encoding} data.`)));
  });
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw invalidJson(text.trim() === '' ? BODY_MISSING : `The body is not valid JSON: ${whereJsonBroke(text, err)}.`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw invalidJson('The body must be a JSON object.');
  return parsed as Record<string, unknown>;
}

/**
 * Where and how a JSON text broke, from the parser's message, as line and column (1-based) and never
 * quoting the body (it may carry what should not reach a log): "unexpected end of the text at line 3,
 * column 1", "expected ',' or '}' after property value at line 1, column 8".
 */
export function whereJsonBroke(text: string, err: unknown): string {
  const message = err instanceof Error ? err.message : '';
  const at = (offset: number) => {
    const before = text.slice(0, offset);
    const line = before.split('\n').length;
    return `line ${line}, column ${offset - before.lastIndexOf('\n')}`;
  };
  if (/Unexpected end of JSON input/.test(message)) return `it ends too early (at ${at(text.length)})`;
  const position = /at position (\d+)/.exec(message);
  const what = message
    .replace(/ (?:in JSON )?at position \d+.*$/s, '')
    // V8 quotes the text (`, "..."` or `, ..."..."`): never repeated.
    .replace(/, (?:\.\.\.)?".*$/s, '')
    .replace(/^[A-Z]/, (c) => c.toLowerCase())
    .slice(0, 120);
  return position ? `${what} at ${at(Number(position[1]))}` : what || 'it does not parse';
}

/** How deep a JSON value typed into a page's form may nest (a pipeline's stages need 3). */
export const MAX_FORM_JSON_DEPTH = 16;

/**
 * Whether a parsed JSON value nests deeper than `max` levels (objects and arrays), looking no deeper
 * than max + 1: for values taken from forms, which later code walks recursively.
 */
export function nestsDeeperThan(value: unknown, max = MAX_FORM_JSON_DEPTH): boolean {
  let level: unknown[] = [value];
  for (let depth = 0; level.length; depth++) {
    const next: unknown[] = [];
    for (const v of level) if (v !== null && typeof v === 'object') next.push(...Object.values(v as object));
    if (next.length && depth + 1 > max) return true;
    level = next;
  }
  return false;
}
