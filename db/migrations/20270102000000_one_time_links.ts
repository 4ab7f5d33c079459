import type { Knex } from 'knex';

/**
 * One store of one-time links (server/links.ts, issue 22): the member sign-in links (`signin_links`)
 * and the scoped page links (`scoped_links`) were two tables of one shape. `one_time_links` holds both,
 * told apart by `purpose` (`signin` for a member's sign-in, `<namespace>.<what>` for a scoped page
 * session); `subject` is the member for a sign-in link. Live and recently ended rows are copied over,
 * so a link mailed before the upgrade still works once after it. Only SHA-256 hashes of tokens are stored.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('one_time_links', (t) => {
    t.string('token_hash', 64).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('purpose', 100).notNullable();
    t.string('subject', 200).notNullable();
    // Same-origin path the browser goes to once the link is used.
    t.string('next', 2000).notNullable();
    // How long the session the link opens lasts.
    t.bigInteger('session_ttl_ms').notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('used_at').nullable();
    t.index(['expires_at']);
  });
  await knex.raw(
    `INSERT INTO one_time_links (token_hash, workspace_id, purpose, subject, next, session_ttl_ms, created_at, expires_at, used_at)
     SELECT token_hash, workspace_id, 'signin', member_id, next, ?, created_at, expires_at, used_at FROM signin_links`,
    [12 * 3_600_000],
  );
  await knex.raw(
    `INSERT INTO one_time_links (token_hash, workspace_id, purpose, subject, next, session_ttl_ms, created_at, expires_at, used_at)
     SELECT token_hash, workspace_id, purpose, subject, next, session_ttl_ms, created_at, expires_at, used_at FROM scoped_links`,
  );
  await knex.schema.dropTable('signin_links');
  await knex.schema.dropTable('scoped_links');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.createTable('signin_links', (t) => {
    t.string('token_hash', 64).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('member_id', 40).notNullable().references('members.id');
    t.string('next', 2000).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('used_at').nullable();
    t.index(['expires_at']);
  });
  await knex.schema.createTable('scoped_links', (t) => {
    t.string('token_hash', 64).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('purpose', 100).notNullable();
    t.string('subject', 200).notNullable();
    t.string('next', 2000).notNullable();
    t.bigInteger('session_ttl_ms').notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('used_at').nullable();
    t.index(['expires_at']);
  });
  await knex.raw(
    `INSERT INTO signin_links (token_hash, workspace_id, member_id, next, created_at, expires_at, used_at)
     SELECT l.token_hash, l.workspace_id, l.subject, l.next, l.created_at, l.expires_at, l.used_at FROM one_time_links l
     JOIN members m ON m.id = l.subject WHERE l.purpose = 'signin'`,
  );
  await knex.raw(
    `INSERT INTO scoped_links (token_hash, workspace_id, purpose, subject, next, session_ttl_ms, created_at, expires_at, used_at)
     SELECT token_hash, workspace_id, purpose, subject, next, session_ttl_ms, created_at, expires_at, used_at FROM one_time_links WHERE purpose <> 'signin'`,
  );
  await knex.schema.dropTable('one_time_links');
}
