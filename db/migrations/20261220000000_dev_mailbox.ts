import type { Knex } from 'knex';

/**
 * The development mailbox (server/mailer/mailbox.ts): with no SMTP_URL, every mail the service sends is
 * kept here instead, so every process sees it; read with `npm run admin -- mail list` / `mail show`.
 * Mails hold links that act for their recipients, so this is as sensitive as a mailbox; pruned after 7 days.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('mailbox_messages', (t) => {
    t.string('id', 40).primary();
    // The workspace the mail concerns (owners read their workspace's mail); null for the service's own.
    t.string('workspace_id', 40).nullable();
    t.string('message_id', 300).notNullable();
    t.string('from_address', 400).notNullable();
    // JSON array of the accepted recipients.
    t.text('recipients').notNullable();
    t.string('subject', 1000).notNullable();
    t.text('body_text').notNullable();
    t.text('body_html').notNullable();
    // JSON object of the caller's extra headers.
    t.text('headers').notNullable();
    t.string('tag', 100).nullable();
    t.bigInteger('created_at').notNullable();
    t.index(['workspace_id', 'created_at']);
    t.index(['created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('mailbox_messages');
}
