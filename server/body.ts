import type { IncomingMessage } from 'node:http';
import { invalidInput, invalidJson } from './errors.ts';

/** Largest request body accepted on /v1 (the document says so in the Errors section). */
export const MAX_BODY_BYTES = 1024 * 1024;

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]+)"?/i;

/**
 * Reads a `/v1` request body (Content-Type already checked as application/json) and parses it as one
 * JSON object. What body-parser did, without its general machinery on the hot path: UTF-8 only (a
 * charset other than utf-8 and any Content-Encoding other than identity are `400 invalid_json`),
 * at most 1 MB (`400 invalid_input`, checked on Content-Length first and again while reading), and
 * a body that is empty, not JSON, or JSON but not an object is `400 invalid_json`.
 */
export async function readJsonObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const charset = CHARSET.exec(req.headers['content-type'] ?? '')?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') throw invalidJson('The body must be UTF-8 JSON.');
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') throw invalidJson('The body must be UTF-8 JSON without Content-Encoding.');
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_BODY_BYTES) {
    req.resume(); // drain, so the connection can answer and stay usable
    throw invalidInput('The body is larger than 1 MB.');
  }
  const text = await new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) return void chunks.push(chunk);
      // Too large: stop collecting but keep draining, so the answer reaches the client.
      req.off('data', onData);
      req.resume();
      reject(invalidInput('The body is larger than 1 MB.'));
    };
    req.on('data', onData);
    req.once('end', () => resolve((chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)).toString('utf8')));
    req.once('error', reject);
  });
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw text.trim() === '' ? invalidJson('The body must be a JSON object.') : invalidJson('The body is not valid JSON.');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw invalidJson('The body must be a JSON object.');
  return parsed as Record<string, unknown>;
}
