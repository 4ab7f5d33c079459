/**
 * A black-box check of documents.* and signing.* written from the seed (sections 2.5, 3, 4.7-4.12, 5)
 * and the OpenAPI document only: every call goes over HTTP (the operations, the part PUTs, the signer's
 * page forms, the download links), the mail through a real SMTP server; the service's code and tables
 * are never touched. It checks the 200 shapes field by field, every documented refusal with its
 * `{error, message}` body, idempotency, the request's state machine, isolation per credential and
 * member, paging and that odd input never answers 500.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { PDFDocument } from 'pdf-lib';
import type { ApplyResult } from '../../server/admin.ts';
import { acme } from '../support/fixtures.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { freePort, type MailServer, runJobs, signingService, startMailServer, tokenIn } from './requestSupport.ts';
import { makePdf } from '../documents/pdfs.ts';
import { onService, samplePdf } from './signerKit.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const MIB = 1_048_576;
const sha = (b: Uint8Array) => crypto.createHash('sha256').update(b).digest('hex');

interface Answer {
  status: number;
  body: any;
  headers: Headers;
}

type Value = 'string' | 'string|null' | 'integer' | 'integer|null' | 'boolean' | 'array';

/** The object has exactly these keys, each of the given JSON type. */
function shape(obj: any, fields: Record<string, Value>, what: string): void {
  assert.equal(typeof obj, 'object', `${what} is an object`);
  assert.ok(obj && !Array.isArray(obj), `${what} is a plain object`);
  assert.deepEqual(Object.keys(obj).sort(), Object.keys(fields).sort(), `${what}: exactly the documented fields`);
  for (const [k, t] of Object.entries(fields)) {
    const v = obj[k];
    const ok =
      t === 'string' ? typeof v === 'string'
      : t === 'string|null' ? v === null || typeof v === 'string'
      : t === 'integer' ? Number.isInteger(v)
      : t === 'integer|null' ? v === null || Number.isInteger(v)
      : t === 'boolean' ? typeof v === 'boolean'
      : Array.isArray(v);
    assert.ok(ok, `${what}.${k} is ${t}, got ${JSON.stringify(v)}`);
  }
}

/** The served document's component schemas (GET /v1/openapi.json), read once per service. */
let schemas: Record<string, any> = {};

/**
 * The object matches the served document's schema `name`: every required field present, no field the
 * schema does not declare, each of its declared type (null only where nullable), enums and patterns kept;
 * nested objects and arrays of objects checked the same way. `fields` (what the seed names) must be among them.
 */
function documented(obj: any, name: string, what: string): void {
  const schema = schemas[name];
  assert.ok(schema, `the document declares ${name}`);
  check(obj, schema, what);
}
function check(v: any, given: any, what: string): void {
  const schema = given?.$ref ? schemas[String(given.$ref).split('/').pop()!] : given;
  assert.ok(schema, `${what}: its schema ${JSON.stringify(given?.$ref)} is in the document`);
  if (v === null) {
    assert.ok(schema.nullable === true, `${what} is null but not nullable`);
    return;
  }
  const t = schema.type;
  if (t === 'integer') assert.ok(Number.isInteger(v), `${what} is an integer, got ${JSON.stringify(v)}`);
  else if (t === 'number') assert.equal(typeof v, 'number', what);
  else if (t === 'string') assert.equal(typeof v, 'string', `${what} is a string, got ${JSON.stringify(v)}`);
  else if (t === 'boolean') assert.equal(typeof v, 'boolean', what);
  else if (t === 'array') {
    assert.ok(Array.isArray(v), `${what} is an array`);
    if (schema.items) v.forEach((x: unknown, i: number) => check(x, schema.items, `${what}[${i}]`));
  } else if (t === 'object') {
    assert.ok(v && typeof v === 'object' && !Array.isArray(v), `${what} is an object`);
    for (const k of schema.required ?? []) assert.ok(k in v, `${what}.${k} is required`);
    if (schema.additionalProperties === false) for (const k of Object.keys(v)) assert.ok(schema.properties && k in schema.properties, `${what}.${k} is not in the document`);
    for (const [k, sub] of Object.entries(schema.properties ?? {})) if (k in v) check(v[k], sub, `${what}.${k}`);
  }
  if (schema.enum && v !== null) assert.ok(schema.enum.includes(v), `${what} = ${JSON.stringify(v)} is one of ${schema.enum.join(', ')}`);
  if (schema.pattern && typeof v === 'string') assert.match(v, new RegExp(schema.pattern), what);
  if (typeof schema.minimum === 'number' && typeof v === 'number') assert.ok(v >= schema.minimum, `${what} >= ${schema.minimum}`);
}

/** A documented refusal: the status, `{error, message, request_id}` and nothing else. */
function refused(res: Answer, status: number, error: string, what = ''): void {
  assert.equal(res.status, status, `${what} ${JSON.stringify(res.body)}`);
  assert.equal(typeof res.body, 'object', `${what}: a JSON body`);
  assert.equal(res.body.error, error, `${what} ${JSON.stringify(res.body)}`);
  assert.equal(typeof res.body.message, 'string');
  assert.ok(res.body.message.length > 0);
  assert.deepEqual(Object.keys(res.body).sort(), ['error', 'message', 'request_id'], what);
  // Part PUTs and downloads are outside /v1; their answers carry the id too when they have one.
  if (res.headers.get('request-id')) assert.equal(res.body.request_id, res.headers.get('request-id'), `${what}: request_id is the Request-Id header`);
}

