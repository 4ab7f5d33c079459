import type { Knex } from 'knex';

/**
 * Signing: requests (signing.RequestFileSignatures) over one fixed source file, their recipients with
 * each one's invitation and signing state, the signers' links (only the SHA-256 of each 256-bit token),
 * and the request's history (signing.ListSigningEvents, oldest first by `seq`).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('signing_requests', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('title', 200).notNullable();
    t.text('message').nullable();
    t.string('signature_method', 20).notNullable();
    // pending | completed | cancelled | expired
    t.string('status', 20).notNullable();
    t.string('source_file_id', 40).notNullable();
    t.string('source_sha256', 64).notNullable();
    // The source was a member's private file: visible only to its owner and the recipient members.
    t.boolean('private').notNullable();
    // The member the sender acted for (null: workspace access), and the key that created it (null: a session or the service).
    t.string('owner_member_id', 40).nullable();
    t.string('created_by_key_id', 40).nullable();
    t.bigInteger('deadline_at').notNullable();
    t.integer('reminder_interval_days').nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.bigInteger('completed_at').nullable();
    t.bigInteger('cancelled_at').nullable();
    t.string('cancel_reason', 500).nullable();
    t.bigInteger('expired_at').nullable();
    t.string('archive_file_id', 40).nullable();
    t.string('archive_sha256', 64).nullable();
    t.text('archive_error').nullable();
    t.index(['workspace_id', 'created_at']);
    t.index(['archive_sha256']);
    t.index(['status', 'deadline_at']);
  });
  await knex.schema.createTable('signing_recipients', (t) => {
    t.string('id', 40).primary();
    t.string('request_id', 40).notNullable().references('signing_requests.id');
    t.integer('position').notNullable();
    t.string('email', 320).notNullable();
    t.string('name', 200).notNullable();
    // pending | opened | signed | declined
    t.string('status', 20).notNullable();
    // sent | queued | failed
    t.string('invitation_status', 20).notNullable();
    t.string('invitation_error', 1000).nullable();
    t.integer('invitation_attempts').notNullable().defaultTo(0);
    t.bigInteger('invited_at').nullable();
    t.bigInteger('last_reminded_at').nullable();
    t.integer('auto_reminders').notNullable().defaultTo(0);
    t.bigInteger('opened_at').nullable();
    t.bigInteger('signed_at').nullable();
    t.bigInteger('declined_at').nullable();
    t.string('decline_reason', 1000).nullable();
    t.string('typed_name', 200).nullable();
    t.string('ip', 64).nullable();
    t.string('user_agent', 1000).nullable();
    // bankid: the provider's evidence as JSON.
    t.text('provider_evidence').nullable();
    t.index(['request_id']);
  });
  await knex.schema.createTable('signing_links', (t) => {
    // SHA-256 (hex) of the 256-bit token in the link; the token itself is never stored.
    t.string('token_hash', 64).primary();
    t.string('recipient_id', 40).notNullable().references('signing_recipients.id');
    t.string('request_id', 40).notNullable();
    t.bigInteger('created_at').notNullable();
    t.index(['recipient_id']);
  });
  await knex.schema.createTable('signing_events', (t) => {
    t.bigIncrements('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('request_id', 40).notNullable();
    t.string('workspace_id', 40).notNullable();
    t.string('kind', 40).notNullable();
    t.string('recipient_id', 40).nullable();
    // JSON object: what the event says (never IP addresses, links, tokens or document contents).
    t.text('data').notNullable();
    t.bigInteger('occurred_at').notNullable();
    t.index(['request_id', 'seq']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['signing_events', 'signing_links', 'signing_recipients', 'signing_requests']) await knex.schema.dropTableIfExists(table);
}
