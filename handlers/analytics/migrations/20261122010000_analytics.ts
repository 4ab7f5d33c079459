import type { Knex } from 'knex';

/**
 * Website analytics: raw events, sessions maintained as events arrive, and daily rollups that the
 * query operations read (handlers/analytics/ingest.ts keeps them equal to a recomputation from raw events).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('analytics_events', (t) => {
    t.bigIncrements('id').primary();
    t.string('bundle_id', 40).notNullable();
    t.bigInteger('ts').notNullable();
    t.string('visitor', 200).notNullable();
    t.string('type', 16).notNullable();
    t.string('path', 2000).notNullable();
    t.string('referrer_host', 255).nullable();
    t.string('source', 500).notNullable();
    t.string('campaign', 500).notNullable();
    t.string('country', 100).notNullable();
    t.string('device', 100).notNullable();
    t.string('browser', 100).notNullable();
    t.string('os', 100).notNullable();
    t.bigInteger('engaged_ms').notNullable().defaultTo(0);
    t.index(['bundle_id', 'ts'], 'analytics_events_realtime');
    t.index(['bundle_id', 'visitor', 'ts'], 'analytics_events_visitor');
  });
  await knex.schema.createTable('analytics_sessions', (t) => {
    t.string('bundle_id', 40).notNullable();
    t.string('visitor', 200).notNullable();
    t.bigInteger('start_ts').notNullable();
    t.bigInteger('end_ts').notNullable();
    t.integer('day').notNullable();
    t.integer('pageviews').notNullable();
    t.string('entry_page', 2000).notNullable();
    t.bigInteger('engaged_ms').notNullable();
    t.primary(['bundle_id', 'visitor', 'start_ts']);
    t.index(['bundle_id', 'day']);
  });
  await knex.schema.createTable('analytics_daily', (t) => {
    t.string('bundle_id', 40).notNullable();
    t.integer('day').notNullable();
    t.bigInteger('pageviews').notNullable().defaultTo(0);
    t.bigInteger('visitors').notNullable().defaultTo(0);
    t.bigInteger('sessions').notNullable().defaultTo(0);
    t.bigInteger('bounces').notNullable().defaultTo(0);
    t.bigInteger('duration_ms').notNullable().defaultTo(0);
    t.bigInteger('engaged_ms').notNullable().defaultTo(0);
    t.primary(['bundle_id', 'day']);
  });
  // One row per visitor with a pageview on a day: `visitors` of analytics_daily counts them.
  await knex.schema.createTable('analytics_visitor_days', (t) => {
    t.string('bundle_id', 40).notNullable();
    t.integer('day').notNullable();
    t.string('visitor', 200).notNullable();
    t.bigInteger('n').notNullable();
    t.primary(['bundle_id', 'day', 'visitor']);
  });
  // Breakdown rollups. `pageviews` is the row count (session landings for entry_page), `views` the
  // divisor of avg_engagement_ms (pageviews of those sessions for entry_page).
  await knex.schema.createTable('analytics_dim_daily', (t) => {
    t.string('bundle_id', 40).notNullable();
    t.integer('day').notNullable();
    t.string('dimension', 16).notNullable();
    t.string('value', 2000).notNullable();
    t.bigInteger('pageviews').notNullable().defaultTo(0);
    t.bigInteger('visitors').notNullable().defaultTo(0);
    t.bigInteger('engaged_ms').notNullable().defaultTo(0);
    t.bigInteger('views').notNullable().defaultTo(0);
    t.primary(['bundle_id', 'dimension', 'day', 'value']);
  });
  // Distinct visitors per (day, dimension, value); `n` counts their pageviews (sessions for entry_page).
  await knex.schema.createTable('analytics_dim_visitors', (t) => {
    t.string('bundle_id', 40).notNullable();
    t.integer('day').notNullable();
    t.string('dimension', 16).notNullable();
    t.string('value', 2000).notNullable();
    t.string('visitor', 200).notNullable();
    t.bigInteger('n').notNullable();
    t.primary(['bundle_id', 'dimension', 'day', 'value', 'visitor']);
  });
  if (knex.client.config.client === 'pg') {
    // Breakdown rows order by value in code-point order on both databases (SQLite compares bytes).
    for (const table of ['analytics_dim_daily', 'analytics_dim_visitors']) {
      await knex.raw(`ALTER TABLE ${table} ALTER COLUMN value TYPE varchar(2000) COLLATE "C"`);
    }
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['analytics_dim_visitors', 'analytics_dim_daily', 'analytics_visitor_days', 'analytics_daily', 'analytics_sessions', 'analytics_events']) {
    await knex.schema.dropTableIfExists(table);
  }
}
