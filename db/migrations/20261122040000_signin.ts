import type { Knex } from 'knex';

/**
 * One-time sign-in links and the member sessions they open (server/signin.ts). Only SHA-256 hashes of
 * link tokens and session secrets are stored.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('signin_links', (t) => {
    t.string('token_hash', 64).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('member_id', 40).notNullable().references('members.id');
    // Same-origin path the browser is sent to once signed in.
    t.string('next', 2000).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('used_at').nullable();
    t.index(['expires_at']);
  });
  await knex.schema.createTable('member_sessions', (t) => {
    t.string('id', 40).primary();
    t.string('secret_hash', 64).notNullable();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('member_id', 40).notNullable().references('members.id');
    // The workspace's auth version when the session began; any later change ends the session.
    t.bigInteger('auth_version').notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('revoked_at').nullable();
    t.index(['member_id']);
    t.index(['expires_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('member_sessions');
  await knex.schema.dropTableIfExists('signin_links');
}
