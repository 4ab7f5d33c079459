import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { catalogue, namespaces, resourceTypes } from '../../generated/catalogue.ts';
import type { ApplyResult } from '../../server/admin.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';

const run = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** `npm run demo` (without traffic) on a fresh database: its key may call every operation of the document. */
for (const database of databases) {
  describe(`npm run demo [${database.name}]`, function () {
    this.timeout(60_000);
    let demo: ApplyResult;
    let svc: TestService;
    before(async () => {
      const url = database.url();
      const { stdout } = await run(process.execPath, ['--import', 'tsx', 'scripts/demo.ts'], { cwd: root, env: { ...process.env, DATABASE_URL: url, DEMO_EVENTS: '0', LOG_LEVEL: 'warn' } });
      demo = JSON.parse(stdout.slice(0, stdout.indexOf('\nDemo workspace'))) as ApplyResult;
      svc = await startTestService(url);
      svc.clock.set(Date.now()); // after the demo's calls, whose rate-limit buckets are on the real clock
    });
    after(async () => {
      await svc?.close();
    });

    it("grants its key every namespace and read and write on every resource type, from the catalogue (automation.* and webhooks.* included)", async () => {
      const key = (await svc.db.sql.one<{ operations: string; resources: string }>('SELECT operations, resources FROM api_keys WHERE id = ?', [demo.keys.ci!.id]))!;
      const operations = new Set(JSON.parse(key.operations) as string[]);
      const missing = catalogue.filter((e) => e.listed && !operations.has(e.id)).map((e) => e.id);
      assert.deepEqual(missing, []);
      assert.deepEqual(new Set(catalogue.filter((e) => e.listed).map((e) => e.id.split('.')[0])), new Set(namespaces));
      assert.deepEqual(JSON.parse(key.resources), Object.fromEntries(resourceTypes.map((t) => [t, ['read', 'write']])));
    });

    it('lists every operation for its key, and its calls of every namespace are allowed', async () => {
      const listed = await fetch(`${svc.baseUrl}/operations`, { headers: { Authorization: `Bearer ${demo.keys.ci!.secret}`, Accept: 'application/json' } });
      assert.equal(listed.status, 200);
      const ids = ((await listed.json()) as { items: Array<{ id: string }> }).items.map((i) => i.id).sort();
      assert.deepEqual(ids, catalogue.filter((e) => e.listed).map((e) => e.id).sort());
      const api = svc.client(demo.keys.ci!.secret);
      assert.equal((await api.customers.ListDeals({})).data?.items.length, 4);
      assert.equal((await api.automation.ListRules({})).response.status, 200);
      assert.equal((await api.webhooks.ListWebhookSubscriptions({})).response.status, 200);
      assert.equal((await api.analytics.GetWorkspaceAnalyticsSummary({})).response.status, 200);
    });

    it('uploads a two-page sample contract and sends it for signature: a pending request whose invitation is in the development mailbox', async () => {
      const api = svc.client(demo.keys.ci!.secret);
      const files = (await api.documents.ListDocuments({ scope: 'workspace' })).data!.items;
      assert.equal(files.length, 1);
      assert.equal(files[0]!.page_count, 2);
      const row = (await svc.db.sql.one<{ id: string }>('SELECT id FROM signing_requests WHERE workspace_id = ?', [demo.workspace_id]))!;
      const request = (await api.signing.GetSigningRequest({ signing_request_id: row.id })).data!;
      assert.equal(request.status, 'pending');
      assert.equal(request.source_file_id, files[0]!.file_id);
      assert.deepEqual(request.recipients.map((r) => [r.email, r.invitation]), [['grace.hopper@globex.example', 'sent']]);
      const mail = await svc.db.sql.one<{ subject: string; body_text: string }>(`SELECT subject, body_text FROM mailbox_messages WHERE workspace_id = ? AND tag = 'signing.invitation'`, [demo.workspace_id]);
      assert.equal(mail?.subject, 'Acme asks you to sign "Fleet maintenance agreement 2027"');
      assert.match(mail!.body_text, /\/sign\/[A-Za-z0-9_-]{43}\n/);
    });
  });
}
