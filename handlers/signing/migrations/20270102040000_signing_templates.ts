import type { Knex } from 'knex';

/**
 * Templates (issue 23): a document with its roles (who signs, in which step, who gets a copy), a
 * title, a message and a signature method, saved for reuse; `signing.SendTemplate` makes a request
 * from one with the people filled in. A template over a member's private file is that member's own.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('signing_templates', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('name', 200).notNullable();
    t.string('file_id', 40).notNullable();
    t.string('title', 200).nullable();
    t.text('message').nullable();
    t.string('signature_method', 20).notNullable();
    // JSON: [{ role, order, cc }], in the order given.
    t.text('roles').notNullable();
    t.boolean('private').notNullable();
    t.string('owner_member_id', 40).nullable();
    t.string('created_by_key_id', 40).nullable();
    t.bigInteger('created_at').notNullable();
    t.index(['workspace_id', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('signing_templates');
}
