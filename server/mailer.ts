/**
 * The platform's mailer (Medusa's notification provider): modules ask for `deps.mailer` and never build
 * one. With `SMTP_URL` set, mail goes through a pooled SMTP transport (`server/mailer/smtp.ts`);
 * without it, into the development mailbox, a table every process shares (`server/mailer/mailbox.ts`),
 * read with `npm run admin -- mail list` / `mail show` and, unless off (MAILBOX_PAGE), on `/mailbox`.
 * Messages are rendered by their callers (`mailTemplates` in `server/mailer/templates.ts` for a text and HTML pair).
 */
import type { Logger } from 'pino';
import addressparser from 'nodemailer/lib/addressparser';
import type { Database } from '../db/database.ts';
import { deleteMailboxMessagesBefore } from '../db/queries/mailbox.ts';
import type { Clock } from './clock.ts';
import type { ServiceEnv } from './config.ts';
import type { JobDefinition } from './jobs.ts';
import { MailboxMailer } from './mailer/mailbox.ts';
import { isMailAddress, type Mailer } from './mailer/message.ts';
import { SmtpMailer } from './mailer/smtp.ts';

export * from './mailer/message.ts';
export { mailTemplates, type MailTemplates } from './mailer/templates.ts';

export interface SmtpSettings {
  readonly host: string;
  readonly port: number;
  /** smtps:// (TLS from the first byte); smtp:// upgrades with STARTTLS when the server offers it. */
  readonly secure: boolean;
  /** `host:port`: what logs show (never the credentials). */
  readonly display: string;
  /** Credentials from the URL; not enumerable, so printing the settings never shows them. */
  readonly auth: { readonly user: string; readonly pass: string } | null;
  /**
   * smtp:// with credentials to a host other than loopback: STARTTLS is required, so a server (or a
   * man in the middle) that does not offer it never receives the password in clear text.
   */
  readonly requireTls: boolean;
  readonly connectionTimeoutMs: number;
  readonly greetingTimeoutMs: number;
  readonly socketTimeoutMs: number;
  readonly maxConnections: number;
}

export interface MailConfig {
  /** null: the development mailbox (no SMTP_URL). */
  readonly smtp: SmtpSettings | null;
  /** The sender of every mail (`Name <address>`): MAIL_FROM. */
  readonly from: string;
}

const DEFAULT_FROM = 'Workspace Operations <no-reply@localhost>';
const FROM_EXAMPLE = 'e.g. "Acme Contracts <contracts@acme.example>"';
function parseFrom(raw: string): string {
  const parsed = addressparser(raw, { flatten: true });
  const address = parsed.length === 1 ? parsed[0]!.address : undefined;
  if (!address || !isMailAddress(address) || /[\r\n]/.test(raw)) {
    throw new Error(`MAIL_FROM must be one sender address, ${FROM_EXAMPLE} (got "${raw}")`);
  }
  return raw.trim();
}

/** Reads SMTP_URL; its errors never repeat the URL, which may hold a password. */
function parseSmtpUrl(raw: string): SmtpSettings {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error('SMTP_URL must be a URL such as smtps://user:password@smtp.example.com:465 (it is not a URL; its value is not shown, it may hold a password)');
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') {
    throw new Error(`SMTP_URL must start with smtp:// or smtps:// (got "${url.protocol}//")`);
  }
  if (!url.hostname) throw new Error('SMTP_URL has no host name');
  if (url.pathname && url.pathname !== '/') throw new Error('SMTP_URL takes no path (only smtp[s]://[user:password@]host[:port])');
  if (url.search || url.hash) throw new Error('SMTP_URL takes no query or fragment (only smtp[s]://[user:password@]host[:port])');
  const secure = url.protocol === 'smtps:';
  const port = url.port ? Number(url.port) : secure ? 465 : 587;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let auth: SmtpSettings['auth'] = null;
  if (url.username || url.password) {
    try {
      auth = { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) };
    } catch {
      throw new Error('SMTP_URL credentials are not valid percent-encoding (encode special characters of the user and password)');
    }
  }
  const loopback = host === 'localhost' || host === '::1' || /^127\./.test(host);
  const settings = {
    host,
    port,
    secure,
    display: `${url.hostname}:${port}`,
    requireTls: !secure && auth !== null && !loopback,
    connectionTimeoutMs: 10_000,
    greetingTimeoutMs: 10_000,
    socketTimeoutMs: 60_000,
    maxConnections: 3,
  };
  return Object.defineProperty(settings, 'auth', { value: auth, enumerable: false }) as SmtpSettings;
}

/** The mail settings from the environment (SMTP_URL, MAIL_FROM); throws a readable error on bad values. */
export function mailConfigFromEnv(env: ServiceEnv): MailConfig {
  const smtpUrl = env.SMTP_URL?.trim();
  const from = env.MAIL_FROM?.trim();
  if (!smtpUrl) return { smtp: null, from: from ? parseFrom(from) : DEFAULT_FROM };
  const smtp = parseSmtpUrl(smtpUrl);
  if (!from) throw new Error(`MAIL_FROM is required when SMTP_URL is set: the sender address of every mail, ${FROM_EXAMPLE}`);
  return { smtp, from: parseFrom(from) };
}

/** One line for the start-up log: where mail goes (the mailbox module says how to read the development mailbox). */
export function mailStartupLine(config: MailConfig): { level: 'info'; fields: Record<string, string>; message: string } {
  if (config.smtp) {
    return { level: 'info', fields: { mail: 'smtp', smtp: config.smtp.display }, message: `mail: sent through SMTP at ${config.smtp.display} as ${config.from}` };
  }
  return {
    level: 'info',
    fields: { mail: 'development mailbox' },
    message:
      'mail: SMTP_URL is not set, so mail is NOT delivered: it goes to the development mailbox in the database, whose links act for their recipients; ' +
      'set SMTP_URL and MAIL_FROM to send real mail',
  };
}

export const MAILBOX_RETENTION_MS = 7 * 86_400_000;

/** The recurring job that deletes development-mailbox messages older than 7 days. */
export function pruneMailboxJob(db: Database, clock: Clock, logger: Logger): JobDefinition {
  return {
    everyMs: 60 * 60_000,
    run: async () => {
      const removed = await deleteMailboxMessagesBefore(db.sql, clock.now() - MAILBOX_RETENTION_MS);
      if (removed) logger.info({ removed }, 'pruned development mailbox');
    },
  };
}

export interface MailerDeps {
  readonly db: Database;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** Builds this process's mailer from the settings: SMTP when configured, else the development mailbox. */
export function createMailer(config: MailConfig, deps: MailerDeps): Mailer {
  return config.smtp ? new SmtpMailer(config.smtp, config.from, deps.logger) : new MailboxMailer(config.from, deps);
}
