import type { Knex } from 'knex';

/**
 * Agent access: how a connection's `tools/list` lists its tools (handlers/mcp/listing.ts). `compact`
 * (what the consent page approves by default): a few tools that reach every tool, then lean tools
 * within 30 tools and 10,000 tokens; `full`: every tool in full. Connections approved before this
 * column keep what their clients already read: `full`.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('mcp_connections', (t) => {
    t.string('tool_listing', 16).notNullable().defaultTo('full');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('mcp_connections', (t) => {
    t.dropColumn('tool_listing');
  });
}
