/**
 * The evidence pages identify a signer in whatever script the name is written (issue 21, finding 15): a
 * request titled in Chinese, signed by 王小明, محمد علي, דוד לוי, अनिल कुमार, สมชาย ใจดี, 김민준 and a name with
 * emoji, each typed name also drawn as the signature. The sealed archive is read back as an auditor would:
 * `pdftotext` gives every name as typed (poppler puts right-to-left text back into logical order between
 * embedding marks, which are dropped before comparing), no `?` stands in for a letter, `pdffonts` shows the
 * fallback fonts embedded as subsets, the file grows by well under a megabyte, `qpdf --check` is clean and
 * `pdfsig` finds the seal valid. A name in a script no bundled font draws still reaches the text layer. The
 * first two evidence pages are written to test-output/ as PNGs for a reviewer's eye.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { storedPdfChecks } from '../../handlers/documents/pdf.ts';
import { buildArchive } from '../../handlers/signing/archive/evidence.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { archiveSpec, bytesOf, contractPdf, FIREFOX, pdfPages, pdfsig, putFile, requestRow, run, type Signer, signedRequest, writeTo } from './archiveKit.ts';

const TITLE = '王小明的服务协议 2027';
const NAMES = ['王小明', 'محمد علي', 'דוד לוי', 'अनिल कुमार', 'สมชาย ใจดี', '김민준', 'Zoë 👩‍💼 Ng 😀'];
const SIGNERS: Signer[] = NAMES.map((name, i) => ({ email: `signer${i}@scripts.test`, name, typedName: name, ip: `203.0.113.${i + 1}`, userAgent: FIREFOX }));

/** pdftotext's text of the evidence pages, its bidi embedding marks dropped and spaces collapsed. */
async function evidenceText(file: string, firstPage: number): Promise<string> {
  const text = (await run('pdftotext', ['-f', String(firstPage), file, '-'])).stdout;
  return text.replace(/[\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, '').replace(/\s+/g, ' ');
}

for (const database of databases) {
  describe(`signing: evidence pages in every script [${database.name}]`, function () {
    this.timeout(60_000);
    let dir: string;
    let svc: TestService;

    before(async () => {
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'evidence-scripts-'));
      svc = await startTestService(database.url(), { publicUrl: 'https://sign.acme.example' });
    });
    after(async () => {
      await svc?.close();
      await fs.rm(dir, { recursive: true, force: true });
    });

    it('Chinese, Arabic, Hebrew, Devanagari, Thai, Korean and emoji names and a Chinese title: extractable as typed, no "?", subset fonts, small, qpdf clean, seal valid', async () => {
      const ws = await svc.apply(archiveSpec());
      const original = await contractPdf('Scripts', 1);
      const source = await putFile(svc, ws.workspace_id, original, { pages: 1, filename: 'Scripts.pdf' });
      const { requestId } = await signedRequest(svc, ws, source, SIGNERS, { title: TITLE });
      await svc.jobs.runDue();
      const row = await requestRow(svc, requestId);
      assert.ok(row.archive_file_id, `archive built (error: ${row.archive_error})`);
      const bytes = await bytesOf(svc, ws.workspace_id, row.archive_file_id);
      const file = await writeTo(dir, 'scripts.pdf', bytes);

      const text = await evidenceText(file, 2);
      assert.ok(text.includes(TITLE), `the title as typed in:\n${text}`);
      for (const name of NAMES) {
        // Signer field, typed-name field, the drawn signature and the event log each carry it.
        assert.ok(text.split(name).length - 1 >= 3, `${name}: ${text.split(name).length - 1} times in:\n${text}`);
      }
      assert.ok(!text.includes('?'), `no character replaced by "?":\n${text}`);

      const fonts = (await run('pdffonts', ['-f', '2', file])).stdout;
      for (const font of ['NotoSansSC', 'NotoSansArabic', 'NotoSansHebrew', 'NotoSansDevanagari', 'NotoSansThai', 'NotoSansKR', 'NotoEmoji', 'KaushanScript', 'DejaVuSans']) {
        assert.match(fonts, new RegExp(`[A-Z]{6}\\+${font}\\S*\\s+CID TrueType|[A-Z]{6}\\+${font}\\S*\\s+CID Type 0`), `${font} embedded as a subset:\n${fonts}`);
      }
      assert.ok(fonts.split('\n').slice(2).every((line) => !line.trim() || /\byes\s+yes\s+yes\b/.test(line)), `every font embedded, subset, with ToUnicode:\n${fonts}`);
      const growth = bytes.length - original.length;
      console.log(`      archive ${bytes.length} bytes, ${growth} more than the original (evidence pages, fonts, seal)`);
      assert.ok(growth < 400_000, `the evidence adds ${growth} bytes`);

      assert.match((await run('qpdf', ['--check', file])).stdout, /No syntax or stream encoding errors found/);
      const sig = await pdfsig(file);
      assert.match(sig, /Signature Validation: Signature is Valid\./);
      assert.match(sig, /Total document signed/);

      await fs.mkdir(path.resolve('test-output'), { recursive: true });
      await run('pdftoppm', ['-r', '80', '-f', '2', '-l', '3', '-png', file, path.resolve('test-output', `evidence-scripts-${database.name}`)]);
    });
  });
}

describe('signing: evidence text with no bundled font', () => {
  it('a script no bundled font draws (Tamil) and an unassigned code point are drawn as boxes, the text layer keeps them, no "?"', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'evidence-nofont-'));
    try {
      const original = await contractPdf('No font', 1);
      const name = 'தமிழ் செல்வன்';
      const built = await buildArchive(original, {
        requestId: 'sr_nofontnofontnofontnofont',
        title: `Agreement \u{10FFFD} ${name}`,
        signatureMethod: 'Standard',
        source: { filename: 'a.pdf', sha256: 'e'.repeat(64), size: original.length, pages: 1 },
        createdAt: Date.UTC(2026, 0, 1),
        completedAt: Date.UTC(2026, 0, 2),
        signers: [{ name, email: 'tamil@x.test', typedName: name, signedAt: Date.UTC(2026, 0, 2), ip: null, userAgent: null }],
        events: [],
        sealedBy: 'CN=Test',
        verifyUrl: 'https://x.test/verify',
      }, storedPdfChecks);
      const file = await writeTo(dir, 'nofont.pdf', built.bytes);
      assert.equal(await pdfPages(file), 1 + built.evidencePages);
      const text = await evidenceText(file, 2);
      assert.ok(text.split(name).length - 1 >= 3, `${name} in:\n${text}`);
      assert.ok(!text.includes('?'), text);
      await run('qpdf', ['--check', file]);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
