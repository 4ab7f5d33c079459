import type { Knex } from 'knex';

/**
 * Agent access (issue 21): why a connection ended when no person revoked it. `ended_reason` is set with
 * `revoked_at` when a personal connection is ended for good because its member was disabled
 * (`member_disabled`), given another role (`member_role_changed`) or removed (`member_gone`); null for
 * a connection revoked by a member or an operator (and for live ones). The settings page and
 * `connection list` say which.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('mcp_connections', (t) => {
    t.string('ended_reason', 32).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('mcp_connections', (t) => {
    t.dropColumn('ended_reason');
  });
}
