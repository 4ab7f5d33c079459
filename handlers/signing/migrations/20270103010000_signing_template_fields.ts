import type { Knex } from 'knex';

/**
 * Templates carry fields (issue 23): where each signing role's signature, initials, name, date, text
 * and check boxes go on the template's pages, as JSON `[{ role, kind, page, x, y, width, height,
 * required, label }]` (null: none), copied onto each request sent from the template.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('signing_templates', (t) => {
    t.text('fields').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('signing_templates', (t) => {
    t.dropColumn('fields');
  });
}
