import type { Knex } from 'knex';

/**
 * The page kit's own state (server/pages/): answers held for one view after a form post (a secret
 * shown once, an outcome), sealed with the member session's secret, which is never stored; and the
 * scoped page sessions of people who are not members, opened by one-time links. Only SHA-256 hashes
 * of link tokens and session secrets are stored.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('page_holds', (t) => {
    t.string('session_id', 40).notNullable();
    // The page (path) that shows it, once.
    t.string('path', 400).notNullable();
    // AES-256-GCM under a key derived from the session secret: unreadable from the database alone.
    t.text('sealed').notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.primary(['session_id', 'path']);
    t.index(['expires_at']);
  });
  await knex.schema.createTable('scoped_links', (t) => {
    t.string('token_hash', 64).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    // `<namespace>.<what>`: the one purpose the session it opens serves.
    t.string('purpose', 100).notNullable();
    // What the purpose is about (e.g. the signer of a document); opaque to the platform.
    t.string('subject', 200).notNullable();
    t.string('next', 2000).notNullable();
    t.bigInteger('session_ttl_ms').notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('used_at').nullable();
    t.index(['expires_at']);
  });
  await knex.schema.createTable('scoped_sessions', (t) => {
    t.string('id', 40).primary();
    t.string('secret_hash', 64).notNullable();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('purpose', 100).notNullable();
    t.string('subject', 200).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('revoked_at').nullable();
    t.index(['workspace_id', 'purpose', 'subject']);
    t.index(['expires_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('scoped_sessions');
  await knex.schema.dropTableIfExists('scoped_links');
  await knex.schema.dropTableIfExists('page_holds');
}
