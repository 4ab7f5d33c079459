/**
 * Every download of a document is a PDF by name, type and headers: the Content-Disposition name ends
 * `.pdf` whatever the file was called (`invoice.exe` -> `invoice.exe.pdf`), `Content-Type:
 * application/pdf`, `X-Content-Type-Options: nosniff`, and an RFC 6266 / 8187 encoding with no header
 * injection, path separators, control or bidirectional characters: the signer's document.pdf, the
 * `/files/` links (GetSigningDocument, archives) and the name GetSigningDocument answers.
 */
import assert from 'node:assert/strict';
import { parse } from 'content-disposition';
import { createFile, documentDisposition, downloadName, downloadUrl } from '../../handlers/documents/files.ts';
import { mintSignerLink } from '../../handlers/signing/signer/links.ts';
import { recordOpened } from '../../handlers/signing/request/lifecycle.ts';
import { archiveFilename } from '../../handlers/signing/archive/registerArchive.ts';
import { createBlobStore } from '../../server/storage.ts';
import { databases, type TestService } from '../support/service.ts';
import { type MailServer, signingService, signingWorkspace, startMailServer } from '../signing/requestSupport.ts';
import { samplePdf } from '../signing/signerKit.ts';

const HOSTILE = [
  'invoice.exe',
  'page.html',
  'image.svg',
  'REPORT.PDF',
  'evil"; filename=x.exe',
  'split\r\nSet-Cookie: a=b.exe',
  '..\\..\\windows\\system32\\calc.exe',
  '../../etc/passwd',
  'invoice\u202Efdp.exe',
  'Avtal för Åsa.html',
  '',
  '...',
  `${'x'.repeat(250)}.exe`,
];

/** What a Content-Disposition header must be: one header line, an RFC 6266 value whose names end `.pdf` and carry nothing unsafe. */
function assertSafeDisposition(header: string | null, label: string): string {
  assert.ok(header, `${label}: a Content-Disposition header`);
  assert.doesNotMatch(header, /[\r\n\u0000-\u001f\u007f]/, `${label}: no control characters`);
  const parsed = parse(header);
  const names = [parsed.parameters.filename, parsed.parameters['filename*']].filter((n): n is string => n !== undefined);
  assert.ok(names.length > 0, `${label}: a filename`);
  for (const name of names) {
    assert.match(name, /\.pdf$/, `${label}: ${JSON.stringify(name)} ends .pdf`);
    assert.doesNotMatch(name, /[/\\\u0000-\u001f\u007f\u202a-\u202e\u2066-\u2069]/, `${label}: ${JSON.stringify(name)} has no separators or controls`);
  }
  assert.equal(Object.keys(parsed.parameters).filter((k) => k.startsWith('filename')).length, names.length, `${label}: no injected parameters`);
  return parsed.parameters.filename!;
}

describe('download names', () => {
  it('always end .pdf: another extension is kept and .pdf appended; control, bidirectional characters and separators become _', () => {
    assert.equal(downloadName('invoice.exe'), 'invoice.exe.pdf');
    assert.equal(downloadName('page.html'), 'page.html.pdf');
    assert.equal(downloadName('image.svg'), 'image.svg.pdf');
    assert.equal(downloadName('contract.pdf'), 'contract.pdf');
    assert.equal(downloadName('REPORT.PDF'), 'REPORT.pdf');
    assert.equal(downloadName('a/b\\c.exe'), 'a_b_c.exe.pdf');
    assert.equal(downloadName('invoice\u202Efdp.exe'), 'invoice_fdp.exe.pdf');
    assert.equal(downloadName('split\r\nSet-Cookie: a=b'), 'split__Set-Cookie: a=b.pdf');
    assert.equal(downloadName('Avtal "Q1"; v2.pdf'), 'Avtal "Q1"; v2.pdf', 'quotes stay in the exact name (filename*); the ASCII filename has them as apostrophes');
    assert.equal(downloadName(''), 'document.pdf');
    assert.equal(downloadName('...'), 'document.pdf');
    assert.equal(downloadName('.pdf'), 'document.pdf');
    assert.equal(downloadName('Avtal för Åsa'), 'Avtal för Åsa.pdf');
    const long = downloadName(`${'x'.repeat(300)}.exe`);
    assert.equal(long.length, 255);
    assert.match(long, /^x+\.pdf$/);
    for (const name of HOSTILE) assertSafeDisposition(documentDisposition('attachment', name), JSON.stringify(name));
  });

  it('encode a name that is not plain ASCII as filename* (RFC 8187) with an ASCII fallback', () => {
    const header = documentDisposition('inline', 'Avtal för Åsa.html');
    assert.match(header, /^inline; /);
    assert.equal(parse(header).parameters.filename, 'Avtal för Åsa.html.pdf', 'filename* decodes to the exact name');
    assert.match(header, /filename="Avtal f\?r \?sa\.html\.pdf"/);
    assert.match(header, /filename\*=UTF-8''Avtal%20f%C3%B6r%20%C3%85sa\.html\.pdf/);
  });

  it("an archive's name ends .pdf whatever the original was called", () => {
    assert.equal(archiveFilename('invoice.exe'), 'invoice.exe (signed).pdf');
    assert.equal(downloadName(archiveFilename('invoice.exe')), 'invoice.exe (signed).pdf');
  });
});

