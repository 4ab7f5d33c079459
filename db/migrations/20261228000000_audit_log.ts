import type { Knex } from 'knex';

/**
 * The audit log (server/audit.ts): every security-relevant change of a workspace (keys, delegation,
 * members and roles, invitations, webhook approvals and secret rotations, signing contracts), with who
 * did it, when and what; never a secret. Kept for AUDIT_RETENTION_DAYS (default 400), then pruned.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('audit_log', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('id').inTable('workspaces').onDelete('CASCADE');
    t.bigInteger('at').notNullable();
    // member | key | operator | system
    t.string('actor_type', 16).notNullable();
    t.string('actor_id', 40).nullable();
    t.string('actor_label', 200).notNullable();
    // e.g. key.created, member.role_changed, webhook.approved
    t.string('action', 64).notNullable();
    t.string('subject_type', 32).nullable();
    t.string('subject_id', 64).nullable();
    t.string('subject_label', 320).nullable();
    // JSON object of what changed (never a secret)
    t.text('details').notNullable();
    t.index(['workspace_id', 'at', 'id']);
    t.index(['at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('audit_log');
}
