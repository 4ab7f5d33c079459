/**
 * Issue 21, findings 8 and 20 (second half).
 * 8: one rule for every name a person reads (server/text.cjs): the document's `format: display-text`
 * on filenames, titles, messages, signer names, company, deal, pipeline and stage names (and the rest),
 * enforced by the one Ajv set-up, refuses the bidi embedding, override and isolate controls
 * (U+202A–U+202E, U+2066–U+2069) as `400 invalid_input` naming the field and the character, stores
 * nothing; right-to-left letters and the marks U+200E / U+200F pass. The page forms use the same rule.
 * 20: a member's sign-in session may call signing.ListSigningRequests, as its description says, and
 * sees what that member may read (sent by them, or theirs to sign).
 */
import assert from 'node:assert/strict';
import { dereferenced } from '../../generated/dereferenced.ts';
import { addToWorkspace, type ApplyResult, createKey } from '../../server/admin.ts';
import { createAjv } from '../../server/ajv.cjs';
import { createSigninLink } from '../../server/signin.ts';
import { bidiControlProblem, displayTextProblem, isDisplayText } from '../../server/text.cjs';
import { stateDiff, storedState } from '../support/badInput.ts';
import { acme } from '../support/fixtures.ts';
import { databases, type TestService } from '../support/service.ts';
import { type MailServer, putFile, runJobs, signingService, startMailServer, tokenIn } from '../signing/requestSupport.ts';

const RLO = '\u202e';
const CONTROLS = ['\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069'];
const SHA = 'a'.repeat(64);

/** Person-readable request strings by their property name (a new one of these names must carry the format). */
const READ_BY_PEOPLE = new Set(['name', 'title', 'message', 'filename', 'label', 'reason', 'description', 'industry', 'street', 'city', 'region', 'body']);

type Node = Record<string, any>;
/** Every string property of every request body (path, property name, schema), branches and items included. */
function requestStrings(): Array<{ at: string; prop: string; schema: Node }> {
  const out: Array<{ at: string; prop: string; schema: Node }> = [];
  const walk = (s: Node | undefined, at: string, prop: string, seen: Set<Node>) => {
    if (!s || typeof s !== 'object' || seen.has(s)) return;
    const next = new Set(seen).add(s);
    for (const k of ['oneOf', 'anyOf', 'allOf']) for (const b of (s[k] as Node[] | undefined) ?? []) walk(b, at, prop, next);
    if (s.type === 'string') out.push({ at, prop, schema: s });
    for (const [k, v] of Object.entries((s.properties as Record<string, Node> | undefined) ?? {})) walk(v, `${at}.${k}`, k, next);
    if (s.items) walk(s.items as Node, `${at}[]`, prop, next);
  };
  for (const item of Object.values(dereferenced.paths) as Node[]) {
    for (const op of [item.get, item.post] as Array<Node | undefined>) {
      if (op) walk(op.requestBody?.content?.['application/json']?.schema, `${op.operationId} body`, '', new Set());
    }
  }
  return out;
}

describe('issue 21: one display-text rule, declared in the document', () => {
  it('marks every person-readable request string `format: display-text`, and nothing with an enum or a pattern', () => {
    const strings = requestStrings();
    const missing = strings.filter((s) => READ_BY_PEOPLE.has(s.prop) && !s.schema.enum && !s.schema.pattern && s.schema.format !== 'display-text').map((s) => s.at);
    assert.deepEqual([...new Set(missing)], []);
    const marked = new Set(strings.filter((s) => s.schema.format === 'display-text').map((s) => s.at));
    for (const at of ['documents.CreateUpload body.filename', 'signing.RequestFileSignatures body.title', 'signing.RequestFileSignatures body.message', 'signing.RequestFileSignatures body.signers[].name', 'signing.RemindSigners body.message', 'signing.CancelSigningRequest body.reason', 'customers.CreateCompany body.data.name', 'customers.CreateDeal body.data.name', 'customers.CreateSalesPipeline body.data.name', 'customers.CreateSalesPipeline body.data.stages[].label']) {
      assert.ok(marked.has(at), `${at} is display-text`);
    }
    assert.ok(!strings.some((s) => s.schema.format === 'display-text' && (s.schema.enum || s.schema.pattern)), 'an enum or a pattern already says what is allowed');
  });

  it('pages, the API and the document hold one rule: the same characters refused, every other code point kept', () => {
    const ajv = createAjv();
    const validate = ajv.compile({ type: 'string', format: 'display-text' });
    const refused: string[] = [];
    for (let cp = 0; cp <= 0x10ffff; cp += cp < 0x30000 ? 1 : 0x1000) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const c = String.fromCodePoint(cp);
      const api = displayTextProblem('body.name', `a${c}b`) !== null;
      assert.equal(bidiControlProblem('name', `a${c}b`) !== null, api, `U+${cp.toString(16)}: pages and API agree`);
      assert.equal(validate(`a${c}b`) === false, api, `U+${cp.toString(16)}: the schema format and the API agree`);
      assert.equal(isDisplayText(`a${c}b`), !api);
      if (api) refused.push(c);
    }
    assert.deepEqual(refused, CONTROLS);
    assert.equal(displayTextProblem('body.title', `invoice${RLO}fdp.exe`)!.startsWith('body.title contains U+202E RIGHT-TO-LEFT OVERRIDE, a control that reorders text'), true);
  });
});

