import type { Knex } from 'knex';

/**
 * Webhooks: proposals (webhooks.PrepareWebhook) that an owner or admin approves on a page, the
 * subscriptions they become, one delivery per (subscription, event) plus replays, each delivery's
 * attempts, and fixed one-minute windows for the delivery rate limits.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_proposals', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('url', 2048).notNullable();
    t.string('event', 40).notNullable();
    t.text('resource_types').notNullable();
    t.string('proposed_by_key', 40).notNullable();
    t.string('proposed_by_member', 40).nullable();
    t.string('status', 20).notNullable();
    t.bigInteger('expires_at').notNullable();
    t.string('decided_by', 40).nullable();
    t.bigInteger('decided_at').nullable();
    t.string('webhook_id', 40).nullable();
    t.bigInteger('created_at').notNullable();
    t.index(['workspace_id', 'created_at']);
  });
  await knex.schema.createTable('webhook_subscriptions', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('url', 2048).notNullable();
    t.string('event', 40).notNullable();
    t.text('resource_types').notNullable();
    t.boolean('enabled').notNullable();
    // Events committed before this time are not delivered (before approval, or before the last re-enable).
    t.bigInteger('enabled_since').notNullable();
    t.string('secret', 100).notNullable();
    t.string('previous_secret', 100).nullable();
    t.bigInteger('previous_secret_until').nullable();
    t.integer('consecutive_failures').notNullable().defaultTo(0);
    t.bigInteger('disabled_at').nullable();
    t.string('disabled_reason', 300).nullable();
    t.string('proposal_id', 40).notNullable();
    t.string('approved_by', 40).notNullable();
    t.bigInteger('last_attempt_at').nullable();
    t.bigInteger('last_success_at').nullable();
    t.bigInteger('last_failure_at').nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.index(['workspace_id', 'event', 'enabled']);
  });
  await knex.schema.createTable('webhook_deliveries', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable();
    t.string('webhook_id', 40).notNullable().references('webhook_subscriptions.id').onDelete('CASCADE');
    t.string('event_id', 40).notNullable();
    t.string('event_type', 40).notNullable();
    t.string('resource_type', 80).nullable();
    t.string('record_id', 80).nullable();
    t.bigInteger('event_occurred_at').notNullable();
    // The exact body sent on every attempt (event identity and payload never change across retries and replays).
    t.text('payload').notNullable();
    t.string('status', 20).notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.bigInteger('first_attempt_at').nullable();
    t.bigInteger('next_attempt_at').nullable();
    t.bigInteger('last_attempt_at').nullable();
    t.integer('last_status_code').nullable();
    t.text('last_error').nullable();
    t.string('leased_by', 80).nullable();
    t.bigInteger('lease_until').nullable();
    t.string('replay_of', 40).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('finished_at').nullable();
    t.index(['status', 'next_attempt_at']);
    t.index(['webhook_id', 'created_at']);
    t.index(['created_at']);
  });
  // One delivery per (subscription, event); replays are further deliveries of the same event.
  await knex.raw(`CREATE UNIQUE INDEX webhook_deliveries_first ON webhook_deliveries (webhook_id, event_id) WHERE replay_of IS NULL`);
  await knex.schema.createTable('webhook_attempts', (t) => {
    t.string('id', 40).primary();
    t.string('delivery_id', 40).notNullable().references('webhook_deliveries.id').onDelete('CASCADE');
    t.string('webhook_id', 40).notNullable();
    t.string('workspace_id', 40).notNullable();
    t.integer('attempt').notNullable();
    t.bigInteger('started_at').notNullable();
    t.integer('duration_ms').notNullable();
    t.integer('status_code').nullable();
    t.text('error').nullable();
    t.text('response_body').nullable();
    t.bigInteger('next_attempt_at').nullable();
    t.index(['delivery_id', 'attempt']);
  });
  await knex.schema.createTable('webhook_rate_windows', (t) => {
    t.string('bucket', 100).notNullable();
    t.bigInteger('window_start').notNullable();
    t.integer('count').notNullable();
    t.primary(['bucket', 'window_start']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['webhook_rate_windows', 'webhook_attempts', 'webhook_deliveries', 'webhook_subscriptions', 'webhook_proposals']) await knex.schema.dropTableIfExists(table);
}
