'use strict';
/**
 * Documents. Parts are raw `PUT`s to the URL documents.GetUploadPart answers (outside /v1, no key), so
 * the setup sends them itself: a one-page PDF written here (a valid cross-reference table, no library).
 * Uploads made by the setup, on every run (they expire after 24 hours and hold no file):
 *  - `open`: created, no part sent: GetUpload and GetUploadPart read it (200), CompleteUpload is
 *    refused because its part is missing (409);
 *  - `ready` (local runs): its part sent: CompleteUpload completes it (200, a workspace file);
 *  - `rejected`: a text file sent and completed, refused by the scan (the setup checks the 400): it
 *    takes no more parts (GetUploadPart 409).
 * A deployment run completes nothing (a file is never deleted through the API): CompleteUpload's 200 is
 * skipped there. The 503 (a configured ClamAV that does not answer) needs a server started with a
 * dead CLAMAV_URL; the contract server has none, so it is skipped (test/documents/uploads.test.ts
 * checks it on both databases).
 */

/** A one-page PDF with a correct cross-reference table. */
function onePagePdf() {
  const objects = ['<< /Type /Catalog /Pages 2 0 R >>', '<< /Type /Pages /Kids [3 0 R] /Count 1 >>', '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] >>'];
  let out = '%PDF-1.7\n';
  const offsets = [];
  objects.forEach((body, i) => {
    offsets.push(out.length);
    out += `${i + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

const errorSays = (code, pattern) => (body) =>
  body.error === code && pattern.test(body.message) ? null : `expected ${code} with a message matching ${pattern}, got ${body.error}: ${body.message}`;

/** A part URL answered by the service, sent to the server under test (PUBLIC_URL may name another host). */
function here(kit, url) {
  const u = new URL(url);
  return `${new URL(kit.ctx.baseUrl).origin}${u.pathname}`;
}

/** Creates an upload of `bytes` (one part) and, unless `send` is false, PUTs that part. */
async function upload(kit, name, bytes, send = true) {
  const created = await kit.call('documents.CreateUpload', { filename: `${kit.name(name)}.pdf`, content_type: 'application/pdf', size: bytes.length });
  if (send) {
    const part = await kit.call('documents.GetUploadPart', { upload_id: created.upload_id, part_number: 1 });
    const res = await fetch(here(kit, part.url), { method: 'PUT', body: bytes, headers: { 'Content-Type': 'application/pdf' }, signal: AbortSignal.timeout(30_000) });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`PUT of a part answered ${res.status}: ${text.slice(0, 300)}`);
  }
  return created.upload_id;
}

/** CompleteUpload with the main key, whatever it answers: { status, body }. */
async function complete(kit, uploadId) {
  const res = await fetch(`${kit.ctx.baseUrl}/operations/documents.CompleteUpload`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${kit.ctx.keys.main}`, 'Content-Type': 'application/json', 'Idempotency-Key': kit.newIdempotencyKey() },
    body: JSON.stringify({ upload_id: uploadId }),
    signal: AbortSignal.timeout(60_000),
  });
  return { status: res.status, body: await res.json() };
}

const isOwn = (t, status) => Number(t.expected.statusCode) === status;

