/**
 * The SMTP backend: nodemailer's pooled transport (a few kept connections, closed at shutdown) with
 * timeouts far below nodemailer's minutes-long defaults. Recipients the server refuses at RCPT come
 * back in `rejected` with its answer; anything that stops the whole send throws MailUnavailableError.
 * Logs name the server as host:port only: SMTP_URL may carry a password.
 */
import crypto from 'node:crypto';
import type { Sql } from '../../db/database.ts';
import nodemailer, { type Mail, type NodemailerError, type SMTPPoolOptions, type SMTPPoolSentMessageInfo } from 'nodemailer';
import type { Logger } from 'pino';
import type { SmtpSettings } from '../mailer.ts';
import { checkMessage, type Mailer, type MailMessage, MailUnavailableError, type RejectedRecipient, recipientsOf, type SendResult, senderDomain } from './message.ts';

type Transport = Mail<SMTPPoolSentMessageInfo, SMTPPoolOptions>;

const rejectedFrom = (errors: readonly NodemailerError[] | undefined): RejectedRecipient[] =>
  (errors ?? []).map((e) => ({
    address: e.recipient ?? '',
    reason: e.response ?? e.message,
    temporary: (e.responseCode ?? 500) < 500,
  }));

export class SmtpMailer implements Mailer {
  readonly kind = 'smtp' as const;

  /** Mail that has left cannot be rolled back: sends inside a transaction go out at once. */
  within(_sql: Sql): Mailer {
    return this;
  }
  private readonly transport: Transport;
  private readonly domain: string;
  private readonly inFlight = new Set<Promise<unknown>>();
  private closed = false;

  constructor(
    private readonly settings: SmtpSettings,
    private readonly from: string,
    private readonly logger: Logger,
  ) {
    this.domain = senderDomain(from);
    this.transport = nodemailer.createTransport({
      pool: true,
      host: settings.host,
      port: settings.port,
      secure: settings.secure,
      requireTLS: settings.requireTls,
      ...(settings.auth ? { auth: { user: settings.auth.user, pass: settings.auth.pass } } : {}),
      maxConnections: settings.maxConnections,
      maxMessages: 100,
      connectionTimeout: settings.connectionTimeoutMs,
      greetingTimeout: settings.greetingTimeoutMs,
      socketTimeout: settings.socketTimeoutMs,
      dnsTimeout: settings.connectionTimeoutMs,
      // Bodies are the caller's rendered text: never let them pull in files or URLs.
      disableFileAccess: true,
      disableUrlAccess: true,
      logger: false,
      debug: false,
    });
  }

  /** An error text without the credentials, whatever a server or library echoed. */
  private scrub(text: string): string {
    const auth = this.settings.auth;
    let out = text;
    for (const secret of [auth?.pass, auth?.user]) if (secret && secret.length >= 3) out = out.split(secret).join('[redacted]');
    return out.slice(0, 1000);
  }

  async send(message: MailMessage): Promise<SendResult> {
    if (this.closed) throw new MailUnavailableError('the mailer is closed: this process is stopping', 'connection', true);
    const sending = this.deliver(message);
    this.inFlight.add(sending);
    try {
      return await sending;
    } finally {
      this.inFlight.delete(sending);
    }
  }

  private async deliver(message: MailMessage): Promise<SendResult> {
    checkMessage(message);
    const { valid, invalid } = recipientsOf(message);
    const messageId = `<${crypto.randomUUID()}@${this.domain}>`;
    const log = { mail: messageId, tag: message.tag, smtp: this.settings.display };
    if (!valid.length) {
      this.logger.warn({ ...log, rejected: invalid.length }, 'mail not sent: no valid recipient');
      return { accepted: [], rejected: invalid, messageId };
    }
    try {
      const info = await this.transport.sendMail({
        from: this.from,
        to: valid,
        subject: message.subject,
        text: message.text,
        html: message.html,
        headers: { ...message.headers },
        messageId,
      });
      const rejected = [...invalid, ...rejectedFrom((info as { rejectedErrors?: NodemailerError[] }).rejectedErrors)];
      const accepted = (info.accepted ?? []).map((a: string | { address: string }) => (typeof a === 'string' ? a : a.address));
      this.logger.info({ ...log, accepted: accepted.length, rejected: rejected.length }, 'mail sent');
      return { accepted, rejected, messageId };
    } catch (err) {
      const e = err as NodemailerError;
      // Every recipient refused at RCPT: an answer per address, as when only some are.
      if (e.code === 'EENVELOPE' && e.command === 'RCPT TO' && e.rejectedErrors?.length) {
        const rejected = [...invalid, ...rejectedFrom(e.rejectedErrors)];
        this.logger.warn({ ...log, accepted: 0, rejected: rejected.length }, 'mail refused for every recipient');
        return { accepted: [], rejected, messageId };
      }
      // The message itself refused for good after the recipients were taken (content, size): refused for each of them.
      if ((e.code === 'EMESSAGE' || e.command === 'DATA') && e.permanent) {
        const reason = this.scrub(e.response ?? e.message);
        this.logger.warn({ ...log, accepted: 0, reason }, 'mail refused by the server');
        return { accepted: [], rejected: [...invalid, ...valid.map((address) => ({ address, reason, temporary: false }))], messageId };
      }
      throw this.unavailable(e, log);
    }
  }

  private unavailable(e: NodemailerError, log: Record<string, unknown>): MailUnavailableError {
    const detail = this.scrub(e.response ?? e.message ?? String(e));
    let error: MailUnavailableError;
    if (e.code === 'EAUTH' || e.code === 'ENOAUTH') {
      error = new MailUnavailableError(`SMTP server ${this.settings.display} refused the credentials: ${detail}`, 'auth', false);
    } else if (e.responseCode) {
      error = new MailUnavailableError(`SMTP server ${this.settings.display} refused the mail (${e.command ?? 'SMTP'}): ${detail}`, 'refused', !e.permanent);
    } else {
      const cause = e.originalCode ?? e.code ?? 'error';
      error = new MailUnavailableError(`SMTP server ${this.settings.display} cannot be reached (${cause}): ${detail}`, 'connection', true);
    }
    this.logger.warn({ ...log, kind: error.kind, code: e.originalCode ?? e.code }, 'mail not sent: ' + error.message);
    return error;
  }

  /** Refuses new sends, lets the ones in flight finish, then closes the pooled connections. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.inFlight]);
    this.transport.close();
  }
}
