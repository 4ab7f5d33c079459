import type { Knex } from 'knex';

/**
 * The blob store's database backend (server/storage/database.ts): file bytes in chunk rows, so every
 * process on one database sees the same files. A blob row exists from a put's start; it is visible
 * only once `completed_at` is set, after its last chunk. `touched_at` moves with every chunk batch, so
 * the cleanup of unfinished puts (a crashed process) never takes one still being written.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('blobs', (t) => {
    t.string('id', 128).primary();
    // Known once complete.
    t.bigInteger('size').nullable();
    t.string('sha256', 64).nullable();
    t.string('content_type', 255).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('touched_at').notNullable();
    t.bigInteger('completed_at').nullable();
    t.index(['touched_at']);
  });
  await knex.schema.createTable('blob_chunks', (t) => {
    t.string('blob_id', 128).notNullable().references('blobs.id').onDelete('CASCADE');
    t.integer('idx').notNullable();
    // bytea on PostgreSQL, BLOB on SQLite; 256 KiB each (the last one shorter).
    t.binary('bytes').notNullable();
    t.primary(['blob_id', 'idx']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('blob_chunks');
  await knex.schema.dropTableIfExists('blobs');
}
