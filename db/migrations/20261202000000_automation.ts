import type { Knex } from 'knex';

/**
 * Automation rules and their runs, the member inbox, and the cause of a change event.
 *
 * - `automation_rules`: rules authored by operators (the workspace file of `npm run admin -- apply`),
 *   one row per (workspace, app, rule); built-in rules live in code and have no row.
 * - `automation_runs`: one row per (rule, triggering event): the unique key is what makes a run start
 *   exactly once, whatever number of processes read the outbox.
 * - `inbox_notifications`: service notices to members, written in the transaction of their cause.
 * - `record_events.cause_*`: the run whose action wrote the change (null for API writes), so a rule
 *   never re-triggers itself and chains stop at a depth limit.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('automation_rules', (t) => {
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('app_id', 40).notNullable();
    t.string('rule_id', 64).notNullable();
    t.string('name', 200).notNullable();
    t.text('description').nullable();
    t.boolean('enabled').notNullable();
    // When the rule was last created or resumed: changes made before then never run it (no replay).
    t.bigInteger('enabled_since').notNullable();
    t.string('resource_type', 80).notNullable();
    t.string('event', 20).notNullable();
    t.text('trigger').notNullable();
    t.text('actions').notNullable();
    t.string('changed_by', 80).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.primary(['workspace_id', 'app_id', 'rule_id']);
    t.index(['workspace_id', 'resource_type', 'event', 'enabled']);
  });
  await knex.schema.createTable('automation_runs', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable();
    t.string('app_id', 40).notNullable();
    t.string('rule_id', 64).notNullable();
    t.string('event_id', 40).notNullable();
    t.string('event_type', 40).notNullable();
    t.string('resource_type', 80).notNullable();
    t.string('record_id', 40).notNullable();
    t.bigInteger('event_occurred_at').notNullable();
    t.integer('depth').notNullable();
    t.string('status', 20).notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    // The worker holding a running run, until when (a worker that dies mid-run: another takes it over after).
    t.string('leased_by', 80).nullable();
    t.bigInteger('lease_until').nullable();
    t.text('actions').nullable();
    t.text('error').nullable();
    t.bigInteger('queued_at').notNullable();
    t.bigInteger('started_at').nullable();
    t.bigInteger('finished_at').nullable();
    t.unique(['workspace_id', 'app_id', 'rule_id', 'event_id']);
    t.index(['workspace_id', 'app_id', 'rule_id', 'queued_at']);
    t.index(['status', 'queued_at']);
  });
  await knex.schema.createTable('inbox_notifications', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable();
    t.string('member_id', 40).notNullable().references('members.id');
    t.string('kind', 60).notNullable();
    t.string('title', 300).notNullable();
    t.text('body').notNullable();
    t.string('link', 500).nullable();
    t.string('source_id', 80).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('read_at').nullable();
    t.index(['member_id', 'created_at']);
  });
  await knex.schema.alterTable('record_events', (t) => {
    t.string('cause_run_id', 40).nullable();
    t.string('cause_rule', 110).nullable();
    t.integer('cause_depth').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('record_events', (t) => {
    t.dropColumn('cause_run_id');
    t.dropColumn('cause_rule');
    t.dropColumn('cause_depth');
  });
  await knex.schema.dropTableIfExists('inbox_notifications');
  await knex.schema.dropTableIfExists('automation_runs');
  await knex.schema.dropTableIfExists('automation_rules');
}
