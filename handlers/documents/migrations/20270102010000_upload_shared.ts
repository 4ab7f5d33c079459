import type { Knex } from 'knex';

/**
 * `document_uploads.shared`: an upload made acting for a member that becomes a workspace file
 * (`documents.CreateUpload` with `private: false`, as the Documents page sends by default) rather than
 * the member's private file. Existing uploads keep what they were (a member's upload is private).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('document_uploads', (t) => {
    t.boolean('shared').notNullable().defaultTo(false);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('document_uploads', (t) => {
    t.dropColumn('shared');
  });
}