for (const database of databases) {
  describe(`documents and signing, black box [${database.name}]`, function () {
    this.timeout(60_000);
    let smtp: MailServer;
    let svc: TestService;
    let ws: ApplyResult;
    let foreign: ApplyResult;
    let pdf: Buffer;
    const secret = (h: string) => ws.keys[h]!.secret;

    before(async () => {
      smtp = await startMailServer();
      svc = await signingService(database.url(), smtp);
      const spec = acme();
      spec.members!.cleo = { name: 'Cleo Member', email: 'cleo@acme.test', role: 'member' };
      spec.keys!.sender = { name: 'Contracts', operations: ['signing.*', 'documents.*'], delegation: 'all', created_by: 'olga' };
      spec.keys!.twin = { name: 'Contracts twin', operations: ['signing.*', 'documents.*'], delegation: 'all', created_by: 'olga' };
      spec.keys!.docsOnly = { name: 'Documents only', operations: ['documents.*'] };
      spec.keys!.signOnly = { name: 'Signing only, no delegation', operations: ['signing.*'] };
      spec.keys!.forAda = { name: 'Acts for Ada only', operations: ['signing.*', 'documents.*'], delegation: ['ada'] };
      ws = await svc.apply(spec);
      const other = acme();
      other.keys!.sender = { name: 'Foreign contracts', operations: ['signing.*', 'documents.*'], delegation: 'all' };
      foreign = await svc.apply(other);
      pdf = Buffer.from(await samplePdf('Black box agreement', 2));
      schemas = (await (await fetch(`${svc.baseUrl}/openapi.json`)).json()).components.schemas;
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    /** A raw operation call: key (or none), act-as, idempotency key, raw body text or JSON. */
    /** A response as the tests read it: the body parsed when it is JSON, else its text. */
    async function answer(res: Response): Promise<Answer> {
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        /* text */
      }
      return { status: res.status, body: parsed, headers: res.headers };
    }

    async function call(op: string, body: unknown, o: { key?: string | null; actAs?: string; idem?: string | null; contentType?: string } = {}): Promise<Answer> {
      const headers: Record<string, string> = { 'Content-Type': o.contentType ?? 'application/json' };
      const key = o.key === undefined ? secret('sender') : o.key;
      if (key !== null) headers.Authorization = `Bearer ${key}`;
      if (o.actAs) headers['Service-Act-As'] = o.actAs;
      const command = /\.(Create|Complete|Request|Remind|Cancel|Update)/.test(op);
      if (o.idem !== null && (o.idem !== undefined || command)) headers['Idempotency-Key'] = o.idem ?? crypto.randomUUID();
      const res = await fetch(`${svc.baseUrl}/operations/${op}`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
      return answer(res);
    }

    async function put(url: string, body: Uint8Array): Promise<Answer> {
      const res = await fetch(onService(url, svc.origin), { method: 'PUT', body: body as unknown as BodyInit, headers: { 'Content-Type': 'application/octet-stream' } });
      return answer(res);
    }

    async function partUrl(uploadId: string, n: number, o: { key?: string; actAs?: string; sha256?: string } = {}): Promise<string> {
      const res = await call('documents.GetUploadPart', { upload_id: uploadId, part_number: n, ...(o.sha256 ? { sha256: o.sha256 } : {}) }, o);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.url;
    }

    /** Upload `bytes` in one part; answers the completion. */
    async function upload(bytes: Uint8Array = pdf, o: { key?: string; actAs?: string; filename?: string } = {}): Promise<Answer> {
      const created = await call('documents.CreateUpload', { filename: o.filename ?? 'agreement.pdf', content_type: 'application/pdf', size: bytes.length }, o);
      assert.equal(created.status, 200, JSON.stringify(created.body));
      for (const p of created.body.parts) {
        const r = await put(await partUrl(created.body.upload_id, p.part_number, o), bytes.subarray((p.part_number - 1) * created.body.part_size, p.part_number * created.body.part_size));
        assert.equal(r.status, 200, JSON.stringify(r.body));
      }
      return call('documents.CompleteUpload', { upload_id: created.body.upload_id }, o);
    }
    async function fileId(o: { key?: string; actAs?: string } = {}): Promise<string> {
      const res = await upload(pdf, o);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.file_id;
    }

    let n = 0;
    const addr = (p = 'bb') => `${p}-${++n}@example.test`;

    async function request(signers: Array<{ email: string; name: string }>, more: object = {}, o: { key?: string; actAs?: string; idem?: string } = {}): Promise<any> {
      const file = (more as { file_id?: string }).file_id ?? (await fileId({ key: o.key, actAs: o.actAs }));
      const res = await call('signing.RequestFileSignatures', { file_id: file, signers, ...more }, o);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    }

    /** The signer's path `/sign/<token>` from the latest mail to `email`. */
    const linkOf = (email: string) => `/sign/${tokenIn(smtp.to(email).at(-1)!.mail)}`;
    async function form(path: string, fields: Record<string, string>): Promise<number> {
      const res = await fetch(`${svc.origin}${path}`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: svc.origin },
        body: new URLSearchParams(fields).toString(),
      });
      await res.arrayBuffer();
      return res.status;
    }
    /** The recipient signs through their link, as a person does: Continue, then sign. */
    async function signAs(email: string, name: string): Promise<void> {
      const path = linkOf(email);
      assert.equal(await form(`${path}/open`, {}), 303);
      assert.equal(await form(`${path}/sign`, { typed_name: name, agree: 'yes' }), 303);
    }
    const get = (id: string, o: { key?: string; actAs?: string } = {}) => call('signing.GetSigningRequest', { signing_request_id: id }, o);

    async function allEvents(id: string, limit = 1, o: { key?: string; actAs?: string } = {}): Promise<any[]> {
      const items: any[] = [];
      let cursor: string | undefined;
      for (let guard = 0; guard < 200; guard++) {
        const page = await call('signing.ListSigningEvents', { signing_request_id: id, limit, ...(cursor ? { cursor } : {}) }, o);
        assert.equal(page.status, 200, JSON.stringify(page.body));
        shape(page.body, { items: 'array', has_more: 'boolean', next_cursor: 'string|null' }, 'events page');
        assert.ok(page.body.items.length <= limit);
        items.push(...page.body.items);
        if (!page.body.has_more) {
          assert.equal(page.body.next_cursor, null, 'no cursor on the last page');
          return items;
        }
        assert.equal(typeof page.body.next_cursor, 'string');
        cursor = page.body.next_cursor;
      }
      throw new Error('paging never ended');
    }

    // ---------------------------------------------------------------- uploads

    describe('uploads', () => {
      it('a rejected upload keeps the refusal\'s reason: the message is "The file was refused: <rejection_reason>."', async () => {
        const junk = Buffer.from('Plain text, not a PDF.\n');
        const created = await call('documents.CreateUpload', { filename: 'notes.pdf', content_type: 'application/pdf', size: junk.length });
        const id = created.body.upload_id;
        assert.equal((await put(await partUrl(id, 1), junk)).status, 200);
        const res = await call('documents.CompleteUpload', { upload_id: id });
        refused(res, 400, 'invalid_input');
        const read = await call('documents.GetUpload', { upload_id: id });
        assert.equal(read.body.state, 'rejected');
        assert.equal(res.body.message, `The file was refused: ${read.body.rejection_reason}.`);
      });

      it('CreateUpload, GetUploadPart, the PUT, GetUpload and CompleteUpload answer exactly the documented shapes', async () => {
        const bytes = Buffer.concat([pdf]);
        const created = await call('documents.CreateUpload', { filename: 'Avtal – åäö 契約.pdf', content_type: 'application/pdf', size: bytes.length, sha256: sha(bytes) });
        assert.equal(created.status, 200, JSON.stringify(created.body));
        documented(created.body, 'Upload', 'upload');
        assert.equal(created.body.state, 'open');
        assert.equal(created.body.filename, 'Avtal – åäö 契約.pdf');
        assert.equal(created.body.part_count, 1);
        assert.equal(created.body.part_size, 5 * MIB, 'default 5 MiB parts');
        assert.equal(created.body.expires_at, svc.clock.now() + DAY);
        assert.equal(created.body.created_at, svc.clock.now());
        documented(created.body.parts[0], 'UploadPart', 'part');
        assert.deepEqual(created.body.parts[0], { part_number: 1, size: bytes.length, received: false, sha256: null }, 'a file smaller than part_size is one part of its own size');

        const part = await call('documents.GetUploadPart', { upload_id: created.body.upload_id, part_number: 1 });
        assert.equal(part.status, 200);
        shape(part.body, { upload_id: 'string', part_number: 'integer', method: 'string', url: 'string', size: 'integer', expires_at: 'integer' }, 'part url');
        assert.equal(part.body.method, 'PUT');
        assert.equal(part.body.size, bytes.length);
        assert.equal(part.body.expires_at, svc.clock.now() + 15 * 60_000);
        const stored = await put(part.body.url, bytes);
        assert.equal(stored.status, 200, JSON.stringify(stored.body));
        assert.deepEqual(stored.body, { part_number: 1, size: bytes.length, sha256: sha(bytes) });

        const read = await call('documents.GetUpload', { upload_id: created.body.upload_id });
        assert.equal(read.status, 200);
        documented(read.body, 'Upload', 'upload read');
        assert.deepEqual(read.body.parts, [{ part_number: 1, size: bytes.length, received: true, sha256: sha(bytes) }]);

        const done = await call('documents.CompleteUpload', { upload_id: created.body.upload_id });
        assert.equal(done.status, 200, JSON.stringify(done.body));
        documented(done.body, 'DocumentFile', 'file');
        for (const r of [created, part, read, done]) {
          assert.equal(r.headers.get('cache-control'), 'no-store');
          assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
          assert.match(r.headers.get('request-id') ?? '', /^[0-9a-f-]{36}$/);
        }
        assert.equal(done.body.sha256, sha(bytes));
        assert.equal(done.body.size, bytes.length);
        assert.equal(done.body.page_count, 2);
        assert.equal(done.body.scope, 'workspace');
        assert.equal(done.body.owner_member_id, null);
        assert.equal(done.body.source, 'upload');
        assert.equal(done.body.content_type, 'application/pdf');
        const after = await call('documents.GetUpload', { upload_id: created.body.upload_id });
        assert.equal(after.body.state, 'completed');
        assert.equal(after.body.file_id, done.body.file_id);
        // Completing again answers the same file; a part URL for a completed upload is 409.
        const again = await call('documents.CompleteUpload', { upload_id: created.body.upload_id });
        assert.equal(again.status, 200);
        assert.equal(again.body.file_id, done.body.file_id);
        refused(await call('documents.GetUploadPart', { upload_id: created.body.upload_id, part_number: 1 }), 409, 'conflict', 'part of a completed upload');
        refused(await put(part.body.url, bytes), 409, 'conflict', 'PUT to a completed upload');
      });

      it('CreateUpload refuses every bad size, part layout, filename, type and digest with 400 invalid_input (never 500)', async () => {
        const base = { filename: 'a.pdf', content_type: 'application/pdf', size: 3 * MIB };
        const cases: Array<[string, object]> = [
          ['size 0', { ...base, size: 0 }],
          ['negative size', { ...base, size: -5 }],
          ['size above 50 MiB', { ...base, size: 52_428_801 }],
          ['fractional size', { ...base, size: 1.5 }],
          ['size as a string', { ...base, size: '1000' }],
          ['size null', { ...base, size: null }],
          ['huge size', { ...base, size: 1e300 }],
          ['part_size and part_count', { ...base, part_size: MIB, part_count: 3 }],
          ['part_count 0', { ...base, part_count: 0 }],
          ['part_count 101', { ...base, part_count: 101 }],
          ['part_count negative', { ...base, part_count: -1 }],
          ['part_size below 1 MiB', { ...base, part_size: MIB - 1 }],
          ['part_size above 16 MiB', { ...base, part_size: 16 * MIB + 1 }],
          ['part_count giving parts below 1 MiB', { ...base, size: 2 * MIB + 1, part_count: 3 }],
          ['part_count giving parts above 16 MiB', { ...base, size: 50 * MIB, part_count: 3 }],
          ['more than 100 parts', { ...base, size: 50 * MIB, part_size: MIB / 2 }],
          ['one part above 16 MiB', { ...base, size: 17 * MIB, part_count: 1 }],
          ['100 parts below 1 MiB', { ...base, size: 50 * MIB, part_count: 100 }],
          ['a slash in the filename', { ...base, filename: 'a/b.pdf' }],
          ['a backslash in the filename', { ...base, filename: 'a\\b.pdf' }],
          ['a control character in the filename', { ...base, filename: 'a\u0007.pdf' }],
          ['DEL in the filename', { ...base, filename: 'a\u007f.pdf' }],
          ['a NUL in the filename', { ...base, filename: 'a\u0000.pdf' }],
          ['an empty filename', { ...base, filename: '' }],
          ['a 256-character filename', { ...base, filename: `${'x'.repeat(252)}.pdf` }],
          ['a 100,000-character filename', { ...base, filename: 'ü'.repeat(100_000) }],
          ['filename a number', { ...base, filename: 42 }],
          ['another content type', { ...base, content_type: 'text/plain' }],
          ['upper-case sha256', { ...base, sha256: 'A'.repeat(64) }],
          ['63-character sha256', { ...base, sha256: 'a'.repeat(63) }],
          ['65-character sha256', { ...base, sha256: 'a'.repeat(65) }],
          ['non-hex sha256', { ...base, sha256: 'g'.repeat(64) }],
          ['an unknown field', { ...base, colour: 'red' }],
          ['missing size', { filename: 'a.pdf', content_type: 'application/pdf' }],
        ];
        for (const [what, body] of cases) refused(await call('documents.CreateUpload', body), 400, 'invalid_input', what);
        // Bounds that are allowed.
        for (const body of [
          { ...base, size: 1 },
          { ...base, size: 52_428_800 },
          { ...base, part_count: 3 },
          { ...base, size: 50 * MIB, part_count: 50 },
          { ...base, filename: `${'x'.repeat(251)}.pdf` },
        ]) {
          const ok = await call('documents.CreateUpload', body);
          assert.equal(ok.status, 200, `${JSON.stringify(body).slice(0, 120)} ${JSON.stringify(ok.body)}`);
          assert.equal(ok.body.parts.length, ok.body.part_count);
          assert.equal(
            ok.body.parts.reduce((s: number, p: { size: number }) => s + p.size, 0),
            body.size,
            'the parts add up to the size',
          );
        }
        const three = await call('documents.CreateUpload', { ...base, size: 12 * MIB });
        assert.equal(three.body.part_size, 5 * MIB, 'default 5 MiB parts');
        assert.deepEqual(three.body.parts.map((p: { size: number }) => p.size), [5 * MIB, 5 * MIB, 2 * MIB]);
      });

      it('bodies that are not JSON objects are 400 invalid_json; a missing or over-long Idempotency-Key 400 invalid_input; a body over 1 MB 413', async () => {
        const body = { filename: 'a.pdf', content_type: 'application/pdf', size: 10 };
        refused(await call('documents.CreateUpload', '[1,2]'), 400, 'invalid_json', 'an array');
        refused(await call('documents.CreateUpload', '"text"'), 400, 'invalid_json', 'a string');
        refused(await call('documents.CreateUpload', '{"filename":'), 400, 'invalid_json', 'cut JSON');
        refused(await call('documents.CreateUpload', ''), 400, 'invalid_json', 'no body');
        refused(await call('documents.CreateUpload', JSON.stringify(body), { contentType: 'text/plain' }), 400, 'invalid_json', 'text/plain');
        refused(await call('documents.CreateUpload', JSON.stringify(body), { contentType: 'application/x-www-form-urlencoded' }), 400, 'invalid_json', 'a form');
        assert.equal((await call('documents.CreateUpload', JSON.stringify(body), { contentType: 'application/json; charset=utf-8' })).status, 200, 'a charset parameter is fine');
        refused(await call('documents.CreateUpload', body, { idem: null }), 400, 'invalid_input', 'no Idempotency-Key');
        refused(await call('documents.CreateUpload', body, { idem: 'k'.repeat(201) }), 400, 'invalid_input', '201-character key');
        assert.equal((await call('documents.CreateUpload', body, { idem: 'k'.repeat(200) })).status, 200, '200-character key');
        refused(await call('documents.CreateUpload', { ...body, filename: 'x'.repeat(1_100_000) }), 413, 'invalid_input', 'over 1 MB');
        refused(await call('signing.RequestFileSignatures', { file_id: 'x', signers: [{ email: 'a@b.c', name: 'y'.repeat(1_100_000) }] }), 413, 'invalid_input', 'over 1 MB');
      });

      it('compressed bodies: the 1 MB limit counts the decoded bytes (413), broken or unknown encodings are refused, never 500', async () => {
        const send = async (body: Buffer, encoding: string) => {
          const res = await fetch(`${svc.baseUrl}/operations/documents.ListDocuments`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', 'Content-Encoding': encoding, Authorization: `Bearer ${secret('sender')}` },
            body: body as unknown as BodyInit,
          });
          return answer(res);
        };
        const ok = await send(zlib.gzipSync(JSON.stringify({ scope: 'workspace' })), 'gzip');
        assert.equal(ok.status, 200, JSON.stringify(ok.body));
        const bomb = zlib.gzipSync(JSON.stringify({ scope: 'workspace', cursor: 'a'.repeat(5 * MIB) }));
        assert.ok(bomb.length < 64 * 1024);
        refused(await send(bomb, 'gzip'), 413, 'invalid_input', 'a gzip bomb');
        const broken = await send(Buffer.from('not gzip at all'), 'gzip');
        assert.ok(broken.status >= 400 && broken.status < 500, `broken gzip: ${broken.status}`);
        const unknown = await send(Buffer.from(JSON.stringify({ scope: 'workspace' })), 'x-unknown');
        assert.ok(unknown.status >= 400 && unknown.status < 500, `unknown encoding: ${unknown.status}`);
      });

      it('GetUploadPart refuses part 0, negative, beyond the count or 101, wrong types and bad digests with 400', async () => {
        const created = await call('documents.CreateUpload', { filename: 'a.pdf', content_type: 'application/pdf', size: 3 * MIB, part_count: 3 });
        const id = created.body.upload_id;
        for (const [what, body] of [
          ['part 0', { upload_id: id, part_number: 0 }],
          ['part -1', { upload_id: id, part_number: -1 }],
          ['part beyond part_count', { upload_id: id, part_number: 4 }],
          ['part 101', { upload_id: id, part_number: 101 }],
          ['part 1.5', { upload_id: id, part_number: 1.5 }],
          ['part "1"', { upload_id: id, part_number: '1' }],
          ['upper-case sha256', { upload_id: id, part_number: 1, sha256: 'F'.repeat(64) }],
          ['short sha256', { upload_id: id, part_number: 1, sha256: 'f'.repeat(10) }],
          ['upload_id a number', { upload_id: 7, part_number: 1 }],
          ['upload_id 41 characters', { upload_id: `up_${'x'.repeat(38)}`, part_number: 1 }],
          ['an unknown field', { upload_id: id, part_number: 1, extra: true }],
        ] as Array<[string, object]>) {
          refused(await call('documents.GetUploadPart', body), 400, 'invalid_input', what);
        }
        refused(await call('documents.GetUploadPart', { upload_id: 'up_doesnotexist', part_number: 1 }), 404, 'not_found', 'unknown upload');
        refused(await call('documents.GetUpload', { upload_id: 'up_ünïcødé✓' }), 404, 'not_found', 'unicode id');
        refused(await call('documents.CompleteUpload', { upload_id: 'up_doesnotexist' }), 404, 'not_found', 'unknown upload');
      });

      it('parts: out of order, retried (the last good PUT wins), too long 413, too short 400, wrong bound digest 400, a changed URL 403, an expired URL 403', async () => {
        const padded = await makePdf(3, { payloadBytes: 2 * MIB + 4096, seed: 'three parts' });
        assert.ok(padded.length > 2 * MIB && padded.length <= 3 * MIB, String(padded.length));
        const created = await call('documents.CreateUpload', { filename: 'three.pdf', content_type: 'application/pdf', size: padded.length, part_size: MIB, sha256: sha(padded) });
        assert.equal(created.status, 200, JSON.stringify(created.body));
        const u = created.body;
        assert.equal(u.part_count, 3);
        const part = (k: number) => padded.subarray((k - 1) * MIB, k * MIB);
        // Part 3 first, then a wrong part 1 that is then replaced.
        assert.equal((await put(await partUrl(u.upload_id, 3), part(3))).status, 200);
        const wrong = Buffer.alloc(MIB, 0x41);
        assert.equal((await put(await partUrl(u.upload_id, 1), wrong)).status, 200);
        assert.equal((await call('documents.GetUpload', { upload_id: u.upload_id })).body.parts[0].sha256, sha(wrong));
        // A refused PUT keeps the part's earlier bytes.
        const url1 = await partUrl(u.upload_id, 1, { sha256: sha(part(1)) });
        refused(await put(url1, wrong), 400, 'invalid_input', 'bound digest on part 1');
        refused(await put(url1, part(1).subarray(10)), 400, 'invalid_input', 'short part 1');
        const kept = (await call('documents.GetUpload', { upload_id: u.upload_id })).body.parts[0];
        assert.deepEqual([kept.received, kept.sha256], [true, sha(wrong)], 'the earlier bytes stay');
        // Missing part 2: 409 naming it.
        const missing = await call('documents.CompleteUpload', { upload_id: u.upload_id });
        refused(missing, 409, 'conflict', 'missing part');
        assert.match(missing.body.message, /2/);
        // Too long, too short, wrong bound digest, changed URL: refused, nothing kept.
        const url2 = await partUrl(u.upload_id, 2);
        refused(await put(url2, Buffer.concat([part(2), Buffer.from('x')])), 413, 'invalid_input', 'too long');
        refused(await put(url2, part(2).subarray(1)), 400, 'invalid_input', 'too short');
        refused(await put(url2, new Uint8Array(0)), 400, 'invalid_input', 'an empty body');
        refused(await put(await partUrl(u.upload_id, 2, { sha256: sha(wrong) }), part(2)), 400, 'invalid_input', 'bound digest');
        const changed = url2.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
        refused(await put(changed, part(2)), 403, 'forbidden', 'changed URL');
        // An expired URL (15 minutes on the fake clock).
        const soon = await partUrl(u.upload_id, 2);
        svc.clock.advance(15 * 60_000 + 1);
        refused(await put(soon, part(2)), 403, 'forbidden', 'expired URL');
        const stillMissing = await call('documents.GetUpload', { upload_id: u.upload_id });
        assert.equal(stillMissing.body.parts[1].received, false, 'nothing was kept');
        assert.equal((await put(await partUrl(u.upload_id, 2, { sha256: sha(part(2)) }), part(2))).status, 200);
        // The whole digest is wrong (part 1 is wrong): 400 and the upload stays open; re-send part 1 and complete.
        refused(await call('documents.CompleteUpload', { upload_id: u.upload_id }), 400, 'invalid_input', 'digest of the whole');
        assert.equal((await call('documents.GetUpload', { upload_id: u.upload_id })).body.state, 'open');
        assert.equal((await put(await partUrl(u.upload_id, 1), part(1))).status, 200);
        // A different sha256 at completion than at creation: 400.
        refused(await call('documents.CompleteUpload', { upload_id: u.upload_id, sha256: sha(wrong) }), 400, 'invalid_input', 'two digests');
        const done = await call('documents.CompleteUpload', { upload_id: u.upload_id, sha256: sha(padded) });
        assert.equal(done.status, 200, JSON.stringify(done.body));
        assert.equal(done.body.sha256, sha(padded));
        assert.equal(done.body.size, padded.length);
      });

      it('a file that is not a PDF is refused 400 with its reason, the upload rejected; completing it again answers the same 400', async () => {
        const junk = Buffer.from('This is not a PDF at all, just text.\n');
        const created = await call('documents.CreateUpload', { filename: 'notes.pdf', content_type: 'application/pdf', size: junk.length });
        const id = created.body.upload_id;
        assert.equal((await put(await partUrl(id, 1), junk)).status, 200);
        const res = await call('documents.CompleteUpload', { upload_id: id });
        refused(res, 400, 'invalid_input', 'not a PDF');
        const read = await call('documents.GetUpload', { upload_id: id });
        assert.equal(read.body.state, 'rejected');
        assert.equal(read.body.file_id, null);
        assert.equal(typeof read.body.rejection_reason, 'string');
        const again = await call('documents.CompleteUpload', { upload_id: id });
        refused(again, 400, 'invalid_input', 'completing a rejected upload');
        assert.equal(again.body.message, res.body.message);
        refused(await call('documents.GetUploadPart', { upload_id: id, part_number: 1 }), 409, 'conflict', 'part of a rejected upload');
        const truncated = await upload(pdf.subarray(0, Math.floor(pdf.length / 2)), { filename: 'cut.pdf' });
        refused(truncated, 400, 'invalid_input', 'truncated PDF');
      });

      it('the scan: a user password is refused, an owner password only is accepted and kept byte-identical, a PDF without pages or over 500 pages is refused', async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bb-scan-'));
        fs.writeFileSync(path.join(dir, 'plain.pdf'), pdf);
        const enc = (out: string, user: string) => {
          execFileSync('qpdf', ['--encrypt', user, 'owner-secret', '256', '--', path.join(dir, 'plain.pdf'), path.join(dir, out)]);
          return fs.readFileSync(path.join(dir, out));
        };
        refused(await upload(enc('user.pdf', 'user-secret'), { filename: 'user.pdf' }), 400, 'invalid_input', 'user password');
        const ownerOnly = enc('owner.pdf', '');
        const ok = await upload(ownerOnly, { filename: 'owner.pdf' });
        assert.equal(ok.status, 200, JSON.stringify(ok.body));
        assert.equal(ok.body.sha256, sha(ownerOnly), 'stored exactly as uploaded');
        const r = await request([{ email: addr(), name: 'Owner pw' }], { file_id: ok.body.file_id });
        const link = await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: 'original' });
        assert.equal(sha(Buffer.from(await (await fetch(onService(link.body.url, svc.origin))).arrayBuffer())), sha(ownerOnly));

        const empty = await PDFDocument.create();
        const none = await upload(Buffer.from(await empty.save({ addDefaultPage: false })), { filename: 'empty.pdf' });
        refused(none, 400, 'invalid_input', 'a PDF without pages');
        const big = await PDFDocument.create();
        for (let i = 0; i < 501; i++) big.addPage([100, 100]);
        refused(await upload(Buffer.from(await big.save()), { filename: 'big.pdf' }), 400, 'invalid_input', '501 pages');
        const max = await PDFDocument.create();
        for (let i = 0; i < 500; i++) max.addPage([100, 100]);
        const fine = await upload(Buffer.from(await max.save()), { filename: 'max.pdf' });
        assert.equal(fine.status, 200, JSON.stringify(fine.body));
        assert.equal(fine.body.page_count, 500);
        fs.rmSync(dir, { recursive: true, force: true });
      });

      it('uploads are isolated per credential and member (seed 5.6): every other pairing answers 404; an expired upload 404', async () => {
        const { ada, olga } = ws.members;
        const created = await call('documents.CreateUpload', { filename: 'ada.pdf', content_type: 'application/pdf', size: pdf.length }, { actAs: ada });
        assert.equal(created.status, 200);
        const id = created.body.upload_id;
        const others: Array<[string, { key?: string; actAs?: string }]> = [
          ['same key, no member', {}],
          ['same key, another member', { actAs: olga! }],
          ['another key, same member', { key: secret('twin'), actAs: ada! }],
          ['another key, no member', { key: secret('twin') }],
          ['a key of another workspace', { key: foreign.keys.sender!.secret }],
        ];
        for (const [what, o] of others) {
          refused(await call('documents.GetUpload', { upload_id: id }, o), 404, 'not_found', `GetUpload: ${what}`);
          refused(await call('documents.GetUploadPart', { upload_id: id, part_number: 1 }, o), 404, 'not_found', `GetUploadPart: ${what}`);
          refused(await call('documents.CompleteUpload', { upload_id: id }, o), 404, 'not_found', `CompleteUpload: ${what}`);
        }
        assert.equal((await call('documents.GetUpload', { upload_id: id }, { actAs: ada })).status, 200);
        assert.equal((await put(await partUrl(id, 1, { actAs: ada }), pdf)).status, 200);
        const done = await call('documents.CompleteUpload', { upload_id: id }, { actAs: ada });
        assert.equal(done.status, 200, JSON.stringify(done.body));
        assert.equal(done.body.scope, 'user');
        assert.equal(done.body.owner_member_id, ada);

        const late = await call('documents.CreateUpload', { filename: 'late.pdf', content_type: 'application/pdf', size: pdf.length });
        svc.clock.advance(DAY + 1);
        refused(await call('documents.GetUpload', { upload_id: late.body.upload_id }), 404, 'not_found', 'expired upload');
        refused(await call('documents.GetUploadPart', { upload_id: late.body.upload_id, part_number: 1 }), 404, 'not_found', 'expired upload');
        refused(await call('documents.CompleteUpload', { upload_id: late.body.upload_id }), 404, 'not_found', 'expired upload');
      });

      it('CompleteUpload receipts: a 409 (missing parts) is replayed to the same key, a 400 (wrong digest) is not stored, so the same key completes after the fix', async () => {
        const created = await call('documents.CreateUpload', { filename: 'receipts.pdf', content_type: 'application/pdf', size: pdf.length, sha256: sha(pdf) });
        const id = created.body.upload_id;
        const k409 = `bb-complete-409-${id}`;
        refused(await call('documents.CompleteUpload', { upload_id: id }, { idem: k409 }), 409, 'conflict', 'missing part');
        const wrong = Buffer.from(pdf);
        wrong[wrong.length - 20] = wrong[wrong.length - 20]! ^ 0xff;
        assert.equal((await put(await partUrl(id, 1), wrong)).status, 200);
        const replayed = await call('documents.CompleteUpload', { upload_id: id }, { idem: k409 });
        refused(replayed, 409, 'conflict', 'the stored 409');
        assert.equal(replayed.headers.get('idempotency-replayed'), 'true');
        const k400 = `bb-complete-400-${id}`;
        const bad = await call('documents.CompleteUpload', { upload_id: id }, { idem: k400 });
        refused(bad, 400, 'invalid_input', 'wrong digest');
        assert.equal(bad.headers.get('idempotency-replayed'), null);
        assert.equal((await call('documents.GetUpload', { upload_id: id })).body.state, 'open');
        assert.equal((await put(await partUrl(id, 1), pdf)).status, 200);
        const done = await call('documents.CompleteUpload', { upload_id: id }, { idem: k400 });
        assert.equal(done.status, 200, `a 400 is not a stored answer (Idempotency-Replayed is only for 200, 404, 409): ${JSON.stringify(done.body)}`);
        const again = await call('documents.CompleteUpload', { upload_id: id }, { idem: k400 });
        assert.equal(again.headers.get('idempotency-replayed'), 'true');
        assert.equal(again.body.file_id, done.body.file_id);
      });

      it('the same Idempotency-Key replays CreateUpload (Idempotency-Replayed: true); the same key with another body is 400', async () => {
        const body = { filename: 'idem.pdf', content_type: 'application/pdf', size: 1234 };
        const first = await call('documents.CreateUpload', body, { idem: 'bb-upload-1' });
        const again = await call('documents.CreateUpload', body, { idem: 'bb-upload-1' });
        assert.equal(again.status, 200);
        assert.equal(again.headers.get('idempotency-replayed'), 'true');
        assert.equal(first.headers.get('idempotency-replayed'), null);
        assert.equal(again.body.upload_id, first.body.upload_id);
        refused(await call('documents.CreateUpload', { ...body, size: 1235 }, { idem: 'bb-upload-1' }), 400, 'invalid_input', 'same key, another body');
        // Receipts are per credential and member: the same key acting for a member is a new upload.
        const member = await call('documents.CreateUpload', body, { idem: 'bb-upload-1', actAs: ws.members.ada! });
        assert.equal(member.status, 200);
        assert.notEqual(member.body.upload_id, first.body.upload_id);
        const twin = await call('documents.CreateUpload', body, { idem: 'bb-upload-1', key: secret('twin') });
        assert.equal(twin.status, 200);
        assert.notEqual(twin.body.upload_id, first.body.upload_id);
      });
    });

    // ---------------------------------------------------------------- ListDocuments

    describe('documents.ListDocuments', () => {
      it('scope user needs Service-Act-As (400 without); each member sees only their own files; workspace lists no private file', async () => {
        const { ada, olga } = ws.members;
        refused(await call('documents.ListDocuments', { scope: 'user' }), 400, 'invalid_input', 'user without a member');
        const adaFile = await fileId({ actAs: ada });
        const olgaFile = await fileId({ actAs: olga });
        const wsFile = await fileId();
        const list = async (scope: string, o: { actAs?: string; key?: string } = {}) => {
          const ids: string[] = [];
          let cursor: string | undefined;
          for (;;) {
            const page = await call('documents.ListDocuments', { scope, limit: 2, ...(cursor ? { cursor } : {}) }, o);
            assert.equal(page.status, 200, JSON.stringify(page.body));
            shape(page.body, { items: 'array', next_cursor: 'string|null', has_more: 'boolean' }, 'documents page');
            for (const f of page.body.items) documented(f, 'DocumentFile', 'listed file');
            ids.push(...page.body.items.map((f: { file_id: string }) => f.file_id));
            if (!page.body.has_more) return ids;
            cursor = page.body.next_cursor;
          }
        };
        const adaList = await list('user', { actAs: ada });
        assert.ok(adaList.includes(adaFile));
        assert.ok(!adaList.includes(olgaFile) && !adaList.includes(wsFile));
        const olgaList = await list('user', { actAs: olga });
        assert.ok(olgaList.includes(olgaFile) && !olgaList.includes(adaFile));
        const wsList = await list('workspace');
        assert.ok(wsList.includes(wsFile));
        assert.ok(!wsList.includes(adaFile) && !wsList.includes(olgaFile));
        assert.equal(new Set(wsList).size, wsList.length, 'no file twice across pages');
        const wsAsAda = await list('workspace', { actAs: ada });
        assert.ok(wsAsAda.includes(wsFile) && !wsAsAda.includes(olgaFile));
        const foreignList = await list('workspace', { key: foreign.keys.sender!.secret });
        assert.ok(!foreignList.includes(wsFile), 'another workspace never sees it');
      });

      it('refuses bad scope, limit and cursors with 400 (a tampered cursor, one of another scope)', async () => {
        for (const [what, body] of [
          ['no scope', {}],
          ['scope other', { scope: 'everyone' }],
          ['limit 0', { scope: 'workspace', limit: 0 }],
          ['limit 101', { scope: 'workspace', limit: 101 }],
          ['limit "5"', { scope: 'workspace', limit: '5' }],
          ['empty cursor', { scope: 'workspace', cursor: '' }],
          ['made-up cursor', { scope: 'workspace', cursor: 'not-a-cursor' }],
          ['huge cursor', { scope: 'workspace', cursor: 'x'.repeat(20_000) }],
        ] as Array<[string, object]>) {
          refused(await call('documents.ListDocuments', body), 400, 'invalid_input', what);
        }
        await fileId();
        await fileId();
        const page = await call('documents.ListDocuments', { scope: 'workspace', limit: 1 });
        assert.equal(page.body.has_more, true);
        const cursor: string = page.body.next_cursor;
        const flipped = cursor.slice(0, -2) + (cursor.at(-2) === 'a' ? 'b' : 'a') + cursor.at(-1);
        refused(await call('documents.ListDocuments', { scope: 'workspace', limit: 1, cursor: flipped }), 400, 'invalid_input', 'tampered cursor');
        refused(await call('documents.ListDocuments', { scope: 'user', limit: 1, cursor }, { actAs: ws.members.ada! }), 400, 'invalid_input', 'cursor of another scope');
        const sr = await request([{ email: addr(), name: 'Cursor' }]);
        refused(await call('signing.ListSigningEvents', { signing_request_id: sr.signing_request_id, cursor }), 400, 'invalid_input', 'cursor of another operation');
      });
    });

    // ---------------------------------------------------------------- authentication and delegation

    describe('keys, grants and Service-Act-As', () => {
      it('401 invalid_key without or with a wrong key, 403 forbidden without the grant or for a member the key may not act for', async () => {
        const ops: Array<[string, object]> = [
          ['documents.CreateUpload', { filename: 'a.pdf', content_type: 'application/pdf', size: 10 }],
          ['documents.ListDocuments', { scope: 'workspace' }],
          ['signing.GetSigningRequest', { signing_request_id: 'sr_x' }],
          ['signing.RequestFileSignatures', { file_id: 'file_x', signers: [{ email: 'a@example.test', name: 'A' }] }],
          ['signing.ListSigningEvents', { signing_request_id: 'sr_x' }],
        ];
        for (const [op, body] of ops) {
          const none = await call(op, body, { key: null });
          refused(none, 401, 'invalid_key', `${op} no key`);
          assert.ok(none.headers.get('www-authenticate'), 'a challenge with every 401');
          refused(await call(op, body, { key: 'wsk_not_a_real_key' }), 401, 'invalid_key', `${op} wrong key`);
          refused(await call(op, body, { key: secret('bare') }), 403, 'forbidden', `${op} key without grants`);
          refused(await call(op, body, { actAs: ws.members.max! }), 403, 'forbidden', `${op} a disabled member`);
          refused(await call(op, body, { actAs: foreign.members.ada! }), 403, 'forbidden', `${op} a member of another workspace`);
          refused(await call(op, body, { actAs: 'mem_nobody' }), 403, 'forbidden', `${op} an unknown member`);
          refused(await call(op, body, { actAs: 'ada@acme.test' }), 403, 'forbidden', `${op} an e-mail address is never an id`);
        }
        refused(await call('signing.GetSigningRequest', { signing_request_id: 'sr_x' }, { key: secret('docsOnly') }), 403, 'forbidden', 'documents key on signing');
        refused(await call('documents.ListDocuments', { scope: 'workspace' }, { key: secret('signOnly') }), 403, 'forbidden', 'signing key on documents');
        refused(await call('signing.GetSigningRequest', { signing_request_id: 'sr_x' }, { key: secret('signOnly'), actAs: ws.members.ada! }), 403, 'forbidden', 'key without delegation');
        refused(await call('documents.ListDocuments', { scope: 'workspace' }, { key: secret('ci'), actAs: ws.members.ada! }), 403, 'forbidden', 'delegating key without the grant');
        refused(await call('documents.ListDocuments', { scope: 'user' }, { key: secret('forAda'), actAs: ws.members.bob! }), 403, 'forbidden', 'a member outside the key\'s delegation');
        refused(await call('signing.GetSigningRequest', { signing_request_id: 'sr_x' }, { key: secret('forAda'), actAs: ws.members.olga! }), 403, 'forbidden', 'a member outside the key\'s delegation');
        assert.equal((await call('documents.ListDocuments', { scope: 'user' }, { key: secret('forAda'), actAs: ws.members.ada! })).status, 200);
        const foreignFile = await fileId({ key: foreign.keys.sender!.secret });
        refused(await call('signing.VerifySignedDocument', { file_id: foreignFile }), 404, 'not_found', 'verify a file of another workspace');
      });
    });

    // ---------------------------------------------------------------- signing requests

    describe('signing.RequestFileSignatures', () => {
      it('answers the whole request, flat: signing_request_id, status pending, invitation_failures [], file_id null, each recipient pending', async () => {
        const file = await fileId();
        const a = addr();
        const b = addr();
        const res = await call('signing.RequestFileSignatures', { file_id: file, title: 'Åtagande 📄 契約', message: 'Hej!\nSign please.', signers: [{ email: a, name: 'Åsa Öberg' }, { email: b, name: 'Bo' }] });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        documented(res.body, 'SigningRequest', 'request');
        for (const k of ['signing_request_id', 'status', 'invitation_failures', 'file_id']) assert.ok(k in res.body, `seed 2.5 names ${k}`);
        assert.throws(() => documented({ ...res.body, colour: 'red' }, 'SigningRequest', 'x'), 'the checker refuses an undeclared field');
        assert.throws(() => documented({ ...res.body, status: 'draft' }, 'SigningRequest', 'x'), 'and a value outside the enum');
        for (const r of res.body.recipients) documented(r, 'SigningRecipient', 'recipient');
        assert.match(res.body.signing_request_id, /^sr_/);
        assert.equal(res.body.status, 'pending');
        assert.deepEqual(res.body.invitation_failures, []);
        assert.equal(res.body.file_id, null);
        assert.equal(res.body.source_file_id, file);
        assert.equal(res.body.title, 'Åtagande 📄 契約');
        assert.equal(res.body.message, 'Hej!\nSign please.');
        assert.equal(res.body.signature_method, 'standard', 'standard by default');
        assert.equal(res.body.private, false);
        assert.equal(res.body.deadline_at, svc.clock.now() + 30 * DAY, 'default deadline 30 days');
        assert.equal(res.body.reminder_interval_days, null);
        assert.equal(res.body.created_at, svc.clock.now());
        for (const k of ['completed_at', 'cancelled_at', 'cancel_reason', 'expired_at']) assert.equal(res.body[k], null, k);
        assert.deepEqual(res.body.recipients.map((r: { email: string; name: string; status: string; invitation: string }) => [r.email, r.name, r.status, r.invitation]), [
          [a, 'Åsa Öberg', 'pending', 'sent'],
          [b, 'Bo', 'pending', 'sent'],
        ]);
        assert.equal(smtp.to(a).length, 1);
        assert.equal(smtp.to(b).length, 1);
        const read = await get(res.body.signing_request_id);
        assert.equal(read.status, 200);
        documented(read.body, 'SigningRequest', 'read request');
        assert.deepEqual(read.body, res.body, 'the read answers what the creation answered');
        // The title defaults to the file name without .pdf.
        const named = await call('signing.RequestFileSignatures', { file_id: file, signers: [{ email: addr(), name: 'N' }] });
        assert.equal(named.body.title, 'agreement');
      });

      it('refuses bad input with 400 invalid_input and the files it cannot use with 404, never 500', async () => {
        const file = await fileId();
        const s = [{ email: 'x@example.test', name: 'X' }];
        const now = svc.clock.now();
        const cases: Array<[string, object]> = [
          ['no signers', { file_id: file, signers: [] }],
          ['11 signers', { file_id: file, signers: Array.from({ length: 11 }, (_, i) => ({ email: `s${i}@example.test`, name: `S${i}` })) }],
          ['the same address twice, different case', { file_id: file, signers: [{ email: 'Dup@example.test', name: 'A' }, { email: 'dup@EXAMPLE.test', name: 'B' }] }],
          ['not an address', { file_id: file, signers: [{ email: 'not an address', name: 'A' }] }],
          ['a display name', { file_id: file, signers: [{ email: 'Ana <ana@example.test>', name: 'A' }] }],
          ['an empty name', { file_id: file, signers: [{ email: 'a@example.test', name: '' }] }],
          ['a 201-character name', { file_id: file, signers: [{ email: 'a@example.test', name: 'n'.repeat(201) }] }],
          ['a signer without name', { file_id: file, signers: [{ email: 'a@example.test' }] }],
          ['a signer with another field', { file_id: file, signers: [{ email: 'a@example.test', name: 'A', phone: '1' }] }],
          ['signers an object', { file_id: file, signers: { email: 'a@example.test', name: 'A' } }],
          ['a 201-character title', { file_id: file, signers: s, title: 't'.repeat(201) }],
          ['an empty title', { file_id: file, signers: s, title: '' }],
          ['a 2001-character message', { file_id: file, signers: s, message: 'm'.repeat(2001) }],
          ['a deadline under an hour', { file_id: file, signers: s, deadline_at: now + HOUR - 1000 }],
          ['a deadline in the past', { file_id: file, signers: s, deadline_at: now - DAY }],
          ['a negative deadline', { file_id: file, signers: s, deadline_at: -1 }],
          ['a deadline beyond 120 days', { file_id: file, signers: s, deadline_at: now + 121 * DAY }],
          ['a deadline as a string', { file_id: file, signers: s, deadline_at: String(now + DAY) }],
          ['a fractional deadline', { file_id: file, signers: s, deadline_at: now + DAY + 0.5 }],
          ['reminder every 0 days', { file_id: file, signers: s, reminder_interval_days: 0 }],
          ['reminder every 31 days', { file_id: file, signers: s, reminder_interval_days: 31 }],
          ['another method', { file_id: file, signers: s, signature_method: 'drawn' }],
          ['bankid without a provider', { file_id: file, signers: s, signature_method: 'bankid' }],
          ['file_id a number', { file_id: 5, signers: s }],
          ['file_id 41 characters', { file_id: `file_${'x'.repeat(36)}`, signers: s }],
          ['no file_id', { signers: s }],
          ['an unknown field', { file_id: file, signers: s, cc: ['a@example.test'] }],
        ];
        const before = smtp.mails.length;
        for (const [what, body] of cases) refused(await call('signing.RequestFileSignatures', body), 400, 'invalid_input', what);
        assert.equal(smtp.mails.length, before, 'no refusal sent a mail');
        // Exactly at the bounds is accepted.
        for (const more of [{ deadline_at: now + HOUR + 60_000 }, { deadline_at: now + 120 * DAY - 60_000 }, { message: 'm'.repeat(2000) }, { title: 't'.repeat(200) }]) {
          const ok = await call('signing.RequestFileSignatures', { file_id: file, signers: [{ email: addr(), name: 'Edge' }], ...more });
          assert.equal(ok.status, 200, `${JSON.stringify(more).slice(0, 80)}: ${JSON.stringify(ok.body)}`);
        }
        // Files it cannot use: unknown, another workspace's, a member's private file without acting for them, or for another member.
        const adaFile = await fileId({ actAs: ws.members.ada! });
        const foreignFile = await fileId({ key: foreign.keys.sender!.secret });
        refused(await call('signing.RequestFileSignatures', { file_id: 'file_unknown', signers: s }), 404, 'not_found', 'unknown file');
        refused(await call('signing.RequestFileSignatures', { file_id: foreignFile, signers: s }), 404, 'not_found', 'another workspace');
        refused(await call('signing.RequestFileSignatures', { file_id: adaFile, signers: s }), 404, 'not_found', 'a private file without the member');
        refused(await call('signing.RequestFileSignatures', { file_id: adaFile, signers: s }, { actAs: ws.members.olga! }), 404, 'not_found', "another member's private file");
        assert.equal(smtp.mails.length, before + 4, 'only the four accepted requests mailed');
      });

      it('idempotency: the same key replays (Idempotency-Replayed, no mail), another body with it is 400, a new key is a new request', async () => {
        const file = await fileId();
        const a = addr('idem');
        const body = { file_id: file, signers: [{ email: a, name: 'Ida' }] };
        const first = await call('signing.RequestFileSignatures', body, { idem: 'bb-sign-1' });
        assert.equal(first.status, 200);
        const again = await call('signing.RequestFileSignatures', body, { idem: 'bb-sign-1' });
        assert.equal(again.status, 200);
        assert.equal(again.headers.get('idempotency-replayed'), 'true');
        assert.equal(again.body.signing_request_id, first.body.signing_request_id);
        assert.equal(smtp.to(a).length, 1, 'no second mail');
        refused(await call('signing.RequestFileSignatures', { ...body, title: 'Changed' }, { idem: 'bb-sign-1' }), 400, 'invalid_input', 'same key, other body');
        const fresh = await call('signing.RequestFileSignatures', body, { idem: 'bb-sign-2' });
        assert.notEqual(fresh.body.signing_request_id, first.body.signing_request_id);
        assert.equal(smtp.to(a).length, 2);
        // A 404 is stored with its key too.
        const missing = { file_id: 'file_missing', signers: [{ email: addr(), name: 'M' }] };
        refused(await call('signing.RequestFileSignatures', missing, { idem: 'bb-sign-404' }), 404, 'not_found');
        const replay404 = await call('signing.RequestFileSignatures', missing, { idem: 'bb-sign-404' });
        refused(replay404, 404, 'not_found', 'replayed 404');
        assert.equal(replay404.headers.get('idempotency-replayed'), 'true');
      });

      it('an address the mail server refuses is in invitation_failures; the request exists and is pending', async () => {
        const ok = addr();
        const res = await request([{ email: 'refused-bb@example.test', name: 'Rolf' }, { email: ok, name: 'Olle' }]);
        assert.equal(res.status, 'pending');
        assert.deepEqual(res.invitation_failures, ['refused-bb@example.test']);
        assert.equal(res.recipients[0].invitation, 'failed');
        assert.equal(typeof res.recipients[0].invitation_error, 'string');
        const read = await get(res.signing_request_id);
        assert.deepEqual(read.body.invitation_failures, ['refused-bb@example.test']);
        const events = await allEvents(res.signing_request_id, 100);
        assert.ok(events.some((e) => e.kind === 'invitation.failed' && e.recipient?.email === 'refused-bb@example.test'));
      });
    });

    // ---------------------------------------------------------------- the state machine

    describe('states (seed section 3)', () => {
      it('all signed: completed, file_id null until the archive is ready; cancel, deadline and remind are then 409 and it stays completed', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }]);
        const id = r.signing_request_id;
        await signAs(a, 'Anna');
        assert.equal((await get(id)).body.recipients[0].status, 'signed');
        assert.equal((await get(id)).body.status, 'pending');
        await signAs(b, 'Bert');
        const done = await get(id);
        assert.equal(done.body.status, 'completed');
        assert.equal(typeof done.body.completed_at, 'number');
        assert.deepEqual(done.body.recipients.map((x: { status: string }) => x.status), ['signed', 'signed']);
        if (done.body.file_id === null) refused(await call('signing.GetSigningDocument', { signing_request_id: id, version: 'signed' }), 409, 'conflict', 'signed before the archive');
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id }), 409, 'conflict', 'cancel completed');
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: svc.clock.now() + 5 * DAY }), 409, 'conflict', 'deadline of completed');
        refused(await call('signing.RemindSigners', { signing_request_id: id }), 409, 'conflict', 'remind completed');
        await runJobs(svc);
        const ready = await get(id);
        assert.equal(ready.body.status, 'completed', 'stays completed');
        assert.match(ready.body.file_id, /^file_/);
        const signed = await call('signing.GetSigningDocument', { signing_request_id: id, version: 'signed' });
        assert.equal(signed.status, 200, JSON.stringify(signed.body));
        shape(signed.body, { signing_request_id: 'string', version: 'string', url: 'string', filename: 'string', expires_at: 'integer', sha256: 'string', size: 'integer' }, 'document link');
        const bytes = Buffer.from(await (await fetch(onService(signed.body.url, svc.origin))).arrayBuffer());
        assert.equal(sha(bytes), signed.body.sha256);
        assert.equal(bytes.length, signed.body.size);
        assert.equal(bytes.subarray(0, 5).toString(), '%PDF-');
        // The archive is a signing_archive file the workspace lists.
        const listed = await call('documents.ListDocuments', { scope: 'workspace', limit: 100 });
        const archive = listed.body.items.find((f: { file_id: string }) => f.file_id === ready.body.file_id);
        assert.ok(archive, 'the archive is listed');
        assert.equal(archive.source, 'signing_archive');
        assert.equal(archive.sha256, signed.body.sha256);
        const kinds = (await allEvents(id, 100)).map((e) => e.kind);
        assert.ok(kinds.includes('request.completed') && kinds.includes('archive.completed'), kinds.join());
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id }), 409, 'conflict', 'cancel after the archive');
        const verified = await call('signing.VerifySignedDocument', { file_id: ready.body.file_id });
        assert.equal(verified.status, 200, JSON.stringify(verified.body));
        assert.equal(verified.body.seal.present, true);
        assert.equal(verified.body.seal.valid, true);
        assert.equal(verified.body.seal.covers_whole_document, true);
        assert.equal(verified.body.signing_request?.signing_request_id, id);
        assert.deepEqual(verified.body.signing_request.signers.map((x: { typed_name: string }) => x.typed_name), ['Anna', 'Bert']);
        const original = await call('signing.VerifySignedDocument', { file_id: r.source_file_id });
        assert.equal(original.status, 200);
        assert.equal(original.body.seal.present, false);
        assert.equal(original.body.signing_request, null);
        assert.equal((await get(id)).body.status, 'completed');
      });

      it('verification: a changed byte breaks the seal and matches nothing; bytes appended after the seal are not covered', async () => {
        const a = addr();
        const r = await request([{ email: a, name: 'Anna' }]);
        await signAs(a, 'Anna');
        await runJobs(svc);
        const link = await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: 'signed' });
        assert.equal(link.status, 200, JSON.stringify(link.body));
        const archive = Buffer.from(await (await fetch(onService(link.body.url, svc.origin))).arrayBuffer());
        // The second line of a PDF is a binary comment: changing one of its bytes keeps the file parseable.
        const nl = archive.indexOf(0x0a);
        assert.equal(archive[nl + 1], 0x25, 'a comment line follows the header');
        const changed = Buffer.from(archive);
        changed[nl + 2] = changed[nl + 2]! ^ 0x01;
        const up1 = await upload(changed, { filename: 'changed.pdf' });
        assert.equal(up1.status, 200, JSON.stringify(up1.body));
        const v1 = await call('signing.VerifySignedDocument', { file_id: up1.body.file_id });
        assert.equal(v1.status, 200);
        documented(v1.body, 'DocumentVerification', 'verification');
        assert.equal(v1.body.seal.present, true);
        assert.equal(v1.body.seal.valid, false, 'one changed byte: the seal no longer verifies');
        assert.equal(v1.body.signing_request, null, 'and nothing matches');
        const appended = Buffer.concat([archive, Buffer.from('\n% appended after sealing\n')]);
        const up2 = await upload(appended, { filename: 'appended.pdf' });
        assert.equal(up2.status, 200, JSON.stringify(up2.body));
        const v2 = await call('signing.VerifySignedDocument', { file_id: up2.body.file_id });
        assert.equal(v2.body.seal.covers_whole_document, false, 'bytes after the seal are not covered');
        assert.equal(v2.body.signing_request, null);
        const same = await upload(archive, { filename: 'copy.pdf' });
        const v3 = await call('signing.VerifySignedDocument', { file_id: same.body.file_id });
        assert.equal(v3.body.seal.valid, true);
        assert.equal(v3.body.seal.covers_whole_document, true);
        assert.equal(v3.body.signing_request?.signing_request_id, r.signing_request_id, 'an unchanged copy matches its request');
      });

      it('changing the deadline keeps the document and the signatures, later or earlier; out of bounds is 400', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }]);
        const id = r.signing_request_id;
        await signAs(a, 'Anna');
        const signedAt = (await get(id)).body.recipients[0].signed_at;
        for (const deadline of [svc.clock.now() + 2 * HOUR, svc.clock.now() + 100 * DAY]) {
          const moved = await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: deadline });
          assert.equal(moved.status, 200, JSON.stringify(moved.body));
          documented(moved.body, 'SigningRequest', 'moved request');
          assert.equal(moved.body.deadline_at, deadline);
          assert.equal(moved.body.status, 'pending');
          assert.equal(moved.body.source_file_id, r.source_file_id);
          assert.equal(moved.body.recipients[0].status, 'signed');
          assert.equal(moved.body.recipients[0].signed_at, signedAt);
        }
        const now = svc.clock.now();
        for (const [what, deadline] of [['under an hour', now + HOUR - 1], ['past', now - 1], ['beyond 120 days', now + 120 * DAY + HOUR], ['negative', -5], ['a string', 'tomorrow'], ['null', null]] as Array<[string, unknown]>) {
          refused(await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: deadline }), 400, 'invalid_input', what);
        }
        const changes = (await allEvents(id, 100)).filter((e) => e.kind === 'deadline.changed');
        assert.equal(changes.length, 2);
        assert.equal(changes[1].data.deadline_at, now + 100 * DAY);
        // The other signer can still sign with the old link.
        await signAs(b, 'Bert');
        assert.equal((await get(id)).body.status, 'completed');
      });

      it('reminders go to pending recipients only, at most once an hour (409 with a message), never after completion', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }]);
        const id = r.signing_request_id;
        await signAs(a, 'Anna');
        refused(await call('signing.RemindSigners', { signing_request_id: id }), 409, 'conflict', 'too soon');
        svc.clock.advance(HOUR);
        const mailsA = smtp.to(a).length;
        const reminded = await call('signing.RemindSigners', { signing_request_id: id, message: 'Bitte unterschreiben ✍️' });
        assert.equal(reminded.status, 200, JSON.stringify(reminded.body));
        documented(reminded.body, 'SigningRequest', 'reminded request');
        assert.deepEqual(reminded.body.invitation_failures, []);
        assert.equal(smtp.to(a).length, mailsA, 'the signer who signed gets nothing');
        assert.equal(smtp.to(b).length, 2, 'the pending signer gets a reminder');
        const reminder = smtp.to(b)[1]!.mail;
        assert.match(reminder.text ?? '', /Bitte unterschreiben ✍️/, 'the reminder quotes its message');
        assert.notEqual(tokenIn(reminder), tokenIn(smtp.to(b)[0]!.mail), 'with a fresh link');
        assert.equal(reminded.body.recipients[1].last_reminded_at, svc.clock.now());
        assert.equal(reminded.body.recipients[0].last_reminded_at, null);
        refused(await call('signing.RemindSigners', { signing_request_id: id }), 409, 'conflict', 'again at once');
        refused(await call('signing.RemindSigners', { signing_request_id: id, message: 'm'.repeat(2001) }), 400, 'invalid_input', 'long message');
        // The old link still works after a reminder.
        const first = `/sign/${tokenIn(smtp.to(b)[0]!.mail)}`;
        assert.equal(await form(`${first}/open`, {}), 303);
        assert.equal(await form(`${first}/sign`, { typed_name: 'Bert', agree: 'yes' }), 303);
        svc.clock.advance(HOUR);
        refused(await call('signing.RemindSigners', { signing_request_id: id }), 409, 'conflict', 'nobody left');
        assert.ok((await allEvents(id, 100)).some((e) => e.kind === 'reminder.sent' && e.recipient?.email === b));
      });

      it('cancel: pending becomes cancelled, links die at once, cancelling again is 409; the same key replays the answer', async () => {
        const a = addr();
        const r = await request([{ email: a, name: 'Anna' }]);
        const id = r.signing_request_id;
        const path = linkOf(a);
        const res = await call('signing.CancelSigningRequest', { signing_request_id: id, reason: 'Wrong version — ny version följer' }, { idem: `bb-cancel-${id}` });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        documented(res.body, 'SigningRequest', 'cancelled request');
        assert.equal(res.body.status, 'cancelled');
        assert.equal(res.body.cancelled_at, svc.clock.now());
        assert.equal(res.body.cancel_reason, 'Wrong version — ny version följer');
        const replay = await call('signing.CancelSigningRequest', { signing_request_id: id, reason: 'Wrong version — ny version följer' }, { idem: `bb-cancel-${id}` });
        assert.equal(replay.status, 200);
        assert.equal(replay.headers.get('idempotency-replayed'), 'true');
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id }), 409, 'conflict', 'cancel again');
        refused(await call('signing.RemindSigners', { signing_request_id: id }), 409, 'conflict', 'remind cancelled');
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: svc.clock.now() + DAY }), 409, 'conflict', 'deadline of cancelled');
        const page = await fetch(`${svc.origin}${path}`);
        assert.equal(page.status, 410, 'the link is dead');
        assert.match(await page.text(), /cancel/i, 'its page says the request was cancelled');
        assert.equal(await form(`${path}/open`, {}), 410);
        assert.equal(await form(`${path}/sign`, { typed_name: 'Anna', agree: 'yes' }), 410);
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id, reason: 'r'.repeat(501) }), 400, 'invalid_input', 'long reason');
        assert.equal((await get(id)).body.recipients[0].status, 'pending');
        const kinds = (await allEvents(id, 100)).map((e) => e.kind);
        assert.equal(kinds.at(-1), 'request.cancelled');
      });

      it('expiry at the deadline on the fake clock: expired, the link dies, every command 409', async () => {
        const a = addr();
        const r = await request([{ email: a, name: 'Anna' }], { deadline_at: svc.clock.now() + HOUR + 60_000 });
        const id = r.signing_request_id;
        await svc.jobs.scheduleRecurring();
        svc.clock.advance(HOUR + 2 * 60_000);
        await runJobs(svc);
        const read = await get(id);
        assert.equal(read.body.status, 'expired');
        assert.equal(typeof read.body.expired_at, 'number');
        const page = await fetch(`${svc.origin}${linkOf(a)}`);
        await page.arrayBuffer();
        assert.equal(page.status, 410);
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id }), 409, 'conflict', 'cancel expired');
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: svc.clock.now() + DAY }), 409, 'conflict', 'deadline of expired');
        refused(await call('signing.RemindSigners', { signing_request_id: id }), 409, 'conflict', 'remind expired');
        assert.ok((await allEvents(id, 100)).some((e) => e.kind === 'request.expired'));
      });
    });

    describe('mail that fails later, automatic reminders', () => {
      it('a temporary refusal is queued (not a failure yet), retried after 1, 5, 15, 60 minutes and 4 hours, then failed visibly', async () => {
        const ok = addr();
        const r = await request([{ email: 'greylist-bb@example.test', name: 'Grey' }, { email: ok, name: 'Olle' }]);
        assert.deepEqual(r.invitation_failures, [], 'a queued invitation is not a failure');
        assert.equal(r.recipients[0].invitation, 'queued');
        assert.equal(typeof r.recipients[0].invitation_error, 'string');
        assert.equal(r.recipients[0].invited_at, null);
        for (const wait of [60_000, 5 * 60_000, 15 * 60_000, 60 * 60_000]) {
          svc.clock.advance(wait);
          await runJobs(svc);
          const read = await get(r.signing_request_id);
          assert.equal(read.body.recipients[0].invitation, 'queued', `still queued after ${wait / 60_000} min`);
          assert.deepEqual(read.body.invitation_failures, []);
        }
        svc.clock.advance(4 * HOUR);
        await runJobs(svc);
        const read = await get(r.signing_request_id);
        assert.equal(read.body.recipients[0].invitation, 'failed');
        assert.deepEqual(read.body.invitation_failures, ['greylist-bb@example.test']);
        assert.equal(read.body.status, 'pending', 'the request still exists');
        const events = await allEvents(r.signing_request_id, 100);
        assert.ok(events.some((e) => e.kind === 'invitation.failed' && e.recipient?.email === 'greylist-bb@example.test'), 'never silently');
        assert.equal(smtp.to(ok).length, 1);
      });

      it('automatic reminders every reminder_interval_days reach only signers who have not signed, at most 3 each', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }], { reminder_interval_days: 1, deadline_at: svc.clock.now() + 20 * DAY });
        assert.equal(r.reminder_interval_days, 1);
        await signAs(a, 'Anna');
        await svc.jobs.scheduleRecurring();
        for (let d = 0; d < 8; d++) {
          svc.clock.advance(DAY);
          await runJobs(svc);
        }
        assert.equal(smtp.to(a).length, 1, 'the signer who signed gets no reminder');
        assert.equal(smtp.to(b).length, 4, 'the invitation and 3 reminders');
        assert.equal((await get(r.signing_request_id)).body.status, 'pending');
      });
    });

    describe('deadlines on the fake clock', () => {
      it('an extended deadline outlives the old one (links keep working); a shortened one expires the request at the new time', async () => {
        await svc.jobs.scheduleRecurring();
        const a = addr();
        const longer = await request([{ email: a, name: 'Anna' }], { deadline_at: svc.clock.now() + 2 * HOUR });
        const b = addr();
        const shorter = await request([{ email: b, name: 'Bert' }], { deadline_at: svc.clock.now() + 10 * DAY });
        assert.equal((await call('signing.UpdateSigningDeadline', { signing_request_id: longer.signing_request_id, deadline_at: svc.clock.now() + 5 * DAY })).status, 200);
        assert.equal((await call('signing.UpdateSigningDeadline', { signing_request_id: shorter.signing_request_id, deadline_at: svc.clock.now() + 90 * 60_000 })).status, 200);
        svc.clock.advance(3 * HOUR);
        await runJobs(svc);
        assert.equal((await get(longer.signing_request_id)).body.status, 'pending', 'not expired at the old deadline');
        const late = await get(shorter.signing_request_id);
        assert.equal(late.body.status, 'expired', 'expired at the new deadline');
        const dead = await fetch(`${svc.origin}${linkOf(b)}`);
        await dead.arrayBuffer();
        assert.equal(dead.status, 410);
        await signAs(a, 'Anna');
        assert.equal((await get(longer.signing_request_id)).body.status, 'completed', 'the old link still signs');
      });

      it('once the deadline has passed, before the expiry job runs, the request reads expired (since the deadline) and a deadline change is refused; the link stays dead', async () => {
        const a = addr();
        const deadline = svc.clock.now() + HOUR + 60_000;
        const r = await request([{ email: a, name: 'Anna' }], { deadline_at: deadline });
        svc.clock.advance(HOUR + 2 * 60_000); // past the deadline; the recurring job has not run yet
        const dead = await fetch(`${svc.origin}${linkOf(a)}`);
        await dead.arrayBuffer();
        assert.equal(dead.status, 410, 'the link died at the deadline');
        const read = await get(r.signing_request_id);
        assert.equal(read.body.status, 'expired', 'SigningRequest.yaml: expired = the deadline passed first; only pending moves');
        assert.equal(read.body.expired_at, deadline);
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: r.signing_request_id, deadline_at: svc.clock.now() + 5 * DAY }), 409, 'conflict');
        const after = await fetch(`${svc.origin}${linkOf(a)}`);
        await after.arrayBuffer();
        assert.equal(after.status, 410, 'a dead link stays dead');
        const again = await get(r.signing_request_id);
        assert.equal(again.body.status, 'expired');
        assert.equal(again.body.expired_at, deadline);
      });
    });

    describe('a configured ClamAV daemon that does not answer', () => {
      let scanned: TestService;
      let key: string;
      before(async () => {
        scanned = await startTestService(database.url(), { env: { CLAMAV_URL: `tcp://127.0.0.1:${await freePort()}` } });
        const spec = acme();
        spec.keys!.docs = { name: 'Documents', operations: ['documents.*'] };
        key = (await scanned.apply(spec)).keys.docs!.secret;
      });
      after(async () => {
        await scanned?.close();
      });
      it('CompleteUpload answers 503 unavailable and nothing changes: the upload stays open with its part', async () => {
        const op = (name: string, body: object, idem: string = crypto.randomUUID()) =>
          fetch(`${scanned.baseUrl}/operations/${name}`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}`, 'Idempotency-Key': idem },
            body: JSON.stringify(body),
          }).then(async (r) => ({ status: r.status, body: await r.json(), headers: r.headers }));
        const created = await op('documents.CreateUpload', { filename: 'a.pdf', content_type: 'application/pdf', size: pdf.length });
        const url = await op('documents.GetUploadPart', { upload_id: created.body.upload_id, part_number: 1 });
        const stored = await fetch(`${scanned.origin}${new URL(url.body.url).pathname}`, { method: 'PUT', body: pdf as unknown as BodyInit });
        assert.equal(stored.status, 200, await stored.text());
        const done = await op('documents.CompleteUpload', { upload_id: created.body.upload_id }, 'bb-clamav-retry');
        refused(done, 503, 'unavailable', 'ClamAV down');
        const retry = await op('documents.CompleteUpload', { upload_id: created.body.upload_id }, 'bb-clamav-retry');
        refused(retry, 503, 'unavailable', 'a retry with the same key tries again');
        assert.equal(retry.headers.get('idempotency-replayed'), null, 'a 503 is not a stored answer');
        const read = await op('documents.GetUpload', { upload_id: created.body.upload_id });
        assert.equal(read.body.state, 'open');
        assert.equal(read.body.parts[0].received, true);
        assert.equal(read.body.file_id, null);
      });
    });

    describe('rate limits (seed 5.6: shared per credential and workspace, changing members does not reset them)', () => {
      let limited: TestService;
      let lws: ApplyResult;
      before(async () => {
        limited = await startTestService(database.url(), { rateLimitPerSecond: 0.001, rateLimitBurst: 3 });
        const spec = acme();
        spec.keys!.docs = { name: 'Documents', operations: ['documents.*'], delegation: 'all' };
        spec.keys!.second = { name: 'Second', operations: ['documents.*'] };
        lws = await limited.apply(spec);
      });
      after(async () => {
        await limited?.close();
      });
      it('three calls as Ada, then Olga with the same key is 429 rate_limited with Retry-After; another key still answers', async () => {
        const at = (actAs?: string, key = lws.keys.docs!.secret) =>
          fetch(`${limited.baseUrl}/operations/documents.ListDocuments`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}`, ...(actAs ? { 'Service-Act-As': actAs } : {}) },
            body: JSON.stringify({ scope: 'user' }),
          });
        for (let i = 0; i < 3; i++) assert.equal((await at(lws.members.ada!)).status, 200);
        const res = await at(lws.members.olga!);
        assert.equal(res.status, 429);
        assert.ok(Number(res.headers.get('retry-after')) >= 1, `Retry-After ${res.headers.get('retry-after')}`);
        const body = await res.json();
        assert.equal(body.error, 'rate_limited');
        assert.equal(typeof body.message, 'string');
        const other = await fetch(`${limited.baseUrl}/operations/documents.ListDocuments`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${lws.keys.second!.secret}` },
          body: JSON.stringify({ scope: 'workspace' }),
        });
        assert.equal(other.status, 200, 'another credential has its own budget');
      });
    });

    // ---------------------------------------------------------------- history, documents, visibility

    describe('history, documents and visibility', () => {
      it('ListSigningEvents pages oldest first with stable event_ids; a new poll repeats them; tampered cursors are 400', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }]);
        const id = r.signing_request_id;
        await signAs(a, 'Anna');
        svc.clock.advance(HOUR);
        await call('signing.RemindSigners', { signing_request_id: id });
        await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: svc.clock.now() + 10 * DAY });
        const one = await allEvents(id, 1);
        const two = await allEvents(id, 3);
        const all = await allEvents(id, 100);
        for (const e of all) {
          documented(e, 'SigningEvent', 'event');
        }
        assert.deepEqual(one.map((e) => e.event_id), all.map((e) => e.event_id), 'the same events by pages of 1');
        assert.deepEqual(two.map((e) => e.event_id), all.map((e) => e.event_id), 'and of 3');
        assert.equal(new Set(all.map((e) => e.event_id)).size, all.length, 'ids are unique');
        assert.deepEqual(one, all, 'a new poll answers the same events');
        const times = all.map((e) => e.occurred_at);
        assert.deepEqual(times, [...times].sort((x, y) => x - y), 'oldest first');
        assert.deepEqual(all.map((e) => e.kind).slice(0, 3), ['request.created', 'invitation.sent', 'invitation.sent']);
        for (const k of ['recipient.opened', 'recipient.signed', 'reminder.sent', 'deadline.changed']) assert.ok(all.some((e) => e.kind === k), k);
        const text = JSON.stringify(all);
        assert.doesNotMatch(text, /127\.0\.0\.1|::1|\/sign\/|node|undici/i, 'no IP address, link or user agent');

        const first = await call('signing.ListSigningEvents', { signing_request_id: id, limit: 2 });
        const cursor: string = first.body.next_cursor;
        const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
        for (const [what, c] of [['last character changed', flip(cursor, cursor.length - 1)], ['first character changed', flip(cursor, 0)], ['truncated', cursor.slice(0, -3)], ['made up', 'eyJ4IjoxfQ.abc'], ['non-ASCII', '✓'.repeat(10)]]) {
          refused(await call('signing.ListSigningEvents', { signing_request_id: id, limit: 2, cursor: c }), 400, 'invalid_input', what);
        }
        const other = await request([{ email: addr(), name: 'Other' }]);
        refused(await call('signing.ListSigningEvents', { signing_request_id: other.signing_request_id, limit: 2, cursor }), 400, 'invalid_input', 'a cursor of another request');
        for (const [what, body] of [['limit 0', { signing_request_id: id, limit: 0 }], ['limit 101', { signing_request_id: id, limit: 101 }], ['limit -1', { signing_request_id: id, limit: -1 }], ['id a number', { signing_request_id: 12 }], ['id null', { signing_request_id: null }]] as Array<[string, object]>) {
          refused(await call('signing.ListSigningEvents', body), 400, 'invalid_input', what);
        }
        // Every page re-checks access: another key holding the cursor gets 404.
        refused(await call('signing.ListSigningEvents', { signing_request_id: id, limit: 2, cursor }, { key: secret('twin') }), 404, 'not_found', 'another key with the cursor');
      });

      it('GetSigningDocument original: byte-identical to the upload; its URL expires on the fake clock; HEAD works; bad versions 400', async () => {
        const bytes = Buffer.from(await samplePdf('Byte identical', 3));
        const done = await upload(bytes, { filename: 'Byte identical.pdf' });
        assert.equal(done.status, 200);
        const r = await request([{ email: addr(), name: 'Anna' }], { file_id: done.body.file_id });
        const link = await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: 'original' });
        assert.equal(link.status, 200, JSON.stringify(link.body));
        shape(link.body, { signing_request_id: 'string', version: 'string', url: 'string', filename: 'string', expires_at: 'integer', sha256: 'string', size: 'integer' }, 'document link');
        assert.equal(link.body.version, 'original');
        assert.equal(link.body.sha256, sha(bytes));
        assert.equal(link.body.size, bytes.length);
        assert.equal(link.body.filename, 'Byte identical.pdf');
        assert.equal(link.body.expires_at, svc.clock.now() + 15 * 60_000);
        const url = onService(link.body.url, svc.origin);
        const head = await fetch(url, { method: 'HEAD' });
        assert.equal(head.status, 200);
        const got = await fetch(url);
        assert.equal(got.status, 200);
        assert.match(got.headers.get('content-disposition') ?? '', /attachment/);
        const downloaded = Buffer.from(await got.arrayBuffer());
        assert.equal(Buffer.compare(downloaded, bytes), 0, 'byte-identical');
        refused(await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: 'signed' }), 409, 'conflict', 'signed while pending');
        for (const v of ['Original', 'draft', '', 1, null]) refused(await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: v }), 400, 'invalid_input', `version ${String(v)}`);
        refused(await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id }), 400, 'invalid_input', 'no version');
        svc.clock.advance(15 * 60_000 + 1);
        const late = await fetch(url);
        await late.arrayBuffer();
        assert.ok(late.status >= 400 && late.status < 500, `an expired download link is refused (got ${late.status})`);
        const tampered = await fetch(url.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')));
        await tampered.arrayBuffer();
        assert.ok(tampered.status >= 400 && tampered.status < 500, `a changed download link is refused (got ${tampered.status})`);
        const fresh = await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: 'original' });
        const again = Buffer.from(await (await fetch(onService(fresh.body.url, svc.origin))).arrayBuffer());
        assert.equal(sha(again), sha(bytes), 'a fresh link works');
      });

      it('visibility: 404 for other keys, other workspaces and members who may not see; private requests only to owner and member recipients', async () => {
        const { ada, olga, cleo, bob } = ws.members;
        // A key's own request: another key of the workspace and a foreign key see nothing.
        const mine = await request([{ email: addr(), name: 'Anna' }]);
        for (const [what, o] of [['twin key', { key: secret('twin') }], ['foreign key', { key: foreign.keys.sender!.secret }]] as Array<[string, { key: string }]>) {
          for (const [op, body] of [
            ['signing.GetSigningRequest', { signing_request_id: mine.signing_request_id }],
            ['signing.ListSigningEvents', { signing_request_id: mine.signing_request_id }],
            ['signing.GetSigningDocument', { signing_request_id: mine.signing_request_id, version: 'original' }],
            ['signing.CancelSigningRequest', { signing_request_id: mine.signing_request_id }],
            ['signing.RemindSigners', { signing_request_id: mine.signing_request_id }],
            ['signing.UpdateSigningDeadline', { signing_request_id: mine.signing_request_id, deadline_at: svc.clock.now() + DAY }],
          ] as Array<[string, object]>) {
            refused(await call(op, body, o), 404, 'not_found', `${op} ${what}`);
          }
        }
        // A private request of Ada's file, to Cleo (a member) and an outsider.
        const adaFile = await fileId({ actAs: ada });
        const priv = await request([{ email: 'cleo@acme.test', name: 'Cleo' }, { email: addr(), name: 'Out' }], { file_id: adaFile }, { actAs: ada });
        assert.equal(priv.private, true);
        const id = priv.signing_request_id;
        assert.equal((await get(id, { actAs: ada })).status, 200, 'its owner');
        assert.equal((await get(id, { actAs: cleo })).status, 200, 'a member recipient');
        refused(await get(id), 404, 'not_found', 'the key without a member');
        refused(await get(id, { actAs: olga }), 404, 'not_found', 'the owner of the workspace');
        refused(await get(id, { actAs: bob }), 404, 'not_found', 'an admin');
        // Requests are seen with the member's signing access (seed 4.8), whichever key acts for them.
        assert.equal((await get(id, { key: secret('twin'), actAs: ada })).status, 200, 'another key acting for the owner');
        refused(await get(id, { key: foreign.keys.sender!.secret, actAs: foreign.members.ada! }), 404, 'not_found', 'a member of another workspace');
        // The recipient reads but may not manage.
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id }, { actAs: cleo }), 403, 'forbidden', 'recipient cancels');
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: svc.clock.now() + DAY }, { actAs: cleo }), 403, 'forbidden', 'recipient moves the deadline');
        assert.equal((await call('signing.ListSigningEvents', { signing_request_id: id }, { actAs: cleo })).status, 200);
        // A request of the workspace file sent for Ada: the owner and admin (for themselves) see it, another member does not.
        const wsFile = await fileId();
        const shared = await request([{ email: addr(), name: 'Anna' }], { file_id: wsFile }, { actAs: ada });
        assert.equal(shared.private, false);
        assert.equal((await get(shared.signing_request_id, { actAs: olga })).status, 200, 'an owner');
        assert.equal((await get(shared.signing_request_id, { actAs: bob })).status, 200, 'an admin');
        refused(await get(shared.signing_request_id, { actAs: cleo }), 404, 'not_found', 'another member');
        assert.equal((await get(shared.signing_request_id)).status, 200, 'the key that created it, without a member');
        refused(await get(shared.signing_request_id, { key: secret('twin') }), 404, 'not_found', 'another key without a member');
        // A request of the key (no member) to Cleo: Cleo reads it but may not manage it; the owner manages it; Ada sees nothing.
        const keyMade = await request([{ email: 'cleo@acme.test', name: 'Cleo' }], { file_id: wsFile });
        const kid = keyMade.signing_request_id;
        assert.equal((await get(kid, { actAs: cleo })).status, 200, 'a recipient member');
        refused(await call('signing.RemindSigners', { signing_request_id: kid }, { actAs: cleo }), 403, 'forbidden', 'recipient reminds');
        refused(await get(kid, { actAs: ada }), 404, 'not_found', 'an unrelated member');
        refused(await call('signing.CancelSigningRequest', { signing_request_id: kid }, { actAs: ada }), 404, 'not_found', 'an unrelated member cancels');
        const byOwner = await call('signing.UpdateSigningDeadline', { signing_request_id: kid, deadline_at: svc.clock.now() + 9 * DAY }, { actAs: olga });
        assert.equal(byOwner.status, 200, `an owner acting for herself manages it: ${JSON.stringify(byOwner.body)}`);
        const byAdmin = await call('signing.CancelSigningRequest', { signing_request_id: kid }, { actAs: bob });
        assert.equal(byAdmin.status, 200, `an admin cancels it: ${JSON.stringify(byAdmin.body)}`);
      });

      it('odd but allowed text (unicode, quotes, line breaks) in filenames, titles and names: downloads, mails and the page work, nothing 500', async () => {
        const filename = 'Avtal "Q1"; v2 – åäö 契約 📄.pdf';
        const done = await upload(pdf, { filename });
        assert.equal(done.status, 200, JSON.stringify(done.body));
        assert.equal(done.body.filename, filename);
        const a = addr();
        const res = await call('signing.RequestFileSignatures', {
          file_id: done.body.file_id,
          title: 'Line one\r\nBcc: evil@attacker.test',
          message: '<script>alert(1)</script>\r\n\u0000',
          signers: [{ email: a, name: 'Zoë "Z" O\'Brien\r\nX-Injected: 1' }],
        });
        assert.ok(res.status === 200 || res.status === 400, `${res.status} ${JSON.stringify(res.body)}`);
        assert.equal(smtp.to('evil@attacker.test').length, 0, 'no header injection');
        if (res.status === 200) {
          const mail = smtp.to(a).at(-1)!.mail;
          assert.equal(mail.headers.get('x-injected'), undefined, 'no header injection from the name');
          assert.doesNotMatch(String(mail.html), /<script>alert/, 'the message is escaped in HTML');
          const page = await fetch(`${svc.origin}${linkOf(a)}`);
          assert.equal(page.status, 200);
          assert.doesNotMatch(await page.text(), /<script>alert/);
        }
        const r = await request([{ email: addr(), name: 'Ünïcødé Nämé 山田' }], { file_id: done.body.file_id });
        const link = await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: 'original' });
        assert.equal(link.status, 200);
        assert.equal(link.body.filename, filename);
        const got = await fetch(onService(link.body.url, svc.origin));
        assert.equal(got.status, 200);
        const disposition = got.headers.get('content-disposition') ?? '';
        assert.match(disposition, /^attachment/);
        assert.equal(sha(Buffer.from(await got.arrayBuffer())), sha(pdf));
        // Odd addresses: refused or accepted, never 500.
        for (const email of ['a@b.c\r\nRCPT TO:<evil@attacker.test>', 'ü@exämple.test', '"quoted"@example.test', 'a@[127.0.0.1]', `${'l'.repeat(64)}@${'d'.repeat(250)}.test`, 'a@b', '@example.test', 'a@@example.test']) {
          const odd = await call('signing.RequestFileSignatures', { file_id: done.body.file_id, signers: [{ email, name: 'Odd' }] });
          assert.ok(odd.status === 200 || odd.status === 400, `${JSON.stringify(email)}: ${odd.status} ${JSON.stringify(odd.body)}`);
          if (odd.status === 400) refused(odd, 400, 'invalid_input', email);
        }
        assert.equal(smtp.to('evil@attacker.test').length, 0, 'no SMTP command injection');
      });

      it('headers and URLs: a query parameter 400, odd Service-Act-As and Idempotency-Key values 400/403, one key on two operations', async () => {
        const res = await fetch(`${svc.baseUrl}/operations/documents.ListDocuments?scope=user`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${secret('sender')}` },
          body: JSON.stringify({ scope: 'workspace' }),
        });
        assert.equal(res.status, 400);
        assert.equal((await res.json()).error, 'invalid_input');
        for (const actAs of ['x'.repeat(65), 'ü', `${ws.members.ada}x`, 'mb_' + 'é'.repeat(20)]) {
          const r = await call('documents.ListDocuments', { scope: 'user' }, { actAs });
          assert.ok(r.status === 400 || r.status === 403, `${JSON.stringify(actAs)}: ${r.status} ${JSON.stringify(r.body)}`);
          refused(r, r.status, r.status === 400 ? 'invalid_input' : 'forbidden', JSON.stringify(actAs));
        }
        const r = await request([{ email: addr(), name: 'Anna' }]);
        svc.clock.advance(HOUR);
        const key = `bb-shared-${r.signing_request_id}`;
        assert.equal((await call('signing.RemindSigners', { signing_request_id: r.signing_request_id }, { idem: key })).status, 200);
        const other = await call('signing.CancelSigningRequest', { signing_request_id: r.signing_request_id }, { idem: key });
        assert.ok(other.status === 400 || other.status === 200, `the same key on another operation: ${other.status} ${JSON.stringify(other.body)}`);
        if (other.status === 400) refused(other, 400, 'invalid_input');
        else assert.equal(other.body.status, 'cancelled', 'a separate action when receipts are per operation');
      });

      it('a decline through the page ends the request cancelled "declined by <name>"; the original still downloads, signed is 409', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }]);
        const id = r.signing_request_id;
        await signAs(a, 'Anna');
        const path = linkOf(b);
        assert.equal(await form(`${path}/open`, {}), 303);
        assert.equal(await form(`${path}/decline`, { reason: 'Wrong amount — fel belopp' }), 303);
        const read = await get(id);
        assert.equal(read.body.status, 'cancelled');
        assert.equal(read.body.cancel_reason, 'declined by Bert');
        assert.equal(read.body.recipients[1].status, 'declined');
        assert.equal(read.body.recipients[1].decline_reason, 'Wrong amount — fel belopp');
        assert.equal(read.body.recipients[0].status, 'signed', 'the signature given stays');
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id }), 409, 'conflict', 'cancel declined');
        refused(await call('signing.GetSigningDocument', { signing_request_id: id, version: 'signed' }), 409, 'conflict', 'signed of a declined request');
        assert.equal((await call('signing.GetSigningDocument', { signing_request_id: id, version: 'original' })).status, 200);
        const events = await allEvents(id, 100);
        const declined = events.find((e) => e.kind === 'recipient.declined');
        assert.equal(declined?.data.reason, 'Wrong amount — fel belopp');
        assert.equal(events.at(-1)!.kind, 'request.cancelled');
      });

      it('concurrency: the same Idempotency-Key sent 5 times at once makes one request and one mail; 5 completions at once make one file', async () => {
        const file = await fileId();
        const a = addr('race');
        const body = { file_id: file, signers: [{ email: a, name: 'Race' }] };
        const answers = await Promise.all(Array.from({ length: 5 }, () => call('signing.RequestFileSignatures', body, { idem: `bb-race-${a}` })));
        for (const r of answers) assert.ok(r.status === 200 || r.status === 409, `${r.status} ${JSON.stringify(r.body)}`);
        const ids = new Set(answers.filter((r) => r.status === 200).map((r) => r.body.signing_request_id));
        assert.equal(ids.size, 1, 'one request');
        assert.equal(smtp.to(a).length, 1, 'one mail');
        const created = await call('documents.CreateUpload', { filename: 'race.pdf', content_type: 'application/pdf', size: pdf.length });
        assert.equal((await put(await partUrl(created.body.upload_id, 1), pdf)).status, 200);
        const done = await Promise.all(Array.from({ length: 5 }, () => call('documents.CompleteUpload', { upload_id: created.body.upload_id })));
        for (const d of done) assert.ok(d.status === 200, `${d.status} ${JSON.stringify(d.body)}`);
        assert.equal(new Set(done.map((d) => d.body.file_id)).size, 1, 'one file');
        // Parallel PUTs of the same part: one wins, the upload completes.
        const again = await call('documents.CreateUpload', { filename: 'race2.pdf', content_type: 'application/pdf', size: pdf.length });
        const url = await partUrl(again.body.upload_id, 1);
        const puts = await Promise.all(Array.from({ length: 5 }, () => put(url, pdf)));
        for (const r of puts) assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal((await call('documents.CompleteUpload', { upload_id: again.body.upload_id })).status, 200);
        // A PUT racing a completion: stored before it (200) or refused after it (409), never 500; the file is the upload's bytes.
        const third = await call('documents.CreateUpload', { filename: 'race3.pdf', content_type: 'application/pdf', size: pdf.length });
        const url3 = await partUrl(third.body.upload_id, 1);
        assert.equal((await put(url3, pdf)).status, 200);
        const [c, p] = await Promise.all([call('documents.CompleteUpload', { upload_id: third.body.upload_id }), put(url3, pdf)]);
        assert.equal(c.status, 200, JSON.stringify(c.body));
        assert.ok(p.status === 200 || p.status === 409, `${p.status} ${JSON.stringify(p.body)}`);
        assert.equal(c.body.sha256, sha(pdf));
      });

      it('listing files made in the same millisecond pages without skipping or repeating any', async () => {
        const made: string[] = [];
        for (let i = 0; i < 5; i++) made.push(await fileId({ actAs: ws.members.bob! }));
        const all = await call('documents.ListDocuments', { scope: 'user', limit: 100 }, { actAs: ws.members.bob! });
        const full = all.body.items.map((f: { file_id: string }) => f.file_id);
        for (const id of made) assert.ok(full.includes(id));
        for (const limit of [1, 2, 3]) {
          const paged: string[] = [];
          let cursor: string | undefined;
          for (;;) {
            const page = await call('documents.ListDocuments', { scope: 'user', limit, ...(cursor ? { cursor } : {}) }, { actAs: ws.members.bob! });
            assert.equal(page.status, 200);
            paged.push(...page.body.items.map((f: { file_id: string }) => f.file_id));
            if (!page.body.has_more) break;
            cursor = page.body.next_cursor;
          }
          assert.deepEqual(paged, full, `pages of ${limit}`);
        }
        const times = all.body.items.map((f: { created_at: number }) => f.created_at);
        assert.deepEqual(times, [...times].sort((x: number, y: number) => y - x), 'newest first');
        const dflt = await call('documents.ListDocuments', { scope: 'workspace' });
        assert.ok(dflt.body.items.length <= 50, 'default limit 50');
      });

      it('a failed invitation is re-sent by RemindSigners at once (no hour wait); receipts of RequestFileSignatures are per member', async () => {
        const ok = addr();
        const r = await request([{ email: 'refused-again@example.test', name: 'Rolf' }, { email: ok, name: 'Olle' }]);
        const res = await call('signing.RemindSigners', { signing_request_id: r.signing_request_id });
        assert.equal(res.status, 200, `the failed one is sent again at once: ${JSON.stringify(res.body)}`);
        assert.deepEqual(res.body.invitation_failures, ['refused-again@example.test']);
        assert.equal(smtp.to(ok).length, 1, 'the one mailed less than an hour ago is not reminded');
        const file = await fileId();
        const body = { file_id: file, signers: [{ email: addr(), name: 'Per member' }] };
        const none = await call('signing.RequestFileSignatures', body, { idem: `bb-member-${file}` });
        const asAda = await call('signing.RequestFileSignatures', body, { idem: `bb-member-${file}`, actAs: ws.members.ada! });
        assert.equal(none.status, 200);
        assert.equal(asAda.status, 200, JSON.stringify(asAda.body));
        assert.notEqual(asAda.body.signing_request_id, none.body.signing_request_id, 'the same key for another member is another receipt');
        assert.equal(asAda.headers.get('idempotency-replayed'), null);
      });

      it('a PUT cut off mid-body keeps nothing and blocks nothing; an oversized chunked body is 413; other methods on the URLs are not 500', async () => {
        const created = await call('documents.CreateUpload', { filename: 'drop.pdf', content_type: 'application/pdf', size: pdf.length });
        const id = created.body.upload_id;
        const url = new URL(onService(await partUrl(id, 1), svc.origin));
        await new Promise<void>((resolve) => {
          const req = http.request({ host: url.hostname, port: url.port, path: url.pathname + url.search, method: 'PUT', headers: { 'Content-Length': String(pdf.length) } });
          req.on('error', () => resolve());
          req.on('response', (res) => {
            res.resume();
            resolve();
          });
          req.write(pdf.subarray(0, 100), () => {
            req.destroy();
            resolve();
          });
        });
        const read = await call('documents.GetUpload', { upload_id: id });
        assert.equal(read.body.parts[0].received, false, 'nothing kept from the dropped PUT');
        const chunked = await fetch(url, {
          method: 'PUT',
          body: new ReadableStream({
            start(c) {
              c.enqueue(new Uint8Array(pdf));
              c.enqueue(new Uint8Array(10));
              c.close();
            },
          }),
          duplex: 'half',
        } as RequestInit);
        assert.equal(chunked.status, 413, await chunked.text());
        const good = await put(url.toString(), pdf);
        assert.equal(good.status, 200, `the part is not blocked: ${JSON.stringify(good.body)}`);
        for (const method of ['GET', 'POST', 'DELETE', 'PATCH']) {
          const r = await fetch(url, { method });
          await r.arrayBuffer();
          assert.ok(r.status >= 400 && r.status < 500, `${method} on a part URL: ${r.status}`);
        }
        assert.equal((await call('documents.CompleteUpload', { upload_id: id })).status, 200);
      });

      it('a signed archive can itself be sent for signature; a member recipient is matched by address without case', async () => {
        const a = addr();
        const r = await request([{ email: a, name: 'Anna' }]);
        await signAs(a, 'Anna');
        await runJobs(svc);
        const archive = (await get(r.signing_request_id)).body.file_id;
        assert.match(archive, /^file_/);
        const again = await call('signing.RequestFileSignatures', { file_id: archive, signers: [{ email: addr(), name: 'Second round' }] });
        assert.equal(again.status, 200, JSON.stringify(again.body));
        assert.equal(again.body.source_file_id, archive);
        const adaFile = await fileId({ actAs: ws.members.ada! });
        const priv = await request([{ email: 'CLEO@Acme.TEST', name: 'Cleo' }], { file_id: adaFile }, { actAs: ws.members.ada! });
        assert.equal((await get(priv.signing_request_id, { actAs: ws.members.cleo! })).status, 200, 'addresses are compared without case');
        const doc = await call('signing.GetSigningDocument', { signing_request_id: priv.signing_request_id, version: 'original' }, { actAs: ws.members.cleo! });
        assert.equal(doc.status, 200, 'a recipient member may download the original');
        const key = `bb-deadline-${priv.signing_request_id}`;
        assert.equal((await call('signing.UpdateSigningDeadline', { signing_request_id: priv.signing_request_id, deadline_at: svc.clock.now() + 3 * DAY }, { idem: key, actAs: ws.members.ada! })).status, 200);
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: priv.signing_request_id, deadline_at: svc.clock.now() + 4 * DAY }, { idem: key, actAs: ws.members.ada! }), 400, 'invalid_input', 'same key, other deadline');
      });

      it('discovery and the document: every documents.* and signing.* operation is listed for the key and declared as the seed says', async () => {
        const res = await fetch(`${svc.baseUrl}/operations`, { headers: { Authorization: `Bearer ${secret('sender')}` } });
        assert.equal(res.status, 200);
        const listed = JSON.stringify(await res.json());
        const doc = await (await fetch(`${svc.baseUrl}/openapi.json`)).json();
        const ops = Object.entries(doc.paths as Record<string, Record<string, any>>)
          .map(([, item]) => item.post)
          .filter((o) => o && /^(documents|signing)\./.test(o.operationId));
        assert.ok(ops.length >= 12, `found ${ops.length}`);
        for (const o of ops) {
          assert.ok(listed.includes(o.operationId), `${o.operationId} is listed for the key`);
          assert.ok(['query', 'command'].includes(o['x-service-kind']), o.operationId);
          assert.equal(o['x-service-contract-version'], 1, o.operationId);
          assert.equal(typeof o['x-service-workspace-supported'], 'boolean', o.operationId);
          assert.equal(o.deprecated, false, o.operationId);
          const idem = (o.parameters ?? []).some((p: { name?: string; $ref?: string }) => p.name === 'Idempotency-Key' || String(p.$ref).includes('IdempotencyKey'));
          assert.equal(idem, o['x-service-kind'] === 'command', `${o.operationId}: an Idempotency-Key exactly on commands`);
        }
        const bare = await fetch(`${svc.baseUrl}/operations`, { headers: { Authorization: `Bearer ${secret('bare')}` } });
        assert.doesNotMatch(JSON.stringify(await bare.json()), /signing\.|documents\./, 'a key without the grants lists none');
        refused(await call('documents.DeleteDocument', { file_id: 'file_x' }), 404, 'not_found', 'an operation that does not exist');
        const wrong = await fetch(`${svc.baseUrl}/operations/documents.ListDocuments`, { headers: { Authorization: `Bearer ${secret('sender')}` } });
        assert.equal(wrong.status, 405);
      });

      it('a private request\'s archive stays private to its owner: not in the workspace list, not verifiable or downloadable by others', async () => {
        const { ada, olga, cleo } = ws.members;
        const adaFile = await fileId({ actAs: ada });
        const a = addr();
        const priv = await request([{ email: a, name: 'Anna' }], { file_id: adaFile }, { actAs: ada });
        await signAs(a, 'Anna');
        await runJobs(svc);
        const done = await get(priv.signing_request_id, { actAs: ada });
        assert.equal(done.body.status, 'completed');
        const archive = done.body.file_id;
        assert.match(archive, /^file_/);
        const wsList = await call('documents.ListDocuments', { scope: 'workspace', limit: 100 });
        assert.ok(!wsList.body.items.some((f: { file_id: string }) => f.file_id === archive), 'not a workspace file');
        const olgaList = await call('documents.ListDocuments', { scope: 'user', limit: 100 }, { actAs: olga });
        assert.ok(!olgaList.body.items.some((f: { file_id: string }) => f.file_id === archive), "not in another member's files");
        const adaList = await call('documents.ListDocuments', { scope: 'user', limit: 100 }, { actAs: ada });
        const mine = adaList.body.items.find((f: { file_id: string }) => f.file_id === archive);
        assert.ok(mine, "in the owner's files");
        assert.equal(mine.source, 'signing_archive');
        assert.equal(mine.owner_member_id, ada);
        refused(await call('signing.VerifySignedDocument', { file_id: archive }), 404, 'not_found', 'verify without the member');
        refused(await call('signing.VerifySignedDocument', { file_id: archive }, { actAs: olga }), 404, 'not_found', 'verify as another member');
        refused(await call('signing.GetSigningDocument', { signing_request_id: priv.signing_request_id, version: 'signed' }, { actAs: olga }), 404, 'not_found', 'download as the owner of the workspace');
        refused(await call('signing.RequestFileSignatures', { file_id: archive, signers: [{ email: addr(), name: 'X' }] }, { actAs: cleo }), 404, 'not_found', 'send as another member');
        assert.equal((await call('signing.VerifySignedDocument', { file_id: archive }, { actAs: ada })).body.seal.valid, true);
      });

      it('paging follows new events that arrive between pages; a member\'s documents cursor does not open another member\'s files', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }]);
        const id = r.signing_request_id;
        const first = await call('signing.ListSigningEvents', { signing_request_id: id, limit: 2 });
        assert.equal(first.body.items.length, 2);
        assert.equal(first.body.has_more, true);
        await signAs(a, 'Anna');
        const rest: any[] = [];
        let cursor: string | null = first.body.next_cursor;
        while (cursor) {
          const page = await call('signing.ListSigningEvents', { signing_request_id: id, limit: 2, cursor });
          assert.equal(page.status, 200, JSON.stringify(page.body));
          rest.push(...page.body.items);
          cursor = page.body.has_more ? page.body.next_cursor : null;
        }
        const all = await allEvents(id, 100);
        assert.deepEqual([...first.body.items, ...rest].map((e) => e.event_id), all.map((e) => e.event_id), 'nothing skipped or repeated');
        assert.ok(rest.some((e) => e.kind === 'recipient.signed'));

        const { ada, olga } = ws.members;
        await fileId({ actAs: ada });
        await fileId({ actAs: ada });
        const page = await call('documents.ListDocuments', { scope: 'user', limit: 1 }, { actAs: ada });
        assert.equal(page.body.has_more, true);
        const asOlga = await call('documents.ListDocuments', { scope: 'user', limit: 1, cursor: page.body.next_cursor }, { actAs: olga });
        assert.ok(asOlga.status === 400 || asOlga.status === 200, String(asOlga.status));
        if (asOlga.status === 200) assert.ok(asOlga.body.items.every((f: { owner_member_id: string }) => f.owner_member_id === olga), "never Ada's files");
        else refused(asOlga, 400, 'invalid_input');
      });

      it('ListSigningRequests lists exactly what GetSigningRequest lets each caller read; its cursor is bound to the caller and filter', async () => {
        const { ada, olga, cleo } = ws.members;
        const adaFile = await fileId({ actAs: ada });
        const priv = await request([{ email: 'cleo@acme.test', name: 'Cleo' }], { file_id: adaFile }, { actAs: ada });
        await request([{ email: addr(), name: 'Key made' }]);
        await request([{ email: addr(), name: 'Key made too' }]);
        const list = async (o: { key?: string; actAs?: string }, body: object = {}) => {
          const ids: string[] = [];
          let cursor: string | undefined;
          for (let guard = 0; guard < 100; guard++) {
            const page = await call('signing.ListSigningRequests', { limit: 7, ...body, ...(cursor ? { cursor } : {}) }, o);
            assert.equal(page.status, 200, JSON.stringify(page.body));
            for (const item of page.body.items) documented(item, 'SigningRequest', 'listed request');
            ids.push(...page.body.items.map((x: { signing_request_id: string }) => x.signing_request_id));
            if (!page.body.has_more) return ids;
            cursor = page.body.next_cursor;
          }
          throw new Error('paging never ended');
        };
        for (const [who, o] of [['key', {}], ['ada', { actAs: ada }], ['olga', { actAs: olga }], ['cleo', { actAs: cleo }], ['twin', { key: secret('twin') }]] as Array<[string, { key?: string; actAs?: string }]>) {
          const ids = await list(o);
          assert.equal(new Set(ids).size, ids.length, `${who}: no request twice`);
          for (const id of ids.slice(0, 15)) assert.equal((await get(id, o)).status, 200, `${who} can read what is listed`);
          const privListed = ids.includes(priv.signing_request_id);
          assert.equal(privListed, who === 'ada' || who === 'cleo', `${who}: the private request only for its owner and member recipient`);
        }
        const pending = await list({}, { status: 'pending' });
        for (const id of pending.slice(0, 10)) assert.equal((await get(id)).body.status, 'pending');
        const first = await call('signing.ListSigningRequests', { limit: 1 }, { actAs: olga });
        assert.equal(first.body.has_more, true);
        refused(await call('signing.ListSigningRequests', { limit: 1, cursor: first.body.next_cursor }, { actAs: ada }), 400, 'invalid_input', 'a cursor of another member');
        refused(await call('signing.ListSigningRequests', { limit: 1, cursor: first.body.next_cursor, status: 'pending' }, { actAs: olga }), 400, 'invalid_input', 'a cursor of another filter');
        refused(await call('signing.ListSigningRequests', { status: 'declined' }), 400, 'invalid_input', 'an unknown state');
      });

      it('odd ids and types on every signing operation answer 400 or 404, never 500', async () => {
        const ops = ['signing.GetSigningRequest', 'signing.ListSigningEvents', 'signing.CancelSigningRequest', 'signing.RemindSigners'];
        const ids: unknown[] = [12, null, true, [], {}, '', 'x'.repeat(41), 'sr_' + '\u0000', 'sr_👍', "sr_' OR 1=1 --", 'sr_%00', '../../etc/passwd', 'SR_ABC'];
        for (const op of ops) {
          for (const v of ids) {
            const res = await call(op, { signing_request_id: v });
            assert.ok(res.status === 400 || res.status === 404, `${op} ${JSON.stringify(v)}: ${res.status} ${JSON.stringify(res.body)}`);
            refused(res, res.status, res.status === 400 ? 'invalid_input' : 'not_found', `${op} ${JSON.stringify(v)}`);
          }
        }
        for (const v of ids) {
          const res = await call('signing.UpdateSigningDeadline', { signing_request_id: v, deadline_at: svc.clock.now() + DAY });
          assert.ok(res.status === 400 || res.status === 404, `${JSON.stringify(v)}: ${res.status}`);
          const doc = await call('signing.GetSigningDocument', { signing_request_id: v, version: 'original' });
          assert.ok(doc.status === 400 || doc.status === 404, `${JSON.stringify(v)}: ${doc.status}`);
          const verify = await call('signing.VerifySignedDocument', { file_id: v });
          assert.ok(verify.status === 400 || verify.status === 404, `verify ${JSON.stringify(v)}: ${verify.status}`);
          const up = await call('documents.GetUpload', { upload_id: v });
          assert.ok(up.status === 400 || up.status === 404, `GetUpload ${JSON.stringify(v)}: ${up.status}`);
        }
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: 'sr_x', deadline_at: 8_640_000_000_000_001 }), 400, 'invalid_input', 'deadline beyond a Date');
        for (const raw of ['{"__proto__":{"admin":true},"scope":"workspace"}', '{"constructor":{"prototype":{"x":1}},"scope":"workspace"}', '{"scope":"workspace","limit":1e2}', '{"scope":"workspace","limit":"1"}', '{"scope":["workspace"]}', '{"scope":"workspace","scope":"user"}']) {
          const r = await call('documents.ListDocuments', raw);
          assert.ok(r.status === 200 || r.status === 400, `${raw}: ${r.status} ${JSON.stringify(r.body)}`);
        }
        const deep = '{"scope":' + '['.repeat(10_000) + ']'.repeat(10_000) + '}';
        const d = await call('documents.ListDocuments', deep);
        assert.equal(d.status, 400, `deeply nested: ${d.status}`);
        const inf = await call('signing.UpdateSigningDeadline', '{"signing_request_id":"sr_x","deadline_at":1e400}');
        assert.equal(inf.status, 400, `a number a double cannot hold: ${JSON.stringify(inf.body)}`);
      });
    });
  });
}
