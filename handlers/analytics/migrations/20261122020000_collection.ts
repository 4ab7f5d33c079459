import crypto from 'node:crypto';
import type { Knex } from 'knex';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const collectKey = () => `pk_${Array.from(crypto.randomBytes(24), (b) => ALPHABET[b & 31]).join('')}`;

/**
 * Public collection: a publishable collect key per site (bundle), which can do nothing but send
 * events, and the daily salts of the visitor hash (one row per UTC day, shared by every process,
 * deleted after 48 hours by the analytics.salts.prune job).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('bundles', (t) => {
    t.string('collect_key', 40).nullable();
  });
  for (const { id } of await knex('bundles').select<{ id: string }[]>('id')) {
    await knex('bundles').where({ id }).update({ collect_key: collectKey() });
  }
  await knex.schema.alterTable('bundles', (t) => {
    t.unique(['collect_key'], { indexName: 'bundles_collect_key_unique' });
  });
  await knex.schema.createTable('analytics_salts', (t) => {
    t.integer('day').primary();
    t.string('salt', 64).notNullable();
    t.bigInteger('created_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('analytics_salts');
  await knex.schema.alterTable('bundles', (t) => {
    t.dropUnique(['collect_key'], 'bundles_collect_key_unique');
  });
  await knex.schema.alterTable('bundles', (t) => {
    t.dropColumn('collect_key');
  });
}
