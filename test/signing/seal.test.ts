/**
 * The archive's seal (handlers/signing/archive/seal.ts) checked by poppler's `pdfsig` and `qpdf --check`, the real
 * tools a recipient or an auditor uses: valid, covering the whole file, broken by one changed byte; the RFC 3161
 * signature timestamp from a local `openssl ts` responder, verified with `openssl ts -verify`; the installation's
 * own certificate and an operator's PKCS#12. No database: runs once.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import {
  CertificateError,
  createServiceCertificate,
  loadPkcs12,
  loadStoredCertificate,
  type SealCertificate,
  type StoredCertificate,
} from '../../handlers/signing/archive/sealCertificate.ts';
import { seal, SealError } from '../../handlers/signing/archive/seal.ts';
import { tokenProblem, TimestampUnavailableError } from '../../handlers/signing/archive/timestamp.ts';
import { run, startTsa, type LocalTsa } from './tsa.ts';

const SIGNED_AT = new Date('2026-11-24T09:30:00Z');
const TIMESTAMP_OID = '1.2.840.113549.1.9.16.2.14';

async function samplePdf(pages: number): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (let i = 1; i <= pages; i++) {
    const page = doc.addPage([595, 842]);
    page.drawText(`Services agreement, page ${i} of ${pages}`, { x: 56, y: 780, size: 16, font });
    for (let line = 0; line < 40; line++) page.drawText(`Clause ${i}.${line + 1}: the parties agree to the terms set out here.`, { x: 56, y: 740 - line * 17, size: 10, font });
  }
  // Without object streams the page dictionaries are plain text, so a test can change one byte of one.
  return doc.save({ useObjectStreams: false });
}

/** pdfsig's output and exit status (non-zero when it cannot read the file). */
async function pdfsig(file: string): Promise<{ out: string; status: number }> {
  try {
    const { stdout } = await run('pdfsig', [file], { env: { ...process.env, TZ: 'UTC' } });
    return { out: stdout, status: 0 };
  } catch (err) {
    const e = err as { stdout?: string; code?: number };
    return { out: e.stdout ?? '', status: e.code ?? -1 };
  }
}

function byteRange(pdf: Uint8Array): [number, number, number, number] {
  const text = Buffer.from(pdf).toString('latin1');
  const all = [...text.matchAll(/\/ByteRange\s*\[\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\]/g)];
  assert.equal(all.length, 1, 'one signature');
  return all[0]!.slice(1, 5).map(Number) as [number, number, number, number];
}

function signerInfo(pdf: Uint8Array): pkijs.SignerInfo {
  const [, b, c] = byteRange(pdf);
  const hex = Buffer.from(pdf.subarray(b + 1, c - 1)).toString('latin1');
  const der = Buffer.from(hex, 'hex');
  const info = new pkijs.ContentInfo({ schema: asn1js.fromBER(der).result });
  const signer = new pkijs.SignedData({ schema: info.content }).signerInfos[0];
  assert.ok(signer, 'a SignerInfo');
  return signer;
}

