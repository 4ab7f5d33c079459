import type { Knex } from 'knex';

/**
 * Documents: uploads in parts (documents.CreateUpload .. CompleteUpload), the parts received so far
 * (a row per received part, its bytes a blob of deps.storage), and the files a completed, scanned upload
 * (or a signing archive) becomes. Files never change and are never deleted by the API.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('document_uploads', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    // Uploads are the caller's own: the key that created one and the member it acted for (null: none).
    t.string('created_by_key_id', 40).notNullable();
    t.string('member_id', 40).nullable();
    t.string('state', 20).notNullable();
    t.string('filename', 255).notNullable();
    t.string('content_type', 255).notNullable();
    t.bigInteger('size').notNullable();
    t.integer('part_size').notNullable();
    t.integer('part_count').notNullable();
    // The whole file's SHA-256 given at creation (lower-case hex), checked at completion.
    t.string('sha256', 64).nullable();
    t.string('file_id', 40).nullable();
    t.string('rejection_reason', 500).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('completed_at').nullable();
    t.index(['state', 'expires_at']);
  });
  await knex.schema.createTable('document_upload_parts', (t) => {
    t.string('upload_id', 40).notNullable().references('document_uploads.id').onDelete('CASCADE');
    t.integer('part_number').notNullable();
    t.string('blob_id', 128).notNullable();
    t.integer('size').notNullable();
    t.string('sha256', 64).notNullable();
    t.bigInteger('received_at').notNullable();
    t.primary(['upload_id', 'part_number']);
  });
  await knex.schema.createTable('document_files', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    // Null: a workspace file; else that member's private file.
    t.string('owner_member_id', 40).nullable();
    t.string('created_by_key_id', 40).nullable();
    t.string('filename', 255).notNullable();
    t.string('content_type', 255).notNullable();
    t.bigInteger('size').notNullable();
    t.string('sha256', 64).notNullable();
    t.integer('page_count').notNullable();
    t.string('blob_id', 128).notNullable();
    t.string('source', 20).notNullable();
    t.bigInteger('created_at').notNullable();
    t.index(['workspace_id', 'owner_member_id', 'created_at']);
    t.index(['workspace_id', 'sha256']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['document_files', 'document_upload_parts', 'document_uploads']) await knex.schema.dropTableIfExists(table);
}
