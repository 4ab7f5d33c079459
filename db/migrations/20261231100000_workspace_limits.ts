import type { Knex } from 'knex';

/**
 * A workspace's own limits (server/limits.ts), set by the operator (`npm run admin -- workspace limits`):
 * one row per workspace that has any, each column null where the default applies.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('workspace_limits', (t) => {
    t.string('workspace_id', 40).primary().references('id').inTable('workspaces').onDelete('CASCADE');
    t.integer('mails_per_hour').nullable();
    t.integer('mails_per_day').nullable();
    t.integer('recipients_per_request').nullable();
    t.integer('member_invitations_per_hour').nullable();
    t.integer('open_uploads_per_key').nullable();
    t.integer('part_puts_per_minute').nullable();
    t.bigInteger('stored_bytes').nullable();
    t.bigInteger('updated_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('workspace_limits');
}
