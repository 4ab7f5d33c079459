import type { Knex } from 'knex';

/**
 * Fields on the page (issue 23): where a signer's signature, initials, name and signing date go on the
 * document's own pages (PDF points from the page's lower-left corner). The archive draws them there,
 * in the revision it appends after the original's bytes.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('signing_fields', (t) => {
    t.string('id', 40).primary();
    t.string('request_id', 40).notNullable().references('signing_requests.id');
    t.string('recipient_id', 40).notNullable().references('signing_recipients.id');
    t.string('kind', 20).notNullable();
    t.integer('page').notNullable();
    t.double('x').notNullable();
    t.double('y').notNullable();
    t.double('width').notNullable();
    t.double('height').notNullable();
    t.integer('position').notNullable();
    t.index(['request_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('signing_fields');
}
