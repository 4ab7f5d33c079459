import type { Knex } from 'knex';

/**
 * Fields a signer fills in (issue 23): `text` and `checkbox` fields with a `label` shown to the signer,
 * `required` or optional, and the `value` the signer gave (recorded with the signature, null before);
 * and a signer's drawn signature (`drawn_signature`: the strokes as JSON, drawn in the archive's
 * signature fields instead of the typed name in a handwriting font).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('signing_fields', (t) => {
    t.boolean('required').notNullable().defaultTo(true);
    t.string('label', 100).nullable();
    t.text('value').nullable();
  });
  await knex.schema.alterTable('signing_recipients', (t) => {
    t.text('drawn_signature').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('signing_recipients', (t) => {
    t.dropColumn('drawn_signature');
  });
  await knex.schema.alterTable('signing_fields', (t) => {
    t.dropColumn('value');
    t.dropColumn('label');
    t.dropColumn('required');
  });
}
