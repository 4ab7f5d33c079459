/**
 * The shared setup of the documents.* and signing.* black-box suites (test/signing/blackbox-*.test.ts):
 * one service per database with a real SMTP server, the workspace and keys they use, and the helpers that
 * call the service over HTTP only. `blackboxService(database)` registers the before/after hooks in the
 * calling describe and answers the helpers; `state()` gives the service and workspace once `before` ran.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { ApplyResult } from '../../server/admin.ts';
import { acme } from '../support/fixtures.ts';
import type { TestDatabase, TestService } from '../support/service.ts';
import { type MailServer, signingService, startMailServer, tokenIn } from './requestSupport.ts';
import { onService, samplePdf } from './signerKit.ts';

export const HOUR = 3_600_000;
export const DAY = 24 * HOUR;
export const MIB = 1_048_576;
export const sha = (b: Uint8Array) => crypto.createHash('sha256').update(b).digest('hex');

export interface Answer {
  status: number;
  body: any;
  headers: Headers;
}

export type Value = 'string' | 'string|null' | 'integer' | 'integer|null' | 'boolean' | 'array';

/** The object has exactly these keys, each of the given JSON type. */
export function shape(obj: any, fields: Record<string, Value>, what: string): void {
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
export function documented(obj: any, name: string, what: string): void {
  const schema = schemas[name];
  assert.ok(schema, `the document declares ${name}`);
  check(obj, schema, what);
}
export function check(v: any, given: any, what: string): void {
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
export function refused(res: Answer, status: number, error: string, what = ''): void {
  assert.equal(res.status, status, `${what} ${JSON.stringify(res.body)}`);
  assert.equal(typeof res.body, 'object', `${what}: a JSON body`);
  assert.equal(res.body.error, error, `${what} ${JSON.stringify(res.body)}`);
  assert.equal(typeof res.body.message, 'string');
  assert.ok(res.body.message.length > 0);
  assert.deepEqual(Object.keys(res.body).sort(), ['error', 'message', 'request_id'], what);
  // Part PUTs and downloads are outside /v1; their answers carry the id too when they have one.
  if (res.headers.get('request-id')) assert.equal(res.body.request_id, res.headers.get('request-id'), `${what}: request_id is the Request-Id header`);
}

/** Registers the suite's service (before/after in the calling describe) and answers its helpers. */
export function blackboxService(database: TestDatabase) {
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

  const state = () => ({ smtp, svc, ws, foreign, pdf });
  return { state, secret, answer, call, put, partUrl, upload, fileId, addr, request, linkOf, form, signAs, get, allEvents };
}