describe('signing: the PAdES seal (pdfsig, qpdf, openssl ts)', function () {
  this.timeout(60_000);
  let dir: string;
  let stored: StoredCertificate;
  let certificate: SealCertificate;
  let pdf: Uint8Array;
  let tsa: LocalTsa;

  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'seal-test-'));
    stored = await createServiceCertificate({ commonName: 'Workspace Operations seal (test)', organization: 'Example AB', now: SIGNED_AT });
    certificate = await loadStoredCertificate(stored);
    pdf = await samplePdf(3);
    tsa = await startTsa(dir);
  });
  after(async () => {
    await tsa?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  async function write(name: string, bytes: Uint8Array): Promise<string> {
    const file = path.join(dir, name);
    await fs.writeFile(file, bytes);
    return file;
  }

  it('pdfsig: valid ETSI.CAdES.detached signature over the whole file; qpdf --check clean; an incremental update', async () => {
    const sealed = await seal(pdf, { certificate, reason: 'Signed by all parties: request sr_test', signedAt: SIGNED_AT });
    assert.deepEqual(Buffer.from(sealed.subarray(0, pdf.length)), Buffer.from(pdf), 'the original bytes come first, unchanged');
    const [a, b, c, d] = byteRange(sealed);
    assert.equal(a, 0);
    assert.equal(c + d, sealed.length, 'the byte range reaches the end of the file');
    const { out, status } = await pdfsig(await write('sealed.pdf', sealed));
    console.log(`      pdfsig:\n${out.replace(/^/gm, '        ')}`);
    assert.equal(status, 0);
    assert.match(out, /Signature Validation: Signature is Valid\./);
    assert.match(out, /Total document signed/);
    assert.match(out, /Signature Type: ETSI\.CAdES\.detached/);
    assert.match(out, /Signing Hash Algorithm: SHA-256/);
    assert.match(out, /Signer Certificate Common Name: Workspace Operations seal \(test\)/);
    assert.match(out, /Signing Time: Nov 24 2026 09:30:00/);
    // Self-signed: poppler has no reason to trust it; the seal is still cryptographically valid.
    assert.match(out, /Certificate Validation: Certificate issuer is unknown\./);
    const check = await run('qpdf', ['--check', path.join(dir, 'sealed.pdf')]);
    assert.match(check.stdout, /No syntax or stream encoding errors found/);
    assert.equal(signerInfo(sealed).unsignedAttrs, undefined, 'no timestamp without a TSA');
    assert.ok(b > pdf.length, 'the signature value sits in the appended update');
  });

  it('one changed byte, in either signed range, makes pdfsig report the signature invalid', async () => {
    const sealed = await seal(pdf, { certificate, reason: 'tamper test', signedAt: SIGNED_AT });
    const text = Buffer.from(sealed).toString('latin1');
    const inOriginal = text.indexOf('595 842'); // a page's MediaBox: the file stays a readable PDF
    const inUpdate = text.lastIndexOf('tamper test');
    const [, b, c] = byteRange(sealed);
    assert.ok(inOriginal > 0 && inOriginal < b && inUpdate > c, 'both bytes lie inside the signed ranges');
    for (const [name, at] of [['original', inOriginal], ['update', inUpdate]] as const) {
      const copy = Uint8Array.from(sealed);
      copy[at] = copy[at]! ^ 0x01;
      const { out } = await pdfsig(await write(`tampered-${name}.pdf`, copy));
      // poppler 22.12 exits 0 here too: the verdict is in the text.
      assert.doesNotMatch(out, /Signature is Valid/, name);
      assert.match(out, /Signature Validation: Digest Mismatch\./, name);
    }
  });

  it('with a timestamp authority: one query, the token in the CMS verifies with openssl ts -verify; pdfsig still valid', async () => {
    const before = tsa.requests;
    const sealed = await seal(pdf, { certificate, reason: 'timestamped', signedAt: SIGNED_AT, timestampUrl: tsa.url });
    assert.equal(tsa.requests, before + 1);
    const { out, status } = await pdfsig(await write('timestamped.pdf', sealed));
    console.log(`      pdfsig (B-T):\n${out.replace(/^/gm, '        ')}`);
    assert.equal(status, 0);
    assert.match(out, /Signature is Valid\./);
    assert.match(out, /Total document signed/);
    const info = signerInfo(sealed);
    const attr = info.unsignedAttrs?.attributes.find((x) => x.type === TIMESTAMP_OID);
    assert.ok(attr, 'a signature-time-stamp unsigned attribute');
    const token = await write('token.der', new Uint8Array(attr.values[0].toBER(false)));
    // The token's message imprint is the hash of the CMS signature value (RFC 3161 signature timestamp).
    const signatureValue = await write('signature.bin', info.signature.valueBlock.valueHexView);
    const verify = await run('openssl', ['ts', '-verify', '-in', token, '-token_in', '-data', signatureValue, '-CAfile', tsa.certFile, '-untrusted', tsa.certFile]);
    assert.match(verify.stdout, /Verification: OK/);
    const wrong = await write('other.bin', new Uint8Array(32));
    await assert.rejects(run('openssl', ['ts', '-verify', '-in', token, '-token_in', '-data', wrong, '-CAfile', tsa.certFile, '-untrusted', tsa.certFile]));
    // The same checks in code (timestamp.ts checks every token before it goes into a seal): a changed byte of the
    // TSA's signature (the token's last bytes) is refused.
    const tokenBytes = new Uint8Array(attr.values[0].toBER(false));
    const imprint = new Uint8Array(createHash('sha256').update(info.signature.valueBlock.valueHexView).digest());
    assert.equal(await tokenProblem(tokenBytes, imprint, 'SHA-256'), null);
    const broken = Uint8Array.from(tokenBytes);
    broken[broken.length - 1] = broken[broken.length - 1]! ^ 0x01;
    assert.equal(await tokenProblem(broken, imprint, 'SHA-256'), 'its signature does not verify');
    assert.equal(await tokenProblem(tokenBytes, new Uint8Array(32), 'SHA-256'), 'it stamps another value than the one sent');
    assert.equal(await tokenProblem(new Uint8Array([48, 0]), imprint, 'SHA-256'), 'the token is not a TimeStampToken');
    const text = (await run('openssl', ['ts', '-reply', '-in', token, '-token_in', '-token_out', '-text'])).stdout;
    console.log(`      token: ${text.match(/Time stamp: .*/)?.[0]}, ${text.match(/Policy OID: .*/)?.[0]}`);
    assert.match(text, /Hash Algorithm: sha256/);
  });

  it('a TSA that does not answer, or stamps another value: TimestampUnavailableError naming the host, no seal', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const down = `http://127.0.0.1:${(closed.address() as AddressInfo).port}/tsr`;
    await new Promise((resolve) => closed.close(resolve));
    await assert.rejects(seal(pdf, { certificate, reason: 'x', signedAt: SIGNED_AT, timestampUrl: down }), (err: Error) => {
      assert.ok(err instanceof TimestampUnavailableError);
      assert.match(err.message, /127\.0\.0\.1:\d+ gave no token/);
      return true;
    });
    tsa.stampOtherValue = true;
    try {
      await assert.rejects(seal(pdf, { certificate, reason: 'x', signedAt: SIGNED_AT, timestampUrl: tsa.url }), /gave a token that cannot be used: it stamps another value/);
    } finally {
      tsa.stampOtherValue = false;
    }
    await assert.rejects(seal(pdf, { certificate, reason: 'x', signedAt: SIGNED_AT, timestampUrl: 'ftp://tsa.example/' }), TimestampUnavailableError);
    await assert.rejects(seal(pdf, { certificate, reason: 'x', signedAt: SIGNED_AT, timestampUrl: 'https://u:p@tsa.example/' }), /must not carry credentials/);
  });

  it('bad files: not a PDF, an encrypted PDF: SealError with a clear message', async () => {
    await assert.rejects(seal(new TextEncoder().encode('hello, not a pdf'), { certificate, reason: 'x', signedAt: SIGNED_AT }), (err: Error) => {
      console.log(`      not a PDF: ${err.message}`);
      return err instanceof SealError;
    });
    await assert.rejects(seal(new Uint8Array(0), { certificate, reason: 'x', signedAt: SIGNED_AT }), SealError);
    const plain = await write('plain.pdf', pdf);
    const encrypted = path.join(dir, 'encrypted.pdf');
    await run('qpdf', ['--encrypt', 'user', 'owner', '256', '--', plain, encrypted]);
    await assert.rejects(seal(await fs.readFile(encrypted), { certificate, reason: 'x', signedAt: SIGNED_AT }), (err: Error) => {
      console.log(`      encrypted: ${err.message}`);
      assert.ok(err instanceof SealError);
      assert.match(err.message, /encrypted/);
      return true;
    });
  });

  it('the installation certificate: stored encrypted with a passphrase, reopened only with it; refused outside its validity', async () => {
    const made = await createServiceCertificate({ commonName: 'Seal, "quoted" + plus', now: SIGNED_AT, passphrase: 'correct horse', modulusLength: 2048, validYears: 1 });
    assert.match(made.privateKeyPem, /BEGIN ENCRYPTED PRIVATE KEY/);
    const text = (await run('openssl', ['x509', '-noout', '-text', '-in', await write('made.crt', new TextEncoder().encode(made.certificatePem))])).stdout;
    assert.match(text, /Digital Signature, Non Repudiation/);
    assert.match(text, /CA:FALSE/);
    const opened = await loadStoredCertificate(made, 'correct horse');
    assert.equal(opened.subject, 'CN=Seal\\, \\"quoted\\" \\+ plus'); // node's RFC 4514 escaping
    assert.ok(opened.selfSigned);
    await assert.rejects(loadStoredCertificate(made, 'wrong'), (err: Error) => err instanceof CertificateError && /wrong or missing passphrase/.test(err.message) && !err.message.includes('wrong horse'));
    await assert.rejects(loadStoredCertificate(made), CertificateError);
    await assert.rejects(loadStoredCertificate({ certificatePem: stored.certificatePem, privateKeyPem: made.privateKeyPem }, 'correct horse'), /does not belong/);
    await assert.rejects(loadStoredCertificate({ certificatePem: 'garbage', privateKeyPem: stored.privateKeyPem }), /not a PEM X\.509/);
    await assert.rejects(seal(pdf, { certificate: opened, reason: 'x', signedAt: new Date('2028-01-01T00:00:00Z') }), /expired/);
  });

  it("an operator's PKCS#12 (RSA and ECDSA, made by openssl 3): seals valid; a wrong password is refused without echoing it", async () => {
    for (const [kind, newkey] of [['rsa', ['-newkey', 'rsa:2048']], ['ec', ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256']]] as const) {
      const key = path.join(dir, `op-${kind}.key`);
      const crt = path.join(dir, `op-${kind}.crt`);
      const p12 = path.join(dir, `op-${kind}.p12`);
      await run('openssl', ['req', '-x509', ...newkey, '-nodes', '-keyout', key, '-out', crt, '-days', '30', '-subj', `/CN=Operator seal ${kind}/O=Example AB`]);
      await run('openssl', ['pkcs12', '-export', '-inkey', key, '-in', crt, '-out', p12, '-passout', 'pass:s3cret-p12']);
      const bytes = await fs.readFile(p12);
      const operator = await loadPkcs12(bytes, 's3cret-p12');
      assert.match(operator.subject, new RegExp(`CN=Operator seal ${kind}`));
      const sealed = await seal(pdf, { certificate: operator, reason: 'operator', signedAt: new Date(), timestampUrl: tsa.url });
      const { out } = await pdfsig(await write(`op-${kind}.pdf`, sealed));
      assert.match(out, /Signature is Valid\./, kind);
      assert.match(out, /Total document signed/, kind);
      await assert.rejects(loadPkcs12(bytes, 'not-the-password'), (err: Error) => err instanceof CertificateError && !err.message.includes('not-the-password'));
    }
    await assert.rejects(loadPkcs12(new Uint8Array([1, 2, 3]), 'x'), CertificateError);
  });

  it('PDFs written other ways: object streams and an xref stream (pdf-lib default), linearized and object-streamed by qpdf', async () => {
    const doc = await PDFDocument.create();
    doc.addPage().drawText('object streams', { x: 50, y: 700 });
    const variants: Array<[string, Uint8Array]> = [['pdf-lib default', await doc.save()]];
    const plain = await write('variant-plain.pdf', pdf);
    for (const [name, args] of [['linearized', ['--linearize']], ['qpdf object streams', ['--object-streams=generate']]] as const) {
      const out = path.join(dir, `variant-${variants.length}.pdf`);
      await run('qpdf', [...args, plain, out]);
      variants.push([name, await fs.readFile(out)]);
    }
    for (const [name, bytes] of variants) {
      const file = await write(`variant-sealed-${name.replace(/\W/g, '')}.pdf`, await seal(bytes, { certificate, reason: name, signedAt: SIGNED_AT }));
      const { out } = await pdfsig(file);
      assert.match(out, /Signature is Valid\./, name);
      assert.match(out, /Total document signed/, name);
      await run('qpdf', ['--check', file]);
    }
  });

  it('a 100-page PDF: sealed with and without a timestamp (time reported)', async () => {
    const big = await samplePdf(100);
    let t = performance.now();
    const plain = await seal(big, { certificate, reason: 'bench', signedAt: SIGNED_AT });
    const plainMs = performance.now() - t;
    t = performance.now();
    const stamped = await seal(big, { certificate, reason: 'bench', signedAt: SIGNED_AT, timestampUrl: tsa.url });
    const stampedMs = performance.now() - t;
    console.log(`      100 pages, ${(big.length / 1024).toFixed(0)} KB: seal ${plainMs.toFixed(0)} ms, with the local TSA ${stampedMs.toFixed(0)} ms`);
    for (const [name, bytes] of [['big.pdf', plain], ['big-ts.pdf', stamped]] as const) {
      const { out } = await pdfsig(await write(name, bytes));
      assert.match(out, /Signature is Valid\./);
      assert.match(out, /Total document signed/);
    }
    const pages = (await run('pdfinfo', [path.join(dir, 'big-ts.pdf')])).stdout.match(/Pages:\s+(\d+)/)?.[1];
    assert.equal(pages, '100');
  });
});
