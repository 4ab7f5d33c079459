import type { Knex } from 'knex';

/**
 * Each subscription signs by a stored contract (`signing_contract`): `legacy` (the bare hex HMAC-SHA256
 * of the body, `meeting.completed`'s existing contract) or `v1` (`X-Webhook-Timestamp` and
 * `v1=` HMAC over `<timestamp>.<body>`). Existing rows keep what they were signed with until now:
 * `meeting.completed` subscriptions `legacy`, every other `v1`. An owner or admin (or the operator)
 * moves a legacy one to `v1`, once and for good; when and by whom is kept beside it (and in the audit log).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_subscriptions', (t) => {
    t.string('signing_contract', 20).notNullable().defaultTo('v1');
    t.bigInteger('signing_contract_changed_at').nullable();
    t.string('signing_contract_changed_by', 200).nullable();
  });
  await knex.raw(`UPDATE webhook_subscriptions SET signing_contract = 'legacy' WHERE event = 'meeting.completed'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_subscriptions', (t) => {
    t.dropColumn('signing_contract');
    t.dropColumn('signing_contract_changed_at');
    t.dropColumn('signing_contract_changed_by');
  });
}
