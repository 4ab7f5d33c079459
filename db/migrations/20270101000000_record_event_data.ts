import type { Knex } from 'knex';

/**
 * Events of kinds a module declares (issue 22: signing and documents) carry their payload: a JSON object
 * of the kind's declared shape (ids, status, counts), written with the event in the change's transaction.
 * Record changes leave it null.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('record_events', (t) => {
    t.text('data').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('record_events', (t) => {
    t.dropColumn('data');
  });
}
