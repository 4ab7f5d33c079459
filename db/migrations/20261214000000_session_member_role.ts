import type { Knex } from 'knex';

/**
 * A sign-in session remembers its member's role at sign-in: it ends when that member's role changes
 * (or the member is disabled), no longer when anything in the workspace changes its auth version
 * (keys, other members, rules). `auth_version` stays, written but no longer consulted.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('member_sessions', (t) => {
    t.string('member_role', 16).nullable();
  });
  await knex.raw(`UPDATE member_sessions SET member_role = (SELECT m.role FROM members m WHERE m.id = member_sessions.member_id)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('member_sessions', (t) => {
    t.dropColumn('member_role');
  });
}