module.exports = {
  async setup(kit) {
    const local = kit.ctx.mode === 'local';
    const seed = (kit.seed.documents = { open: null, ready: null, rejected: null });
    seed.open = await upload(kit, 'open', onePagePdf(), false);
    if (local) seed.ready = await upload(kit, 'ready', onePagePdf());
    seed.rejected = await upload(kit, 'rejected', Buffer.from('This is a text file, not a PDF.\n'));
    const refused = await complete(kit, seed.rejected);
    if (refused.status !== 400 || !/not a PDF/.test(refused.body.message)) throw new Error(`completing a text file answered ${refused.status}: ${JSON.stringify(refused.body)}`);
  },

  200: {
    'documents.CreateUpload': (t, kit) => {
      kit.setBody(t, { filename: `${kit.name('created')}.pdf`, content_type: 'application/pdf', size: 12582912, part_size: 5242880 });
      kit.expect(t, (body) =>
        body.state === 'open' && body.part_count === 3 && body.parts.length === 3 && body.parts[2].size === 2097152 && body.parts.every((p) => !p.received) && body.file_id === null
          ? null
          : `expected an open upload of 3 parts (the last 2 MiB), got ${JSON.stringify(body)}`,
      );
    },
    'documents.GetUpload': (t, kit) => {
      const id = kit.seed.documents.open;
      kit.setBody(t, { upload_id: id });
      kit.expect(t, (body) => (body.upload_id === id && body.state === 'open' && body.parts.length === 1 && !body.parts[0].received ? null : `expected the open upload ${id}, got ${JSON.stringify(body)}`));
    },
    'documents.GetUploadPart': (t, kit) => {
      kit.setBody(t, { upload_id: kit.seed.documents.open, part_number: 1 });
      kit.expect(t, (body) => (body.method === 'PUT' && /\/files\/parts\/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(body.url) && body.expires_at > Date.now() ? null : `expected a part URL, got ${JSON.stringify(body)}`));
    },
    'documents.CompleteUpload': (t, kit) => {
      const id = kit.seed.documents.ready;
      kit.setBody(t, { upload_id: id || kit.seed.documents.open });
      if (!id) {
        if (isOwn(t, 200)) kit.skip(t, 'a deployment run completes no upload: the file it makes can never be deleted through the API.');
        return;
      }
      kit.expect(t, (body) => (/^file_/.test(body.file_id) && body.page_count === 1 && body.scope === 'workspace' && body.source === 'upload' ? null : `expected a one-page workspace file, got ${JSON.stringify(body)}`));
    },
    'documents.ListDocuments': (t, kit) => {
      kit.setBody(t, { scope: 'workspace', limit: 2 });
      kit.expect(t, (body) => (body.items.length <= 2 && body.items.every((f) => f.scope === 'workspace' && f.owner_member_id === null) ? null : `expected at most 2 workspace files, got ${JSON.stringify(body.items)}`));
    },
  },

  400: {
    // Without Service-Act-As, the user scope names no member.
    'documents.ListDocuments': (t, kit) => {
      kit.setBody(t, { scope: 'user' });
      kit.expect(t, errorSays('invalid_input', /Service-Act-As/));
    },
    // The rejected upload: the scan's reason again.
    'documents.CompleteUpload': (t, kit) => {
      kit.setBody(t, { upload_id: kit.seed.documents.rejected });
      kit.expect(t, errorSays('invalid_input', /^The file was refused: the file is not a PDF/));
    },
    'documents.CreateUpload': (t, kit) => {
      kit.setBody(t, { filename: 'a.pdf', content_type: 'application/pdf', size: 10 * 1048576, part_size: 5242880, part_count: 2 });
      kit.expect(t, errorSays('invalid_input', /not both/));
    },
    'documents.GetUploadPart': (t, kit) => {
      kit.setBody(t, { upload_id: kit.seed.documents.open, part_number: 2 });
      kit.expect(t, errorSays('invalid_input', /has 1 part/));
    },
  },

  404: {
    'documents.GetUpload': (t, kit) => {
      kit.setBody(t, { upload_id: kit.missingId('up') });
      kit.expect(t, errorSays('not_found', /No upload/));
    },
    'documents.GetUploadPart': (t, kit) => {
      kit.setBody(t, { upload_id: kit.missingId('up'), part_number: 1 });
      kit.expect(t, errorSays('not_found', /No upload/));
    },
    'documents.CompleteUpload': (t, kit) => {
      kit.setBody(t, { upload_id: kit.missingId('up') });
      kit.expect(t, errorSays('not_found', /No upload/));
    },
  },

  409: {
    'documents.GetUploadPart': (t, kit) => {
      kit.setBody(t, { upload_id: kit.seed.documents.rejected, part_number: 1 });
      kit.expect(t, errorSays('conflict', /is rejected; it takes no more parts/));
    },
    'documents.CompleteUpload': (t, kit) => {
      kit.setBody(t, { upload_id: kit.seed.documents.open });
      kit.expect(t, errorSays('conflict', /missing part 1;/));
    },
  },

  503: {
    'documents.CompleteUpload': (t, kit) => {
      kit.setBody(t, { upload_id: kit.seed.documents.open });
      kit.skip(t, '503 unavailable needs a configured ClamAV (CLAMAV_URL) that does not answer; the contract server scans without one (test/documents/uploads.test.ts covers it).');
    },
  },
};
