import type { Knex } from 'knex';

/**
 * Agent (MCP) access with OAuth (issue 17).
 *
 * - `oauth_records`: every record of the authorization server (oidc-provider's models: Session,
 *   Interaction, Grant, Client, AuthorizationCode, AccessToken, RefreshToken, RegistrationAccessToken).
 *   Keyed by (model, SHA-256 of the record's id): tokens, codes and session ids are never stored in
 *   clear; `payload` is the record without its id. `grant_id` stays in clear so a grant's tokens can be
 *   revoked together; `uid_hash` finds sessions and interactions by uid.
 * - `mcp_connections`: what a member approved on the consent page. Personal access acts as
 *   `member_id` with that member's own permissions; workspace access holds the chosen grants and
 *   delegation like an API key. `operations` is frozen at approval, so new catalogue operations never
 *   widen an existing connection. The connection id is the OAuth account id of its tokens and its
 *   rate-limit bucket.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('oauth_records', (t) => {
    t.string('model', 32).notNullable();
    t.string('id_hash', 64).notNullable();
    t.string('grant_id', 64).nullable();
    t.string('uid_hash', 64).nullable();
    t.text('payload').notNullable();
    t.bigInteger('expires_at').nullable();
    t.bigInteger('consumed_at').nullable();
    t.primary(['model', 'id_hash']);
    t.index(['grant_id']);
    t.index(['uid_hash']);
    t.index(['expires_at']);
  });
  await knex.schema.createTable('mcp_connections', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('id').inTable('workspaces').onDelete('CASCADE');
    t.string('client_id', 2048).notNullable();
    t.string('client_name', 200).notNullable();
    t.string('redirect_uri', 2048).notNullable();
    // personal | workspace
    t.string('access', 16).notNullable();
    // personal: the member it acts as; workspace: null
    t.string('member_id', 40).nullable();
    // JSON array of operation ids (frozen at approval)
    t.text('operations').notNullable();
    // JSON object resource type -> ["read","write"] (workspace access; personal follows the member's role)
    t.text('resources').notNullable();
    // JSON array of toolset (namespace) names chosen at consent
    t.text('toolsets').notNullable();
    t.boolean('read_only').notNullable().defaultTo(false);
    // none | selected | all (workspace access)
    t.string('delegation', 16).notNullable().defaultTo('none');
    t.string('grant_id', 64).nullable();
    t.string('created_by', 40).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('last_used_at').nullable();
    t.bigInteger('revoked_at').nullable();
    t.index(['workspace_id']);
  });
  await knex.schema.createTable('mcp_connection_delegates', (t) => {
    t.string('connection_id', 40).notNullable().references('id').inTable('mcp_connections').onDelete('CASCADE');
    t.string('member_id', 40).notNullable().references('members.id');
    t.primary(['connection_id', 'member_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('mcp_connection_delegates');
  await knex.schema.dropTableIfExists('mcp_connections');
  await knex.schema.dropTableIfExists('oauth_records');
}
