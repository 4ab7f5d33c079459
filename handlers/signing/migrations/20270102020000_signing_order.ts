import type { Knex } from 'knex';

/**
 * Signing order (issue 23): `signing_recipients.signing_order`, 1 for every recipient of an existing
 * request (they all sign in parallel, as before). Recipients with the same number sign in parallel;
 * the next number is invited when everyone of the previous one has signed. A recipient not invited
 * yet has `invitation_status` `waiting`.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('signing_recipients', (t) => {
    t.integer('signing_order').notNullable().defaultTo(1);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('signing_recipients', (t) => {
    t.dropColumn('signing_order');
  });
}
