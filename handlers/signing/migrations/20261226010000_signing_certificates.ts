import type { Knex } from 'knex';

/**
 * The installation's sealing certificate (one row, id `installation`, made by the first process that
 * seals and read by every other), and the blobs an archive job has written but not yet registered as a
 * file: a process killed between the two leaves its blob listed here, and the next run removes it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('signing_certificates', (t) => {
    t.string('id', 40).primary();
    t.text('certificate_pem').notNullable();
    // PKCS#8 PEM. Kept in the database beside everything else it protects; an operator who wants the key
    // elsewhere gives a PKCS#12 (SIGNING_CERTIFICATE_P12_PATH) instead.
    t.text('private_key_pem').notNullable();
    t.bigInteger('created_at').notNullable();
  });
  await knex.schema.createTable('signing_archive_blobs', (t) => {
    t.string('blob_id', 128).primary();
    t.string('request_id', 40).notNullable();
    t.bigInteger('created_at').notNullable();
    t.index(['request_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('signing_archive_blobs');
  await knex.schema.dropTableIfExists('signing_certificates');
}
