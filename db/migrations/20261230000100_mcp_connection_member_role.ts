import type { Knex } from 'knex';

/**
 * Agent access (issue 17): a personal connection records the role its member had when they approved it
 * (`mcp_connections.member_role`), so that a change of role ends the connection as it ends a sign-in
 * session. Null for workspace connections (and for a personal one written without it: then only the
 * member's being disabled ends it).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('mcp_connections', (t) => {
    t.string('member_role', 16).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('mcp_connections', (t) => {
    t.dropColumn('member_role');
  });
}
