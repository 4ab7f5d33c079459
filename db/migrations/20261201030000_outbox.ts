import type { Knex } from 'knex';

/**
 * The reading side of the change-event outbox (server/outbox.ts): one row per named consumer with its
 * durable position and lease, and on PostgreSQL the writing transaction of every event.
 */
export async function up(knex: Knex): Promise<void> {
  const pg = knex.client.config.client === 'pg';
  if (pg) {
    // Rows written before this migration all committed long ago: 0 puts them first, in seq order.
    // A constant default adds the column without rewriting the table; new rows then take the id of
    // the transaction that inserts them, at no cost to the write (the insert has assigned it already).
    await knex.raw(`ALTER TABLE record_events ADD COLUMN txid xid8 NOT NULL DEFAULT '0'`);
    await knex.raw(`ALTER TABLE record_events ALTER COLUMN txid SET DEFAULT pg_current_xact_id()`);
    await knex.raw(`CREATE INDEX record_events_txid_seq ON record_events (txid, seq)`);
  }
  await knex.schema.createTable('outbox_consumers', (t) => {
    t.string('name', 100).primary();
    // The last event handled: (position_xid, position_seq) on PostgreSQL, position_seq on SQLite
    // (where position_xid stays '0').
    if (pg) t.specificType('position_xid', 'xid8').notNullable().defaultTo('0');
    else t.string('position_xid', 20).notNullable().defaultTo('0');
    t.bigInteger('position_seq').notNullable().defaultTo(0);
    t.string('leased_by', 100).nullable();
    t.bigInteger('lease_until').nullable();
    // Failures of the event after the position (reset when it succeeds).
    t.integer('attempts').notNullable().defaultTo(0);
    t.string('failing_event_id', 40).nullable();
    t.bigInteger('retry_at').nullable();
    t.text('last_error').nullable();
    t.bigInteger('last_error_at').nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('outbox_consumers');
  if (knex.client.config.client === 'pg') {
    await knex.raw(`DROP INDEX IF EXISTS record_events_txid_seq`);
    await knex.raw(`ALTER TABLE record_events DROP COLUMN IF EXISTS txid`);
  }
}
