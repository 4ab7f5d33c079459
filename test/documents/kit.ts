/**
 * What documents bring to the shared harness (test/support/kit.ts): for the generated bad-input cases,
 * an upload whose one part has arrived (so documents.CompleteUpload's base request completes it; the
 * API alone cannot send a part, that is a raw PUT outside /v1) and two workspace files (a second page
 * for documents.ListDocuments). Every fixture gets fresh ones.
 */
import { createFile } from '../../handlers/documents/files.ts';
import { insertUpload, upsertPart } from '../../handlers/documents/queries.ts';
import { newId } from '../../server/ids.ts';
import { createBlobStore } from '../../server/storage.ts';
import type { Seed, TestKit } from '../support/kit.ts';
import { makePdf } from './pdfs.ts';

const pdf = makePdf(1, { seed: 'kit' });

async function seedDocuments(seed: Seed): Promise<Record<string, string>> {
  const { db, clock } = seed;
  const bytes = await pdf;
  // The test services keep blobs in the database (the default STORAGE).
  const storage = createBlobStore(db, clock, { backend: 'database' });
  const now = clock.now();
  const uploadId = newId('up');
  await insertUpload(db.sql, {
    id: uploadId,
    workspace_id: seed.ws.workspace_id,
    created_by_key_id: seed.key.id,
    member_id: null,
    shared: false,
    state: 'open',
    filename: 'contract.pdf',
    content_type: 'application/pdf',
    size: bytes.length,
    part_size: bytes.length,
    part_count: 1,
    sha256: null,
    file_id: null,
    rejection_reason: null,
    created_at: now,
    updated_at: now,
    expires_at: now + 24 * 3600_000,
    completed_at: null,
  });
  const part = await storage.put(null, [bytes]);
  await upsertPart(db.sql, { upload_id: uploadId, part_number: 1, blob_id: part.id, size: part.size, sha256: part.sha256, received_at: now });
  let fileId = '';
  for (const at of [now - 1000, now]) {
    const blob = await storage.put(null, [bytes], { contentType: 'application/pdf' });
    const file = await createFile(
      db.sql,
      { workspaceId: seed.ws.workspace_id, ownerMemberId: null, createdByKeyId: seed.key.id, filename: 'contract.pdf', contentType: 'application/pdf', size: blob.size, sha256: blob.sha256, pageCount: 1, blobId: blob.id, source: 'upload' },
      at,
    );
    fileId = file.id;
  }
  return { up: uploadId, file: fileId };
}

export const kit: TestKit = {
  badInput: { seed: seedDocuments },
};
