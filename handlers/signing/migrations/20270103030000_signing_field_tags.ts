import type { Knex } from 'knex';

/**
 * Fields found from text tags (issue 23): `tag` is the tag's text (`{{signature;signer=1}}`) when the
 * field came from one; the field then covers its tag on the signer's page and in the archive.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('signing_fields', (t) => {
    t.string('tag', 210).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('signing_fields', (t) => {
    t.dropColumn('tag');
  });
}
