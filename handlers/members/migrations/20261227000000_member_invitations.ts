import type { Knex } from 'knex';

/**
 * Invitations to join a workspace (handlers/members/): an owner or admin invites an e-mail address with a
 * role; the mailed link `/signin/invite/<token>` carries a 256-bit token of which only the SHA-256 is
 * stored. Valid 7 days, used once (`used_at`, with the member it created), or revoked before.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('member_invitations', (t) => {
    t.string('id', 40).primary();
    t.string('token_hash', 64).notNullable().unique();
    t.string('workspace_id', 40).notNullable().references('id').inTable('workspaces').onDelete('CASCADE');
    t.string('email', 254).notNullable();
    t.string('role', 40).notNullable();
    t.string('invited_by', 40).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('used_at').nullable();
    t.string('member_id', 40).nullable();
    t.bigInteger('revoked_at').nullable();
    t.string('revoked_by', 40).nullable();
    t.index(['workspace_id', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('member_invitations');
}
