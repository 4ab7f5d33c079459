/**
 * Text tags (handlers/signing/request/textTags.ts): the `{{...}}` fields written in a document. The
 * grammar on its own; then, on both databases, a PDF with tags uploaded through the documents
 * operations (the tags found at upload, on the file), a request sent without `fields` taking its fields
 * from them (each field naming its tag), `fields: []` ignoring them, a tag naming a signer the request
 * lacks refused, a template finding them by role; and the archive judged by poppler and qpdf: the
 * original's bytes first, one valid seal, the text value drawn, and the tag of a field left empty
 * painted over (no ink where it was).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ServiceClient } from '../../generated/client.ts';
import { fieldOfTag, fieldsOfTags } from '../../handlers/signing/request/textTags.ts';
import { listFields, listRecipients } from '../../handlers/signing/queries.ts';
import { recordOpened, recordSigned } from '../../handlers/signing/request/lifecycle.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { startMailServer } from '../support/smtp.ts';
import { bytesOf, pdfsig, run, writeTo } from './archiveKit.ts';
import { signerServiceConfig, signerSpec, taggedPdf, uploadPdf } from './signerKit.ts';

const tag = (text: string, page = 1) => ({ page, text, x: 100, y: 200, width: 120, height: 11 });

describe('text tags: the grammar', () => {
  it('reads the kind, the signer, the label, optional and the size; leaves other {{...}} text alone', () => {
    assert.deepEqual(fieldOfTag(tag('{{signature}}')), { signer: 0, kind: 'signature', page: 1, x: 100, y: 200, width: 120, height: 11, required: true, tag: '{{signature}}' });
    assert.deepEqual(fieldOfTag(tag('{{ Initials ; signer=2 }}')), { signer: 1, kind: 'initials', page: 1, x: 100, y: 200, width: 120, height: 11, required: true, tag: '{{ Initials ; signer=2 }}' });
    assert.deepEqual(fieldOfTag(tag('{{text;signer=3;label=PO number;width=200;height=30}}')), {
      signer: 2, kind: 'text', page: 1, x: 100, y: 200, width: 200, height: 30, required: true, label: 'PO number', tag: '{{text;signer=3;label=PO number;width=200;height=30}}',
    });
    assert.equal(fieldOfTag(tag('{{checkbox;optional}}'))!.required, false);
    assert.equal(fieldOfTag(tag('{{checkbox;required=false}}'))!.required, false);
    assert.equal(fieldOfTag(tag('{{signature;optional}}'))!.required, true, 'a signature is always filled');
    assert.equal(fieldOfTag(tag('{{date signed}}'))!.kind, 'date');
    assert.equal(fieldOfTag(tag('{{text;width=10}}'))!.width, 120, 'never smaller than the tag');
    assert.equal(fieldOfTag(tag('{{text;width=99999}}'))!.width, 2000, 'at most 2,000 points');
    assert.equal(fieldOfTag(tag('{{signature;signer=0}}'))!.signer, 0, 'signer=0 is not a signer: the default stays');
    const spoofed = fieldOfTag(tag('{{text;label=Pay\u202e42 ot\u0007}}'))!;
    assert.equal(spoofed.label, 'Pay42 ot', 'no control or bidi characters in what people are shown');
    assert.equal(spoofed.tag, '{{text;label=Pay42 ot}}');
    assert.equal(fieldOfTag(tag('{{customer_name}}')), null, 'a mail-merge placeholder is not a field tag');
    assert.equal(fieldOfTag(tag('{{}}')), null);
    assert.equal(fieldOfTag(tag('{{stamp;signer=1}}')), null);
    assert.deepEqual(fieldsOfTags([tag('{{name}}'), tag('{{total}}'), tag('{{date}}', 2)]).map((f) => [f.kind, f.page]), [['name', 1], ['date', 2]]);
  });
});

for (const database of databases) {
  describe(`text tags: fields written in the document [${database.name}]`, function () {
    this.timeout(60_000);
    let smtp: Awaited<ReturnType<typeof startMailServer>>;
    let svc: TestService;
    let api: ServiceClient;
    let workspaceId: string;
    let original: Uint8Array;
    let fileId: string;
    let dir: string;

    before(async () => {
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'text-tags-'));
      smtp = await startMailServer();
      svc = await startTestService(database.url(), signerServiceConfig(smtp.url));
      const ws = await svc.apply(signerSpec());
      workspaceId = ws.workspace_id;
      api = svc.client(ws.keys.contracts!.secret, ws.members.olga!);
      original = await taggedPdf();
      fileId = await uploadPdf(svc, api, original, 'purchase-agreement.pdf');
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    const signers = [
      { email: 'buyer@tags.test', name: 'Bea Buyer' },
      { email: 'seller@tags.test', name: 'Sam Seller' },
    ];

    it('finds the tags at upload: each {{...}} with its page and box, on the file', async () => {
      // Uploaded acting for Olga: her private file (scope user).
      const listed = await api.documents.ListDocuments({ scope: 'user' });
      const file = listed.data!.items.find((f) => f.file_id === fileId)!;
      assert.deepEqual(file.text_tags.map((t) => [t.page, t.text]), [
        [1, '{{text;signer=1;label=Order number;width=160}}'],
        [1, '{{checkbox;signer=1;optional;label=Newsletter}}'],
        [2, '{{signature;signer=1;height=30}}'],
        [2, '{{signature;signer=2;height=30}}'],
        [2, '{{date;signer=2}}'],
        [2, '{{invoice_number}}'],
      ]);
      const box = file.text_tags[0]!;
      assert.ok(box.x > 140 && box.x < 160 && Math.abs(box.y - 597.5) < 2 && box.width > 150 && box.height > 9 && box.height < 14, `the tag's box in points: ${JSON.stringify(box)}`);
    });

    it('a request without fields takes them from the tags; fields: [] ignores them; a tag naming a missing signer is refused', async () => {
      const refused = await api.signing.RequestFileSignatures({ file_id: fileId, signers: [signers[0]!] });
      assert.equal(refused.response.status, 400);
      assert.match((refused.error as { message: string }).message, /text tag \{\{signature;signer=2;height=30\}\} on page 2 names signer 2, but the request has 1 signer/);
      const none = await api.signing.RequestFileSignatures({ file_id: fileId, signers: [signers[0]!], fields: [] });
      assert.equal(none.response.status, 200, JSON.stringify(none.error));
      assert.deepEqual(none.data!.fields, []);

      const made = await api.signing.RequestFileSignatures({ file_id: fileId, title: 'Purchase agreement', signers });
      assert.equal(made.response.status, 200, JSON.stringify(made.error));
      const r = made.data!;
      const who = new Map(r.recipients.map((c) => [c.recipient_id, c.email]));
      assert.deepEqual(r.fields.map((f) => [who.get(f.recipient_id), f.kind, f.page, f.required, f.label, f.tag]), [
        ['buyer@tags.test', 'text', 1, true, 'Order number', '{{text;signer=1;label=Order number;width=160}}'],
        ['buyer@tags.test', 'checkbox', 1, false, 'Newsletter', '{{checkbox;signer=1;optional;label=Newsletter}}'],
        ['buyer@tags.test', 'signature', 2, true, null, '{{signature;signer=1;height=30}}'],
        ['seller@tags.test', 'signature', 2, true, null, '{{signature;signer=2;height=30}}'],
        ['seller@tags.test', 'date', 2, true, null, '{{date;signer=2}}'],
      ]);
      assert.equal(r.fields[2]!.height, 30, 'height=30 raises it');

      // Both sign (the buyer fills the order number and leaves the newsletter box empty); the archive is made.
      const recipients = await listRecipients(svc.db.sql, r.signing_request_id);
      const fields = await listFields(svc.db.sql, r.signing_request_id);
      for (const [i, rc] of recipients.entries()) {
        svc.clock.advance(60_000);
        const now = svc.clock.now();
        const fieldValues = i === 0 ? new Map([[fields[0]!.id, 'PO-2027-0042'], [fields[1]!.id, 'false']]) : new Map<string, string>();
        await svc.db.tx(async (sql) => {
          assert.ok((await recordOpened(sql, { recipientId: rc.id, now })).ok);
          assert.ok((await recordSigned(sql, svc, { recipientId: rc.id, typedName: rc.name, ip: '203.0.113.9', userAgent: null, now, fieldValues })).ok);
        });
      }
      await svc.jobs.runDue();
      const row = await svc.db.sql.one<{ archive_file_id: string | null; archive_error: string | null }>(`SELECT archive_file_id, archive_error FROM signing_requests WHERE id = ?`, [r.signing_request_id]);
      assert.ok(row!.archive_file_id, `archive made (error: ${row!.archive_error})`);
      const archive = await bytesOf(svc, workspaceId, row!.archive_file_id);
      assert.ok(archive.subarray(0, original.length).equals(Buffer.from(original)), 'the original is the archive\'s first revision, byte for byte');
      const file = await writeTo(dir, `tags-${database.name}.pdf`, archive);
      assert.match(await pdfsig(file), /Signature Validation: Signature is Valid\./);
      assert.match((await run('qpdf', ['--check', file])).stdout, /No syntax or stream encoding errors found/);
      assert.match((await run('pdftotext', ['-f', '1', '-l', '1', file, '-'])).stdout, /PO-2027-0042/);
      assert.match((await run('pdftotext', ['-f', '2', '-l', '2', file, '-'])).stdout, /Sam Seller/);
      // The empty newsletter box's tag is painted over: no ink left where it was written (page 1 at 72 dpi, y down).
      await run('pdftoppm', ['-r', '72', '-f', '1', '-l', '1', '-singlefile', '-gray', file, path.join(dir, `page1-${database.name}`)]);
      const pgm = await fs.readFile(path.join(dir, `page1-${database.name}.pgm`));
      const [, w, h] = /^P5\s+(\d+)\s+(\d+)\s+255\s/.exec(pgm.subarray(0, 40).toString('latin1'))!.map(Number);
      const pixels = pgm.subarray(pgm.length - w! * h!);
      const ink = (x: number, y: number, bw: number, bh: number) => {
        let n = 0;
        for (let py = Math.round(h! - y - bh); py < h! - y; py++) for (let px = Math.round(x); px < x + bw; px++) if (pixels[py * w! + px]! < 160) n++;
        return n;
      };
      const box = fields[1]!;
      assert.equal(ink(box.x + 1, box.y + 1, box.width - 2, box.height - 2), 0, 'the unticked tag is hidden');
      assert.ok(ink(72, 600, 60, 10) > 20, 'the text beside the tags is still there');
      await run('pdftoppm', ['-r', '60', '-f', '1', '-l', '2', '-png', file, path.resolve('test-output', `archive-text-tags-${database.name}`)]);
    });

    it('a template without fields finds them from the tags by role, and its requests cover the tags again', async () => {
      const made = await api.signing.CreateTemplate({ file_id: fileId, name: 'Purchase agreement', roles: [{ role: 'Buyer' }, { role: 'Seller', order: 2 }, { role: 'Legal', cc: true }] });
      assert.equal(made.response.status, 200, JSON.stringify(made.error));
      assert.deepEqual(made.data!.fields.map((f) => [f.role, f.kind, f.tag !== null]), [
        ['Buyer', 'text', true],
        ['Buyer', 'checkbox', true],
        ['Buyer', 'signature', true],
        ['Seller', 'signature', true],
        ['Seller', 'date', true],
      ]);
      const sent = await api.signing.SendTemplate({
        template_id: made.data!.template_id,
        recipients: [
          { role: 'Seller', email: 'sam@seller.test', name: 'Sam Seller' },
          { role: 'Buyer', email: 'bea@buyer.test', name: 'Bea Buyer' },
          { role: 'Legal', email: 'legal@buyer.test', name: 'Legal' },
        ],
      });
      assert.equal(sent.response.status, 200, JSON.stringify(sent.error));
      const who = new Map(sent.data!.recipients.map((c) => [c.recipient_id, c.email]));
      assert.deepEqual(sent.data!.fields.map((f) => [who.get(f.recipient_id), f.kind, f.tag !== null]), [
        ['bea@buyer.test', 'text', true],
        ['bea@buyer.test', 'checkbox', true],
        ['bea@buyer.test', 'signature', true],
        ['sam@seller.test', 'signature', true],
        ['sam@seller.test', 'date', true],
      ]);
      // fields: [] ignores the tags, and so do the requests sent from that template.
      const bare = await api.signing.CreateTemplate({ file_id: fileId, name: 'No fields', roles: [{ role: 'Buyer' }], fields: [] });
      assert.equal(bare.response.status, 200, JSON.stringify(bare.error));
      assert.deepEqual(bare.data!.fields, []);
      const bareSent = await api.signing.SendTemplate({ template_id: bare.data!.template_id, recipients: [{ role: 'Buyer', email: 'bea@buyer.test', name: 'Bea Buyer' }] });
      assert.equal(bareSent.response.status, 200, JSON.stringify(bareSent.error));
      assert.deepEqual(bareSent.data!.fields, []);
      const one = await api.signing.CreateTemplate({ file_id: fileId, name: 'One role', roles: [{ role: 'Buyer' }] });
      assert.equal(one.response.status, 400);
      assert.match((one.error as { message: string }).message, /names signer 2, but the template has 1 signing role/);
    });
  });
}