for (const database of databases) {
  describe(`downloads are PDFs by name and headers [${database.name}]`, function () {
    this.timeout(40_000);
    let smtp: MailServer;
    let svc: TestService;

    before(async () => {
      smtp = await startMailServer();
      svc = await signingService(database.url(), smtp);
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    /** A workspace file called `filename`, stored (as an older upload might have) as `contentType`. */
    async function fileNamed(workspaceId: string, filename: string, contentType = 'text/html', source: 'upload' | 'signing_archive' = 'upload') {
      const bytes = Buffer.from(await samplePdf('Hostile name', 1));
      const blob = await createBlobStore(svc.db, svc.clock, svc.config.storage).put(null, [bytes], { contentType });
      return createFile(
        svc.db.sql,
        { workspaceId, ownerMemberId: null, createdByKeyId: null, filename, contentType, size: bytes.length, sha256: blob.sha256, pageCount: 1, blobId: blob.id, source },
        svc.clock.now(),
      );
    }

    it("GetSigningDocument's filename and its /files/ link, and the signer's document.pdf, are PDFs by name, type and nosniff", async () => {
      const ws = await signingWorkspace(svc);
      const api = svc.client(ws.keys.sender!.secret);
      for (const name of HOSTILE) {
        const label = JSON.stringify(name);
        const file = await fileNamed(ws.workspace_id, name);
        const created = await api.signing.RequestFileSignatures({ file_id: file.id, title: 'Hostile', signers: [{ email: 'names@example.test', name: 'N' }] });
        assert.ok(created.data, `${label}: ${JSON.stringify(created.error)}`);
        const doc = await api.signing.GetSigningDocument({ signing_request_id: created.data.signing_request_id, version: 'original' });
        assert.ok(doc.data, JSON.stringify(doc.error));
        assert.equal(doc.data.filename, downloadName(name), `${label}: the answer names the download`);
        assert.match(doc.data.filename, /\.pdf$/);
        const u = new URL(doc.data.url);
        for (const method of ['GET', 'HEAD']) {
          const res = await fetch(`${svc.origin}${u.pathname}`, { method });
          assert.equal(res.status, 200, label);
          assert.equal(res.headers.get('content-type'), 'application/pdf', `${label} ${method}`);
          assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
          assert.equal(assertSafeDisposition(res.headers.get('content-disposition'), `${label} /files/ ${method}`), downloadName(name));
          await res.arrayBuffer();
        }
        const recipient = created.data.recipients[0]!.recipient_id;
        const token = await svc.db.tx((sql) => mintSignerLink(sql, { recipientId: recipient, requestId: created.data!.signing_request_id }, svc.clock.now()));
        await svc.db.tx((sql) => recordOpened(sql, { recipientId: recipient, now: svc.clock.now() }));
        for (const query of ['', '?download=1']) {
          const res = await fetch(`${svc.origin}/sign/${token}/document.pdf${query}`);
          assert.equal(res.status, 200, label);
          assert.equal(res.headers.get('content-type'), 'application/pdf');
          assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
          const disposition = res.headers.get('content-disposition');
          assertSafeDisposition(disposition, `${label} document.pdf${query}`);
          assert.match(disposition!, query ? /^attachment;/ : /^inline;/);
          await res.arrayBuffer();
        }
      }
    });

    it('a /files/ link of an archive, or one made with another name, still downloads as a PDF', async () => {
      const ws = await signingWorkspace(svc);
      const archive = await fileNamed(ws.workspace_id, 'payload.svg', 'image/svg+xml', 'signing_archive');
      for (const filename of [undefined, 'renamed.html']) {
        const link = await downloadUrl(svc.db.sql, svc.config.publicUrl, archive, svc.clock.now(), filename ? { filename } : undefined);
        const res = await fetch(`${svc.origin}${new URL(link.url).pathname}`);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('content-type'), 'application/pdf');
        assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
        assert.equal(assertSafeDisposition(res.headers.get('content-disposition'), 'archive'), filename ? 'renamed.html.pdf' : 'payload.svg.pdf');
        await res.arrayBuffer();
      }
    });
  });
}