for (const database of databases) {
  describe(`issue 21: names a person reads [${database.name}]`, function () {
    this.timeout(60_000);
    let smtp: MailServer;
    let svc: TestService;
    let ws: ApplyResult;

    before(async () => {
      smtp = await startMailServer();
      svc = await signingService(database.url(), smtp);
      const spec = acme();
      spec.members!.cleo = { name: 'Cleo Member', email: 'cleo@acme.test', role: 'member' };
      spec.keys!.everything = {
        name: 'Everything',
        operations: ['signing.*', 'documents.*', 'customers.*'],
        resources: { 'core:SalesPipeline': ['read', 'write'], 'core:Company': ['read', 'write'], 'core:Deal': ['read', 'write'] },
        delegation: 'all',
        created_by: 'olga',
      };
      ws = await svc.apply(spec);
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    const key = () => ({ Authorization: `Bearer ${ws.keys.everything!.secret}` });
    let n = 0;
    const command = (actAs?: string) => ({ ...key(), 'Idempotency-Key': `bidi-${++n}`, ...(actAs ? { 'Service-Act-As': actAs } : {}) });

    async function pipeline(): Promise<{ id: string; stage: string }> {
      const res = await svc.post('customers.CreateSalesPipeline', { data: { name: 'New business', stages: [{ id: 'lead', label: 'Lead', kind: 'open' }, { id: 'won', label: 'Won', kind: 'won' }, { id: 'lost', label: 'Lost', kind: 'lost' }] } }, command());
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return { id: res.body.item.id, stage: 'lead' };
    }

    async function signingRequest(body: Record<string, unknown> = {}, actAs?: string): Promise<string> {
      const { file } = await putFile(svc, ws.workspace_id);
      const res = await svc.post('signing.RequestFileSignatures', { file_id: file.id, signers: [{ email: 'ana@example.test', name: 'Ana Lind' }], ...body }, command(actAs));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.signing_request_id;
    }

    it('refuses a bidi control in every person-readable field as 400 invalid_input naming the field and the character, and stores nothing', async () => {
      const p = await pipeline();
      const pending = await signingRequest();
      const { file } = await putFile(svc, ws.workspace_id);
      const cases: Array<[string, unknown, string]> = [
        ['documents.CreateUpload', { filename: `invoice${RLO}fdp.exe`, content_type: 'application/pdf', size: 1000, sha256: SHA }, 'body.filename'],
        ['signing.RequestFileSignatures', { file_id: file.id, signers: [{ email: 'ana@example.test', name: 'Ana Lind' }], title: `Contract ${RLO}fdp.exe` }, 'body.title'],
        ['signing.RequestFileSignatures', { file_id: file.id, signers: [{ email: 'ana@example.test', name: 'Ana Lind' }], message: `Open ${RLO}fdp.exe` }, 'body.message'],
        ['signing.RequestFileSignatures', { file_id: file.id, signers: [{ email: 'ana@example.test', name: 'Ana Lind' }, { email: 'bo@example.test', name: `Bo ${RLO}kE` }] }, 'body.signers.1.name'],
        ['signing.RemindSigners', { signing_request_id: pending, message: `Please ${RLO}ngis` }, 'body.message'],
        ['signing.CancelSigningRequest', { signing_request_id: pending, reason: `Wrong ${RLO}elif` }, 'body.reason'],
        ['customers.CreateCompany', { data: { name: `Globex ${RLO}xelgo` } }, 'body.data.name'],
        ['customers.CreateCompany', { data: { name: 'Globex', address: { city: `Malm${RLO}ö` } } }, 'body.data.address.city'],
        ['customers.CreateDeal', { data: { name: `Renewal \u2067x\u2069`, pipeline_id: p.id, stage_id: p.stage, amount: { amount: '10', currency: 'EUR' } } }, 'body.data.name'],
        ['customers.CreateSalesPipeline', { data: { name: `Pipe\u202b`, stages: [{ id: 'a', label: 'A', kind: 'open' }, { id: 'w', label: 'W', kind: 'won' }, { id: 'l', label: 'L', kind: 'lost' }] } }, 'body.data.name'],
        ['customers.CreateSalesPipeline', { data: { name: 'Pipe', stages: [{ id: 'a', label: `A\u202d`, kind: 'open' }, { id: 'w', label: 'W', kind: 'won' }, { id: 'l', label: 'L', kind: 'lost' }] } }, 'body.data.stages.0.label'],
      ];
      for (const [op, body, field] of cases) {
        const before = await storedState(svc);
        const res = await svc.post(op, body, command());
        assert.equal(res.status, 400, `${op} ${field}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.error, 'invalid_input');
        const control = /\u202e/.test(JSON.stringify(body)) ? 'U\\+202E RIGHT-TO-LEFT OVERRIDE' : 'U\\+20[26][0-9A-F] [A-Z -]+';
        assert.match(res.body.message, new RegExp(`^${field.replace(/\./g, '\\.')} contains ${control}, a control that reorders text; names, titles, messages and file names may not contain bidi controls`));
        assert.equal(stateDiff(before, await storedState(svc)), null, `${op} ${field}: a refusal stores nothing`);
      }
    });

    it("refuses a signer's e-mail address holding a bidi control or an invisible format character (black-box re-test), storing nothing", async () => {
      const { file } = await putFile(svc, ws.workspace_id);
      for (const email of [`a${RLO}@dest.example`, `pay${RLO}fdp.exe@dest.example`, 'x\u2066@dest.example', 'ana\u200b@dest.example', 'ana@dest\ufeff.example']) {
        const before = await storedState(svc);
        const res = await svc.post('signing.RequestFileSignatures', { file_id: file.id, signers: [{ email, name: 'Ana Lind' }] }, command());
        assert.equal(res.status, 400, `${JSON.stringify(email)}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.error, 'invalid_input');
        assert.match(res.body.message, /^signers\[0\]\.email is not an e-mail address/);
        assert.equal(stateDiff(before, await storedState(svc)), null);
      }
    });

    it('names each of the nine controls, and keeps right-to-left letters and the marks U+200E / U+200F', async () => {
      for (const c of CONTROLS) {
        const res = await svc.post('customers.CreateCompany', { data: { name: `x${c}y` } }, command());
        assert.equal(res.status, 400);
        assert.match(res.body.message, new RegExp(`^body\\.data\\.name contains U\\+${c.codePointAt(0)!.toString(16).toUpperCase()} [A-Z -]+, a control`));
      }
      const company = await svc.post('customers.CreateCompany', { data: { name: 'שלום עולם בע״מ\u200f', address: { city: 'الرياض' } } }, command());
      assert.equal(company.status, 200, JSON.stringify(company.body));
      assert.equal(company.body.item.data.name, 'שלום עולם בע״מ\u200f');
      const upload = await svc.post('documents.CreateUpload', { filename: 'חשבונית\u200e.pdf', content_type: 'application/pdf', size: 1000, sha256: SHA }, command());
      assert.equal(upload.status, 200, JSON.stringify(upload.body));
      const id = await signingRequest({ title: 'عقد الخدمات', signers: [{ email: 'sara@example.test', name: 'سارة\u200f (Sara)' }] });
      const read = await svc.post('signing.GetSigningRequest', { signing_request_id: id }, key());
      assert.equal(read.status, 200, JSON.stringify(read.body));
      assert.equal(read.body.title, 'عقد الخدمات');
      assert.equal(read.body.recipients[0].name, 'سارة\u200f (Sara)');
    });

    it('holds the operator the same rule: the workspace file (names of the workspace, members, keys, bundles, apps, automation rules) and the key CLI', async () => {
      const refused = async (spec: Parameters<typeof addToWorkspace>[3], field: string) => {
        await assert.rejects(addToWorkspace(svc.db, svc.clock, ws.workspace_id, spec), (err: Error) => {
          assert.match(err.message, new RegExp(`${field.replace(/\./g, '\\.')} contains U\\+202E RIGHT-TO-LEFT OVERRIDE, a control that reorders text`));
          return true;
        });
      };
      await refused({ members: { eve: { name: `Eve ${RLO}evE`, email: 'eve@acme.test', role: 'member' } } }, 'members.eve.name');
      await refused({ bundles: { shop: { name: `Shop ${RLO}pohS`, domain: 'shop.acme.test' } } }, 'bundles.shop.name');
      await refused({ keys: { sync: { name: `Sync ${RLO}gnp.exe`, operations: ['customers.*'] } } }, 'keys.sync.name');
      await refused({ automations: { note: { name: `Note ${RLO}eton`, trigger: { resource_type: 'core:Deal', event: 'created' }, actions: [{ type: 'notify', to: 'owners_and_admins', title: 'New deal' }] } } } as never, 'automations.note.name');
      await refused({ automations: { note: { name: 'Note', trigger: { resource_type: 'core:Deal', event: 'created' }, actions: [{ type: 'notify', to: 'owners_and_admins', title: `New ${RLO}laed` }] } } } as never, 'automations.note.actions.0.title');
      await assert.rejects(createKey(svc.db, svc.clock, ws.workspace_id, { name: `Sync ${RLO}gnp.exe`, operations: ['customers.*'] }), /key\.name contains U\+202E RIGHT-TO-LEFT OVERRIDE/);
      const added = await addToWorkspace(svc.db, svc.clock, ws.workspace_id, { members: { dana: { name: 'דנה כהן', email: 'dana@acme.test', role: 'member' } } });
      assert.ok(added.members.dana);
    });

    it("holds the signer's page to the same rule: a typed name or a decline reason with a bidi control is refused on the page, nothing recorded", async () => {
      await signingRequest({ signers: [{ email: 'pat@example.test', name: 'Pat' }] });
      await runJobs(svc);
      const path = `/sign/${tokenIn(smtp.to('pat@example.test').at(-1)!.mail)}`;
      const form = async (to: string, fields: Record<string, string>) => {
        const res = await fetch(`${svc.origin}${path}${to}`, { method: 'POST', redirect: 'manual', headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: svc.origin }, body: new URLSearchParams(fields).toString() });
        return { status: res.status, text: await res.text() };
      };
      assert.equal((await form('/open', {})).status, 303);
      const signed = await form('/sign', { typed_name: `Pat ${RLO}taP`, agree: 'yes' });
      assert.equal(signed.status, 400);
      assert.match(signed.text, /The name contains U\+202E, a character that changes the direction of the text around it/);
      const declined = await form('/decline', { reason: `Wrong ${RLO}elif` });
      assert.equal(declined.status, 400);
      assert.match(declined.text, /The reason contains U\+202E, a character that changes the direction/);
      assert.equal((await form('/sign', { typed_name: 'פט שלום\u200f', agree: 'yes' })).status, 303, 'right-to-left letters and marks sign');
    });

    it("lets a member's sign-in session list the signing requests that member sent or must sign (signing.ListSigningRequests)", async () => {
      const sentByAda = await signingRequest({ signers: [{ email: 'ext@example.test', name: 'Ext' }] }, ws.members.ada);
      const toAda = await signingRequest({ signers: [{ email: 'ADA@acme.test', name: 'Ada' }] }, ws.members.cleo);
      const cleoOnly = await signingRequest({ signers: [{ email: 'ext2@example.test', name: 'Ext' }] }, ws.members.cleo);
      const cookie = async (member: string) => {
        const minted = await createSigninLink(svc.db, svc.clock, { workspaceId: ws.workspace_id, memberId: ws.members[member]!, baseUrl: svc.origin });
        const res = await fetch(minted.url, { redirect: 'manual' });
        assert.equal(res.status, 303);
        return res.headers.getSetCookie()[0]!.split(';')[0]!;
      };
      const list = async (member: string) => {
        const res = await svc.post('signing.ListSigningRequests', { limit: 100 }, { Cookie: await cookie(member) });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        return (res.body.items as Array<{ signing_request_id: string }>).map((r) => r.signing_request_id);
      };
      const ada = await list('ada');
      assert.ok(ada.includes(sentByAda) && ada.includes(toAda), 'what Ada sent and what Ada must sign');
      assert.ok(!ada.includes(cleoOnly), "not Cleo's request to someone else");
      const olga = await list('olga');
      assert.ok([sentByAda, toAda, cleoOnly].every((id) => olga.includes(id)), "an owner sees the workspace's requests that are not private");
      // A session stays a reader: the commands beside it still refuse it.
      const res = await svc.post('signing.CancelSigningRequest', { signing_request_id: sentByAda }, { Cookie: await cookie('ada'), 'Idempotency-Key': 'session-cancel' });
      assert.equal(res.status, 403, JSON.stringify(res.body));
    });
  });
}
