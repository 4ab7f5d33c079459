/**
 * The development mailbox: with no SMTP_URL every mail is stored in `mailbox_messages` instead of being
 * delivered, so any process (and the admin CLI) can read what the service sent. Addresses under the
 * reserved `.invalid` domain (RFC 2606) are refused as a server would refuse an unknown mailbox, so
 * refusals can be tried without an SMTP server.
 */
import type { Logger } from 'pino';
import type { Database, Sql } from '../../db/database.ts';
import { type DbMailboxMessageRow, getMailboxMessage, insertMailboxMessage, listMailboxMessages, type MailboxFilter } from '../../db/queries/mailbox.ts';
import type { Clock } from '../clock.ts';
import { newId } from '../ids.ts';
import { checkMessage, type Mailer, type MailMessage, type RejectedRecipient, recipientsOf, type SendResult } from './message.ts';

const REFUSED_DOMAIN = /\.invalid$/i;

export class MailboxMailer implements Mailer {
  readonly kind = 'mailbox' as const;

  constructor(
    private readonly from: string,
    private readonly deps: { readonly db: Database; readonly clock: Clock; readonly logger: Logger },
    /** The transaction the mail is written in (`within`); the database's own connection otherwise. */
    private readonly tx: Sql | null = null,
  ) {}

  within(sql: Sql): Mailer {
    return new MailboxMailer(this.from, this.deps, sql);
  }

  async send(message: MailMessage): Promise<SendResult> {
    checkMessage(message);
    const { valid, invalid } = recipientsOf(message);
    const rejected: RejectedRecipient[] = [...invalid];
    const accepted: string[] = [];
    for (const address of valid) {
      if (REFUSED_DOMAIN.test(address)) rejected.push({ address, reason: '550 5.1.1 mailbox unavailable (the development mailbox refuses .invalid addresses)', temporary: false });
      else accepted.push(address);
    }
    const id = newId('ml');
    const messageId = `<${id}@development-mailbox>`;
    if (accepted.length) {
      await insertMailboxMessage(this.tx ?? this.deps.db.sql, {
        id,
        workspace_id: message.workspaceId ?? null,
        message_id: messageId,
        from_address: this.from,
        recipients: JSON.stringify(accepted),
        subject: message.subject,
        body_text: message.text,
        body_html: message.html,
        headers: JSON.stringify(message.headers ?? {}),
        tag: message.tag ?? null,
        created_at: this.deps.clock.now(),
      });
    }
    this.deps.logger.info({ mail: id, tag: message.tag, accepted: accepted.length, rejected: rejected.length }, 'mail stored in the development mailbox');
    return { accepted, rejected, messageId };
  }

  async close(): Promise<void> {}
}

export interface MailboxSummary {
  id: string;
  created_at: string;
  workspace_id: string | null;
  to: string[];
  subject: string;
  tag: string | null;
}

export interface MailboxMessage extends MailboxSummary {
  message_id: string;
  from: string;
  headers: Record<string, string>;
  text: string;
  html: string;
}

const summary = (row: Pick<DbMailboxMessageRow, 'id' | 'workspace_id' | 'recipients' | 'subject' | 'tag' | 'created_at'>): MailboxSummary => ({
  id: row.id,
  created_at: new Date(Number(row.created_at)).toISOString(),
  workspace_id: row.workspace_id,
  to: JSON.parse(row.recipients) as string[],
  subject: row.subject,
  tag: row.tag,
});

/** The mailbox's messages, newest first, without bodies. */
export async function listMailbox(db: Database, filter: MailboxFilter): Promise<MailboxSummary[]> {
  return (await listMailboxMessages(db.sql, filter)).map(summary);
}

/** One message with its bodies; undefined when unknown (or pruned). */
export async function readMailbox(db: Database, id: string): Promise<MailboxMessage | undefined> {
  const row = await getMailboxMessage(db.sql, id);
  if (!row) return undefined;
  return {
    ...summary(row),
    message_id: row.message_id,
    from: row.from_address,
    headers: JSON.parse(row.headers) as Record<string, string>,
    text: row.body_text,
    html: row.body_html,
  };
}
