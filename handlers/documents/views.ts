/** The documents' answers as the document describes them (Upload, DocumentFile). */
import type { components } from '../../generated/openapi.ts';
import type { StoredFile } from './files.ts';
import type { DbUploadPartRow, DbUploadRow } from './queries.ts';

export type UploadView = components['schemas']['Upload'];
export type FileView = components['schemas']['DocumentFile'];

/** The expected size of part `n` (1-based) of an upload. */
export function partSize(size: number, partSizeBytes: number, partCount: number, n: number): number {
  return n < partCount ? partSizeBytes : size - partSizeBytes * (partCount - 1);
}

export function uploadView(u: DbUploadRow, parts: readonly DbUploadPartRow[]): UploadView {
  const size = Number(u.size);
  const ps = Number(u.part_size);
  const count = Number(u.part_count);
  const received = new Map(parts.map((p) => [Number(p.part_number), p]));
  return {
    upload_id: u.id,
    state: u.state,
    filename: u.filename,
    content_type: u.content_type as UploadView['content_type'],
    size,
    part_size: ps,
    part_count: count,
    parts: Array.from({ length: count }, (_, i) => {
      const got = received.get(i + 1);
      return { part_number: i + 1, size: partSize(size, ps, count, i + 1), received: Boolean(got), sha256: got?.sha256 ?? null };
    }),
    expires_at: Number(u.expires_at),
    created_at: Number(u.created_at),
    file_id: u.file_id,
    rejection_reason: u.rejection_reason,
    private: u.member_id !== null && !u.shared,
  };
}

export function fileView(f: StoredFile): FileView {
  return {
    file_id: f.id,
    filename: f.filename,
    content_type: f.contentType,
    size: f.size,
    sha256: f.sha256,
    page_count: f.pageCount,
    text_tags: (f.textTags ?? []).map((t) => ({ page: t.page, text: t.text, x: t.x, y: t.y, width: t.width, height: t.height })),
    scope: f.ownerMemberId === null ? 'workspace' : 'user',
    owner_member_id: f.ownerMemberId,
    source: f.source,
    created_at: f.createdAt,
  };
}
