import type { Knex } from 'knex';

/** Workspaces, members, sites, apps, API keys, sales pipelines, change events, idempotency, rate limits, jobs. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('workspaces', (t) => {
    t.string('id', 40).primary();
    t.string('name', 200).notNullable();
    // Bumped by every change that alters who may do what (keys, grants, members); caches compare it.
    t.bigInteger('auth_version').notNullable().defaultTo(0);
    t.bigInteger('created_at').notNullable();
  });
  await knex.schema.createTable('members', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('name', 200).notNullable();
    t.string('email', 320).notNullable();
    t.string('role', 16).notNullable();
    t.bigInteger('disabled_at').nullable();
    t.bigInteger('created_at').notNullable();
    t.index(['workspace_id']);
    t.unique(['workspace_id', 'email']);
  });
  await knex.schema.createTable('bundles', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('name', 200).notNullable();
    t.string('domain', 253).notNullable();
    t.bigInteger('created_at').notNullable();
    t.index(['workspace_id']);
  });
  await knex.schema.createTable('apps', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('app_key', 64).notNullable();
    t.string('name', 200).notNullable();
    t.text('resource_types').notNullable();
    t.bigInteger('created_at').notNullable();
    t.unique(['workspace_id', 'app_key']);
  });
  await knex.schema.createTable('api_keys', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('name', 200).notNullable();
    t.string('secret_hash', 64).notNullable();
    t.string('created_by', 40).nullable();
    t.string('replaces_key_id', 40).nullable();
    t.text('operations').notNullable();
    t.text('resources').notNullable();
    t.string('delegation', 16).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('revoked_at').nullable();
    t.index(['workspace_id']);
  });
  await knex.schema.createTable('api_key_delegates', (t) => {
    t.string('key_id', 40).notNullable().references('api_keys.id');
    t.string('member_id', 40).notNullable().references('members.id');
    t.primary(['key_id', 'member_id']);
  });
  await knex.schema.createTable('sales_pipelines', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('owner_member_id', 40).nullable();
    t.string('name', 200).notNullable();
    t.boolean('is_default').notNullable().defaultTo(false);
    t.text('data').notNullable();
    t.string('created_by', 40).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.index(['workspace_id', 'updated_at', 'id']);
    t.index(['workspace_id', 'name']);
  });
  await knex.raw('CREATE UNIQUE INDEX sales_pipelines_one_default ON sales_pipelines (workspace_id) WHERE is_default');
  await knex.schema.createTable('record_events', (t) => {
    t.bigIncrements('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('workspace_id', 40).notNullable();
    t.string('type', 40).notNullable();
    t.string('resource_type', 80).notNullable();
    t.string('record_id', 40).notNullable();
    t.boolean('private').notNullable();
    t.text('changed_fields').nullable();
    t.string('actor_key_id', 40).nullable();
    t.string('actor_member_id', 40).nullable();
    t.bigInteger('occurred_at').notNullable();
    t.index(['workspace_id', 'seq']);
  });
  await knex.schema.createTable('idempotency_receipts', (t) => {
    t.string('scope', 100).notNullable();
    t.string('idem_key', 200).notNullable();
    t.string('operation_id', 100).notNullable();
    t.string('fingerprint', 64).notNullable();
    t.bigInteger('locked_at').nullable();
    t.bigInteger('completed_at').nullable();
    t.integer('status_code').nullable();
    t.text('response_body').nullable();
    t.bigInteger('created_at').notNullable();
    t.primary(['scope', 'idem_key']);
    t.index(['created_at']);
  });
  await knex.schema.createTable('rate_limits', (t) => {
    t.string('bucket', 100).primary();
    t.bigInteger('tat').notNullable();
    t.boolean('allowed').notNullable();
    t.bigInteger('auth_version').notNullable();
  });
  await knex.schema.createTable('jobs', (t) => {
    t.bigIncrements('id').primary();
    t.string('kind', 60).notNullable();
    t.string('dedupe_key', 200).nullable().unique();
    t.text('payload').notNullable();
    t.bigInteger('run_at').notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.string('locked_by', 100).nullable();
    t.bigInteger('locked_until').nullable();
    t.text('last_error').nullable();
    t.index(['run_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['jobs', 'rate_limits', 'idempotency_receipts', 'record_events', 'sales_pipelines', 'api_key_delegates', 'api_keys', 'apps', 'bundles', 'members', 'workspaces']) {
    await knex.schema.dropTableIfExists(table);
  }
}
