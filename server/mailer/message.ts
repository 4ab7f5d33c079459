/** What a mail is, what sending answers, and the checks every backend applies before sending. */
import type { Sql } from '../../db/database.ts';
import addressparser from 'nodemailer/lib/addressparser';

export interface MailMessage {
  /** One address or several (`user@example.com`); each is accepted or refused on its own. */
  readonly to: string | readonly string[];
  readonly subject: string;
  readonly text: string;
  readonly html: string;
  /** Extra header lines (e.g. `List-Unsubscribe`); names are HTTP-like tokens, values one line. */
  readonly headers?: Readonly<Record<string, string>>;
  /** What the mail is (`<namespace>.<what>`, e.g. `signing.invitation`): logged and kept in the mailbox. */
  readonly tag?: string;
  /** The workspace it concerns, kept in the development mailbox (owners read their workspace's mail). */
  readonly workspaceId?: string | null;
}

export interface RejectedRecipient {
  readonly address: string;
  /** The server's answer (`550 5.1.1 mailbox unavailable`) or why it was never sent. */
  readonly reason: string;
  /** A 4xx answer: the server may take it later (greylisting, a full mailbox). */
  readonly temporary: boolean;
}

export interface SendResult {
  /** Addresses the server (or the mailbox) took. */
  readonly accepted: string[];
  /** Addresses refused, each with the reason: a refusal is an answer, not an exception. */
  readonly rejected: RejectedRecipient[];
  /** The Message-ID header of the mail (`<...@...>`). */
  readonly messageId: string;
}

export interface Mailer {
  /** `smtp` or `mailbox` (the development mailbox). */
  readonly kind: 'smtp' | 'mailbox';
  /**
   * Sends one message to its recipients. Refused addresses come back in `rejected`; a server that
   * cannot be reached, or that refuses the whole transaction, throws `MailUnavailableError`.
   */
  send(message: MailMessage): Promise<SendResult>;
  /**
   * The mailer for sends made inside the open transaction `sql` (an operation's `ctx.sql`): the
   * development mailbox writes the mail in that transaction, so it exists exactly when the transaction
   * commits (and SQLite's one connection, held by the transaction, is never waited for); SMTP sends at
   * once, as mail that has left cannot be rolled back.
   */
  within(sql: Sql): Mailer;
  /** Closes pooled connections (at shutdown). */
  close(): Promise<void>;
}

/** Why a send did not happen at all: the caller keeps the mail and retries later when `retryable`. */
export class MailUnavailableError extends Error {
  override readonly name = 'MailUnavailableError';
  constructor(
    message: string,
    /** `connection` (unreachable, timeout, TLS, dropped), `auth` (credentials refused), `refused` (the server refused the sender or the message for a while). */
    readonly kind: 'connection' | 'auth' | 'refused',
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

const LABEL = /^[^\s@<>()[\]\\,;:".]+(?:\.[^\s@<>()[\]\\,;:".]+)*$/;

/** Whether a string is one e-mail address this service will try to send to (no display name, no control or format character). */
export function isMailAddress(value: string): boolean {
  if (value.length > 254) return false;
  const at = value.lastIndexOf('@');
  if (at <= 0 || at > 64) return false;
  const local = value.slice(0, at);
  const domain = value.slice(at + 1);
  // No control or invisible format character (bidi overrides and isolates, zero-width characters): an
  // address is read by people on pages, in mail and on the evidence pages, and none holds one honestly.
  return LABEL.test(local) && LABEL.test(domain) && !/[\p{Cc}\p{Cf}]/u.test(value);
}

/** Splits a message's recipients into addresses to send to and the ones refused before sending. */
export function recipientsOf(message: MailMessage): { valid: string[]; invalid: RejectedRecipient[] } {
  const list = typeof message.to === 'string' ? [message.to] : [...message.to];
  const seen = new Set<string>();
  const valid: string[] = [];
  const invalid: RejectedRecipient[] = [];
  for (const raw of list) {
    const address = String(raw).trim();
    if (seen.has(address.toLowerCase())) continue;
    seen.add(address.toLowerCase());
    if (isMailAddress(address)) valid.push(address);
    else invalid.push({ address, reason: 'not an e-mail address', temporary: false });
  }
  return { valid, invalid };
}

const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
const RESERVED_HEADERS = new Set(['from', 'to', 'cc', 'bcc', 'subject', 'message-id', 'date', 'content-type', 'mime-version', 'content-transfer-encoding']);

/** Checks a message's own fields (a caller's mistake, not a recipient's): throws a TypeError naming it. */
export function checkMessage(message: MailMessage): void {
  if (typeof message.subject !== 'string' || !message.subject.trim() || /[\r\n]/.test(message.subject)) throw new TypeError('mail subject must be one non-empty line');
  if (typeof message.text !== 'string' || typeof message.html !== 'string') throw new TypeError('mail needs both a text and an HTML body');
  if (typeof message.to !== 'string' && (!Array.isArray(message.to) || message.to.length === 0)) throw new TypeError('mail needs at least one recipient');
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    if (!HEADER_NAME.test(name) || RESERVED_HEADERS.has(name.toLowerCase())) throw new TypeError(`mail header ${JSON.stringify(name)} is not allowed`);
    if (typeof value !== 'string' || /[\r\n]/.test(value)) throw new TypeError(`mail header ${name} must be one line`);
  }
}

/** The sender's domain, for Message-IDs. */
export function senderDomain(from: string): string {
  const address = addressparser(from, { flatten: true })[0]?.address ?? '';
  return address.slice(address.lastIndexOf('@') + 1) || 'localhost';
}

