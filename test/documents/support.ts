/** Uploading through the real API: the generated client for the operations, real HTTP PUTs for the parts. */
import assert from 'node:assert/strict';
import type { ResponseBody, ServiceClient } from '../../generated/client.ts';
import { acme } from '../support/fixtures.ts';
import type { TestService } from '../support/service.ts';

export type Upload = ResponseBody<'documents.CreateUpload'>;
export type DocumentFile = ResponseBody<'documents.CompleteUpload'>;

/** The test server (PUBLIC_URL of the tests' config is not where it listens): part URLs are sent there, path kept. */
let origin = '';
const here = (url: string) => {
  const u = new URL(url);
  return origin ? `${origin}${u.pathname}` : url;
};

/** Acme with two keys for documents: `docs` (delegates to ada and olga) and `other`. */
export async function docsWorkspace(svc: TestService) {
  origin = svc.origin;
  const spec = acme();
  spec.keys!.docs = { name: 'Documents', operations: ['documents.*'], delegation: ['ada', 'olga'] };
  spec.keys!.other = { name: 'Other documents key', operations: ['documents.*'], delegation: ['ada'] };
  const ws = await svc.apply(spec);
  return { ws, api: svc.client(ws.keys.docs!.secret), other: svc.client(ws.keys.other!.secret), ada: ws.members.ada!, olga: ws.members.olga! };
}

export async function put(url: string, body: Uint8Array, headers: Record<string, string> = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(url, { method: 'PUT', body: body as unknown as BodyInit, headers: { 'Content-Type': 'application/octet-stream', ...headers } });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* keep the text */
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/** The bytes of part `n` (1-based) of `bytes` in an upload. */
export const partBytes = (u: Pick<Upload, 'part_size'>, bytes: Uint8Array, n: number) => bytes.subarray((n - 1) * u.part_size, n * u.part_size);

export async function partUrl(api: ServiceClient, uploadId: string, n: number, options: { actAs?: string | null; sha256?: string } = {}): Promise<string> {
  const { data, error } = await api.documents.GetUploadPart({ upload_id: uploadId, part_number: n, ...(options.sha256 ? { sha256: options.sha256 } : {}) }, { actAs: options.actAs });
  assert.ok(data, JSON.stringify(error));
  return here(data.url);
}

export async function sendPart(api: ServiceClient, u: Upload, bytes: Uint8Array, n: number, actAs?: string | null): Promise<void> {
  const res = await put(await partUrl(api, u.upload_id, n, { actAs }), partBytes(u, bytes, n));
  assert.equal(res.status, 200, JSON.stringify(res.body));
}

/** Creates an upload of `bytes`, sends every part, completes it; answers the completion as it came. */
export async function uploadFile(api: ServiceClient, bytes: Uint8Array, options: { filename?: string; partSize?: number; actAs?: string | null } = {}) {
  const created = await api.documents.CreateUpload(
    { filename: options.filename ?? 'contract.pdf', content_type: 'application/pdf', size: bytes.length, ...(options.partSize ? { part_size: options.partSize } : {}) },
    { actAs: options.actAs },
  );
  assert.ok(created.data, JSON.stringify(created.error));
  for (const p of created.data.parts) await sendPart(api, created.data, bytes, p.part_number, options.actAs);
  const completed = await api.documents.CompleteUpload({ upload_id: created.data.upload_id }, { actAs: options.actAs });
  return { upload: created.data, ...completed };
}
