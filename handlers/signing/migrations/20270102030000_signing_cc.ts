import type { Knex } from 'knex';

/**
 * CC recipients (issue 23): `signing_recipients.role`, `signer` for every existing recipient. A `cc`
 * recipient never signs and is never invited to; it gets the completed copy (its `invitation_status`
 * is `none`).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('signing_recipients', (t) => {
    t.string('role', 10).notNullable().defaultTo('signer');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('signing_recipients', (t) => {
    t.dropColumn('role');
  });
}
