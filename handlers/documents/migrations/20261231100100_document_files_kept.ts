import type { Knex } from 'knex';

/**
 * `document_files.kept`: a file another record needs (a signing request's original) is kept; the
 * documents retention (handlers/documents/cleanup.ts) removes only uploaded files that are not kept,
 * once they are older than the retention. The files existing requests use are marked here.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('document_files', (t) => {
    t.boolean('kept').notNullable().defaultTo(false);
  });
  if (await knex.schema.hasTable('signing_requests')) {
    await knex('document_files').whereIn('id', knex('signing_requests').select('source_file_id')).update({ kept: true });
  }
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('document_files', (t) => {
    t.dropColumn('kept');
  });
}
