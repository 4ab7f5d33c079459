/**
 * Signing and documents events in the shared outbox (issue 22 §2), end to end: a PDF uploaded through
 * the documents operations and a signing request signed by its signers through their links emit
 * events of the declared kinds in the change's transaction; an automation rule triggered by
 * `signing.request.completed` moves the deal its action names to won and notifies the sender; an
 * approved webhook subscription to that kind receives a `v1=`-signed delivery at a real HTTPS receiver,
 * with ids, status, title and counts only (no IP or e-mail address, link, token or content); an
 * existing subscription to another event never receives them. ListSigningEvents keeps its contract.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { automationsSection } from '../../handlers/automation/authoring.ts';
import { approveProposal } from '../../handlers/webhooks/subscriptions.ts';
import type { ApplyResult } from '../../server/admin.ts';
import { createAjv } from '../../server/ajv.cjs';
import { mailConfigFromEnv } from '../../server/mailer.ts';
import { settleAutomation } from '../support/automation.ts';
import { acme, createDeal, stages } from '../support/fixtures.ts';
import { type Receiver, startReceiver } from '../support/receiver.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { deliver, opensslHmac, receiverPolicy } from '../webhooks/support.ts';
import { FROM, type MailServer, runJobs, startMailServer, tokenIn } from './requestSupport.ts';
import { samplePdf } from './signerKit.ts';

const SIGNERS = [
  { email: 'ina.events@example.test', name: 'Ina Signer' },
  { email: 'jon.events@example.test', name: 'Jon Signer' },
];

for (const database of databases) {
  describe(`signing and documents events: outbox, automation, webhooks [${database.name}]`, function () {
    this.timeout(90_000);
    let smtp: MailServer;
    let receiver: Receiver;
    let svc: TestService;
    let ws: ApplyResult;

    before(async () => {
      smtp = await startMailServer();
      receiver = await startReceiver();
      svc = await startTestService(database.url(), { mail: mailConfigFromEnv({ SMTP_URL: smtp.url, MAIL_FROM: FROM }), publicUrl: 'https://sign.acme.example', ...receiverPolicy(receiver) });
      const spec = acme();
      spec.keys!.sender = { name: 'Contracts integration', operations: ['signing.*', 'documents.*'], delegation: 'all', created_by: 'olga' };
      const deals = (): Record<string, Array<'read' | 'write'>> => ({ 'core:SalesPipeline': ['read', 'write'], 'core:Company': ['read', 'write'], 'core:Deal': ['read', 'write'] });
      spec.keys!.hooks = { name: 'Webhook integration', operations: ['webhooks.*', 'customers.*', 'signing.ListSigningEvents'], resources: deals(), delegation: 'all' };
      spec.keys!.blind = { name: 'Webhooks without signing', operations: ['webhooks.*', 'customers.*'], resources: deals() };
      ws = await svc.apply(spec);
    });
    after(async () => {
      await svc?.close();
      await receiver?.close();
      await smtp?.close();
    });

    const key = (h: string) => `Bearer ${ws.keys[h]!.secret}`;
    async function call(op: string, body: unknown, h = 'sender', more: Record<string, string> = {}): Promise<{ status: number; body: any }> {
      const res = await svc.post(op, body, { Authorization: key(h), 'Idempotency-Key': crypto.randomUUID(), ...more });
      return { status: res.status, body: res.body };
    }

    /** Proposes a subscription with `h`'s key and approves it as the owner. */
    async function subscribe(event: string, h = 'hooks', types: string[] = []) {
      const proposed = await call('webhooks.PrepareWebhook', { url: receiver.url, event, ...(types.length ? { resource_types: types } : {}) }, h);
      assert.equal(proposed.status, 200, JSON.stringify(proposed.body));
      return approveProposal(svc.db, svc.clock, proposed.body.proposal_id, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, role: 'owner' });
    }

    /** Uploads a PDF through the documents operations, acting for `actAs` when given: the file id. */
    async function upload(actAs?: string): Promise<{ upload_id: string; file_id: string }> {
      const bytes = Buffer.from(await samplePdf('Events agreement', 1));
      const act: Record<string, string> = actAs ? { 'Service-Act-As': actAs } : {};
      const created = await call('documents.CreateUpload', { filename: 'events-agreement.pdf', content_type: 'application/pdf', size: bytes.length }, 'sender', act);
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const part = await call('documents.GetUploadPart', { upload_id: created.body.upload_id, part_number: 1 }, 'sender', act);
      const url = new URL(part.body.url);
      const put = await fetch(`${svc.origin}${url.pathname}${url.search}`, { method: 'PUT', body: bytes, headers: { 'Content-Type': 'application/octet-stream' } });
      assert.equal(put.status, 200, await put.text());
      const done = await call('documents.CompleteUpload', { upload_id: created.body.upload_id }, 'sender', act);
      assert.equal(done.status, 200, JSON.stringify(done.body));
      return { upload_id: created.body.upload_id, file_id: done.body.file_id };
    }

    async function form(path: string, fields: Record<string, string>): Promise<number> {
      const res = await fetch(`${svc.origin}${path}`, { method: 'POST', redirect: 'manual', headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: svc.origin }, body: new URLSearchParams(fields).toString() });
      await res.arrayBuffer();
      return res.status;
    }

    /** The signer opens and signs through the link of their latest mail, as a person does. */
    async function signAs(email: string, name: string): Promise<void> {
      await runJobs(svc);
      const mail = smtp.to(email).at(-1);
      assert.ok(mail, `no invitation to ${email}`);
      const path = `/sign/${tokenIn(mail.mail)}`;
      svc.clock.advance(60_000);
      assert.equal(await form(`${path}/open`, {}), 303);
      assert.equal(await form(`${path}/sign`, { typed_name: name, agree: 'yes' }), 303);
    }

    const outbox = (subject: string) =>
      svc.db.sql.all<{ id: string; type: string; private: unknown; data: string | null; actor_member_id: string | null }>(`SELECT id, type, private, data, actor_member_id FROM record_events WHERE record_id = ? ORDER BY seq`, [subject]);

    it('a completed signing request: outbox events of the declared kinds, a rule moves the deal to won, a webhook delivery signed v1= with no address, link or content', async () => {
      // The deal the contract is about, and the rule that names it (authored by the operator, as every rule is).
      const pipeline = (await call('customers.CreateSalesPipeline', { data: { name: 'Contracts', stages: stages.basic } }, 'hooks')).body.item;
      const deal = (await call('customers.CreateDeal', createDeal(pipeline.id, 'proposal', { name: 'Northwind renewal' }), 'hooks')).body.item;
      const rules = await svc.db.tx((sql) =>
        automationsSection.apply(sql, { workspaceId: ws.workspace_id, member: (h) => h, app: (h) => h, now: svc.clock.now() }, {
          won: {
            name: 'A signed Northwind contract wins its deal',
            trigger: { event: 'signing.request.completed', conditions: [{ field: 'title', op: 'contains', value: 'Northwind' }] },
            actions: [
              { type: 'set_fields', resource_type: 'core:Deal', record_id: deal.id, data: { stage_id: 'won' } },
              { type: 'notify', to: 'actor', title: 'Signed: {{event.data.title}}', body: 'Request {{event.data.signing_request_id}}: {{event.data.signed}} of {{event.data.signers}} signed.' },
            ],
          },
        }),
      );
      // An existing subscription to record changes, and one to the completion (approved before it happens).
      const dealHook = await subscribe('resource.created', 'hooks', ['core:Deal']);
      const hook = await subscribe('signing.request.completed');
      await deliver(svc);
      receiver.requests.length = 0;

      const { upload_id, file_id } = await upload();
      const sent = await call('signing.RequestFileSignatures', { file_id, title: 'Northwind renewal contract', signers: SIGNERS }, 'sender', { 'Service-Act-As': ws.members.olga! });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const id: string = sent.body.signing_request_id;
      for (const s of SIGNERS) await signAs(s.email, s.name);

      // The outbox holds the declared kinds, in order, with the change.
      const uploadEvents = await outbox(upload_id);
      assert.deepEqual(uploadEvents.map((e) => e.type), ['documents.upload.completed']);
      const uploadData = JSON.parse(uploadEvents[0]!.data!);
      assert.equal(uploadData.file_id, file_id);
      const events = await outbox(id);
      assert.deepEqual(events.map((e) => e.type), [
        'signing.request.created',
        'signing.request.sent',
        'signing.request.sent',
        'signing.request.opened',
        'signing.request.signed',
        'signing.request.opened',
        'signing.request.signed',
        'signing.request.completed',
      ]);
      const completed = events.at(-1)!;
      assert.equal(completed.actor_member_id, ws.members.olga, 'the actor of a signing event is its sender');
      const data = JSON.parse(completed.data!);
      const history = await call('signing.ListSigningEvents', { signing_request_id: id, limit: 100 }, 'sender', { 'Service-Act-As': ws.members.olga! });
      assert.equal(history.status, 200, JSON.stringify(history.body));
      const completedEntry = history.body.items.find((i: { kind: string }) => i.kind === 'request.completed');
      assert.deepEqual(data, { signing_request_id: id, history_event_id: completedEntry.event_id, status: 'completed', title: 'Northwind renewal contract', signature_method: 'standard', signers: 2, signed: 2, recipient_id: null, file_id: null });

      // The rule ran: the deal is won, the sender notified.
      await settleAutomation(svc);
      const won = await call('customers.GetDeal', { id: deal.id }, 'hooks');
      assert.equal(won.body.item.data.stage_id, 'won');
      const rule = await svc.db.sql.one<{ status: string; event_id: string }>(`SELECT status, event_id FROM automation_runs WHERE rule_id = ?`, [rules.won]);
      assert.deepEqual(rule, { status: 'succeeded', event_id: completed.id });
      const notice = await svc.db.sql.one<{ title: string; body: string }>(`SELECT title, body FROM inbox_notifications WHERE member_id = ? AND kind = 'automation.notice'`, [ws.members.olga]);
      assert.deepEqual(notice, { title: 'Signed: Northwind renewal contract', body: `Request ${id}: 2 of 2 signed.` });

      // The webhook: one delivery of the completion, signed v1=, its body ids and counts only.
      await deliver(svc);
      const got = receiver.requests.filter((r) => r.headers['x-webhook-event-id'] === completed.id);
      assert.equal(got.length, 1, 'one delivery of the completion');
      const r = got[0]!;
      const timestamp = String(r.headers['x-webhook-timestamp']);
      assert.equal(r.headers['x-webhook-signature'], `v1=${opensslHmac(hook.secret, Buffer.concat([Buffer.from(`${timestamp}.`), r.body]))}`);
      const body = JSON.parse(r.body.toString());
      assert.deepEqual(body, { event: 'signing.request.completed', event_id: completed.id, webhook_id: hook.webhook_id, occurred_at: body.occurred_at, data });
      const text = r.body.toString();
      for (const forbidden of [...SIGNERS.flatMap((s) => [s.email, s.name]), '/sign/', 'http', '203.0.113', '127.0.0.1', 'Mozilla', 'typed_name']) assert.ok(!text.includes(forbidden), `the payload holds ${forbidden}`);
      // The payload follows the document's schema of its data.
      const doc = (await (await fetch(`${svc.baseUrl}/openapi.json`)).json()) as { components: object };
      const ajv = createAjv();
      ajv.addSchema({ $id: 'doc', components: JSON.parse(JSON.stringify(doc.components).replaceAll('#/components/', 'doc#/components/')) as object });
      assert.ok(ajv.validate({ $ref: 'doc#/components/schemas/SigningEventData' }, body.data), JSON.stringify(ajv.errors));
      assert.ok(ajv.validate({ $ref: 'doc#/components/schemas/UploadEventData' }, uploadData), JSON.stringify(ajv.errors));
      // Nothing else reached the receiver (the deal subscription takes created deals; the rule updated one).
      assert.deepEqual(receiver.requests.map((q) => q.headers['x-webhook-event-id']), [completed.id]);
      const listed = await call('webhooks.ListWebhookEvents', { webhook_id: hook.webhook_id }, 'hooks');
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      assert.deepEqual(listed.body.items.map((d: { event: string; data: unknown; resource_type: unknown; record_id: string }) => [d.event, d.resource_type, d.record_id, d.data]), [['signing.request.completed', null, id, data]]);
      const other = await call('webhooks.ListWebhookEvents', { webhook_id: dealHook.webhook_id }, 'hooks');
      assert.deepEqual(other.body.items.map((d: { event: string }) => d.event), ['resource.created'], 'an existing subscription is never subscribed to the new kinds (its one delivery: the deal made before)');
    });

    it('proposing needs the operation the kind tells about, and no resource types; a private request emits private events, triggering nothing', async () => {
      const blind = await call('webhooks.PrepareWebhook', { url: receiver.url, event: 'signing.request.completed' }, 'blind');
      assert.equal(blind.status, 403, JSON.stringify(blind.body));
      assert.match(blind.body.message, /signing\.ListSigningEvents/);
      const typed = await call('webhooks.PrepareWebhook', { url: receiver.url, event: 'signing.request.signed', resource_types: ['core:Deal'] }, 'hooks');
      assert.equal(typed.status, 400, JSON.stringify(typed.body));
      assert.match(typed.body.message, /takes none/);

      // Ada's private file: her request's events are private (no rule, no webhook) and her upload's too.
      const { upload_id, file_id } = await upload(ws.members.ada);
      const sent = await call('signing.RequestFileSignatures', { file_id, title: 'Private Northwind note', signers: [SIGNERS[0]] }, 'sender', { 'Service-Act-As': ws.members.ada! });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const events = [...(await outbox(upload_id)), ...(await outbox(sent.body.signing_request_id))];
      assert.ok(events.length >= 2);
      assert.ok(events.every((e) => Boolean(e.private)), 'private events');
      const before = receiver.requests.length;
      await deliver(svc);
      assert.equal(receiver.requests.length, before);
    });
  });
}
