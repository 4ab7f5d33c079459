import type { Knex } from 'knex';

/**
 * Webhooks deliver with the access of the credential that proposed them: each subscription records
 * that key (handed to its replacement when the key is replaced) and the member it acted for, and why
 * it stopped when that access was lost (`access_lost`: key_revoked, member_disabled, delegation_lost,
 * read_lost). Existing subscriptions take both from their proposal.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_subscriptions', (t) => {
    t.string('access_key_id', 40).nullable();
    t.string('access_member_id', 40).nullable();
    t.string('access_lost', 40).nullable();
  });
  await knex.raw(
    `UPDATE webhook_subscriptions SET
       access_key_id = (SELECT p.proposed_by_key FROM webhook_proposals p WHERE p.id = webhook_subscriptions.proposal_id),
       access_member_id = (SELECT p.proposed_by_member FROM webhook_proposals p WHERE p.id = webhook_subscriptions.proposal_id)`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_subscriptions', (t) => {
    t.dropColumn('access_key_id');
    t.dropColumn('access_member_id');
    t.dropColumn('access_lost');
  });
}
