import type { Knex } from 'knex';

/**
 * bankid signing (handlers/signing/credit/credit.ts, bankid/provider.ts): each workspace's signing credit, set by an
 * operator (`npm run admin -- signing credit set|add`), and one charge per bankid request (the request
 * id is the key, so a request is never charged twice); the provider orders a signer starts, and the
 * working PDF of a request (the provider's output after the latest signature, which the next signer's
 * provider signs again, incrementally, and which becomes the archive unmodified after the last one).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('signing_credit', (t) => {
    t.string('workspace_id', 40).primary().references('workspaces.id');
    t.integer('balance').notNullable();
    t.bigInteger('updated_at').notNullable();
  });
  await knex.schema.createTable('signing_charges', (t) => {
    t.string('request_id', 40).primary();
    t.string('workspace_id', 40).notNullable();
    t.integer('amount').notNullable();
    t.bigInteger('charged_at').notNullable();
    t.index(['workspace_id', 'charged_at']);
  });
  await knex.schema.createTable('signing_provider_orders', (t) => {
    t.string('id', 40).primary();
    t.string('request_id', 40).notNullable();
    t.string('recipient_id', 40).notNullable().index();
    t.string('provider', 40).notNullable();
    // The provider's own reference of the order (a real provider's order id); null for the test provider.
    t.string('provider_ref', 200).nullable();
    // open, completed, failed
    t.string('status', 20).notNullable();
    t.string('error', 500).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('completed_at').nullable();
  });
  await knex.schema.createTable('signing_provider_documents', (t) => {
    t.string('request_id', 40).primary();
    t.string('blob_id', 128).notNullable();
    t.string('sha256', 64).notNullable();
    t.bigInteger('size').notNullable();
    // How many signers' signatures the document carries (the compare-and-set version).
    t.integer('signatures').notNullable();
    t.bigInteger('updated_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('signing_provider_documents');
  await knex.schema.dropTableIfExists('signing_provider_orders');
  await knex.schema.dropTableIfExists('signing_charges');
  await knex.schema.dropTableIfExists('signing_credit');
}
