import type { Knex } from 'knex';

/**
 * Random secrets that every process of one deployment shares (they share the database), by name:
 * `cursor` signs paging cursors (server/cursor.ts). Each is created once, by whichever process needs
 * it first (db/queries/secrets.ts), and never leaves the database.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('service_secrets', (t) => {
    t.string('name', 40).primary();
    t.string('secret', 100).notNullable();
    t.bigInteger('created_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('service_secrets');
}
