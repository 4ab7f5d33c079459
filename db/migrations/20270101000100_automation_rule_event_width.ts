import type { Knex } from 'knex';

/**
 * A rule's trigger may name a module's event (`signing.request.completed`, issue 22), not only
 * `created`/`updated`/`deleted`: `automation_rules.event` takes 40 characters, the width of an event kind.
 * SQLite does not enforce a varchar's length, so only PostgreSQL changes.
 */
export async function up(knex: Knex): Promise<void> {
  if (knex.client.config.client === 'pg') await knex.raw(`ALTER TABLE automation_rules ALTER COLUMN event TYPE varchar(40)`);
}

export async function down(knex: Knex): Promise<void> {
  if (knex.client.config.client === 'pg') await knex.raw(`ALTER TABLE automation_rules ALTER COLUMN event TYPE varchar(20)`);
}
