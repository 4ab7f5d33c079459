/**
 * Answers held for one view (post/redirect/get): a form post that must show something once (a
 * signing secret) or report an outcome holds it for the page it redirects to, and that page's next
 * view takes it. Held rows are sealed (AES-256-GCM) under a key derived from the member session's
 * secret, which only the browser holds (the database keeps its hash): a copy of the database cannot
 * read them, and no URL or log ever carries them. A reload finds nothing: the page says so.
 */
import crypto from 'node:crypto';
import type { Database } from '../../db/database.ts';
import { putPageHold, takePageHold } from '../../db/queries/pages.ts';
import type { Clock } from '../clock.ts';

/** How long a held answer waits for its view. */
export const HOLD_TTL_MS = 10 * 60_000;

const keyOf = (sessionToken: string) => Buffer.from(crypto.hkdfSync('sha256', sessionToken, 'wso-page-hold', 'v1', 32));

/** Seals a value for one session and page (the path is authenticated too: a row moved to another page does not open). */
export function seal(sessionToken: string, path: string, value: unknown): string {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', keyOf(sessionToken), iv);
  cipher.setAAD(Buffer.from(path));
  const body = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url');
}

/** The sealed value, or undefined when it was sealed for another session or page. */
export function unseal(sessionToken: string, path: string, sealed: string): unknown {
  try {
    const raw = Buffer.from(sealed, 'base64url');
    const decipher = crypto.createDecipheriv('aes-256-gcm', keyOf(sessionToken), raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(path));
    decipher.setAuthTag(raw.subarray(12, 28));
    return JSON.parse(Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8'));
  } catch {
    return undefined;
  }
}

export async function hold(db: Database, clock: Clock, session: { id: string; token: string }, path: string, value: unknown): Promise<void> {
  const now = clock.now();
  await db.tx((sql) => putPageHold(sql, { session_id: session.id, path, sealed: seal(session.token, path, value), created_at: now, expires_at: now + HOLD_TTL_MS }));
}

export async function take(db: Database, clock: Clock, session: { id: string; token: string }, path: string): Promise<unknown> {
  const row = await takePageHold(db.sql, session.id, path, clock.now());
  return row ? unseal(session.token, path, row.sealed) : undefined;
}
