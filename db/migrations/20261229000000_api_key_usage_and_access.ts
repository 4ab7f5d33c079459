import type { Knex } from 'knex';

/**
 * API keys on the settings page (handlers/keys/): when a key was last used (`api_keys.last_used_at`,
 * written by the credentials path at most once a minute per key, null until then), and whether the
 * operator lets a workspace use API keys (`workspaces.api_key_access`: `on`, `off` (no new keys,
 * existing ones work) or `stopped` (no new keys, and existing ones are refused with 403)).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('api_keys', (t) => {
    t.bigInteger('last_used_at').nullable();
  });
  await knex.schema.alterTable('workspaces', (t) => {
    t.string('api_key_access', 16).notNullable().defaultTo('on');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('workspaces', (t) => {
    t.dropColumn('api_key_access');
  });
  await knex.schema.alterTable('api_keys', (t) => {
    t.dropColumn('last_used_at');
  });
}
