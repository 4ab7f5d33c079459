/**
 * Registering a request's signed archive, whichever way it was made (the sealed evidence archive of
 * archiveJob.ts, or the provider's signed PDF of bankid/flow.ts): the file (the source's owner and scope),
 * archive_file_id / archive_sha256, the event archive.completed and the "completed" mails, all in the
 * caller's transaction with the request's row locked.
 */
import type { Sql } from '../../../db/database.ts';
import type { JobQueue } from '../../../server/jobs.ts';
import type { DocumentFiles, StoredFile } from '../files.ts';
import { enqueueCompletedMails } from './completedMail.ts';
import { appendEvent, type DbSigningRequestRow, updateRequest } from '../queries.ts';

/** The archive's file name: the original's, ` (signed)` before `.pdf`, within 255 characters. */
export function archiveFilename(original: string): string {
  const base = original.replace(/\.pdf$/i, '');
  return `${base.slice(0, 255 - ' (signed).pdf'.length)} (signed).pdf`;
}

export async function registerArchive(
  sql: Sql,
  jobs: Pick<JobQueue, 'enqueue'>,
  files: Pick<DocumentFiles, 'create'>,
  request: DbSigningRequestRow,
  archive: { source: StoredFile; blob: { id: string; size: number; sha256: string }; pageCount: number; event: Record<string, unknown> },
  now: number,
): Promise<StoredFile> {
  const { source, blob } = archive;
  const file = await files.create(
    sql,
    {
      workspaceId: request.workspace_id,
      ownerMemberId: source.ownerMemberId,
      createdByKeyId: request.created_by_key_id,
      filename: archiveFilename(source.filename),
      contentType: 'application/pdf',
      size: blob.size,
      sha256: blob.sha256,
      pageCount: archive.pageCount,
      blobId: blob.id,
      source: 'signing_archive',
    },
    now,
  );
  await updateRequest(sql, request.id, { archive_file_id: file.id, archive_sha256: blob.sha256, archive_error: null }, now);
  await appendEvent(sql, { requestId: request.id, workspaceId: request.workspace_id, kind: 'archive.completed', data: { file_id: file.id, sha256: blob.sha256, ...archive.event }, at: now });
  // The "completed" mails to every party (completedMail.ts), sent by their own jobs.
  await enqueueCompletedMails(sql, jobs, request);
  return file;
}
