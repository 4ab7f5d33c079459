import type { Knex } from 'knex';

/**
 * Text tags (issue 23): the `{{...}}` spans written in an uploaded PDF's text, found by the upload's
 * checking thread, with their page and position, as JSON (null: none). Signing turns them into fields.
 * Files stored before this have none (their tags are not looked for again).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('document_files', (t) => {
    t.text('text_tags').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('document_files', (t) => {
    t.dropColumn('text_tags');
  });
}
