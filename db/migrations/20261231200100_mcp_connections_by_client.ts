import type { Knex } from 'knex';

/**
 * Agent access (issue 21): `/oauth/authorize` asks, before the provider runs, whether a member approved
 * this client (a live connection with its redirect address); the lookup goes by `client_id`.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('mcp_connections', (t) => {
    t.index(['client_id'], 'mcp_connections_client_id_index');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('mcp_connections', (t) => {
    t.dropIndex(['client_id'], 'mcp_connections_client_id_index');
  });
}
