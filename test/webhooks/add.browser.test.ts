/**
 * A webhook added on the dashboard, in headless Chromium on both databases, against a real HTTPS
 * receiver on 127.0.0.1 (a throwaway CA allowed by the egress policy's test settings): an owner adds
 * it (a refused address and a missing type first), approves it on the same approval page as a key's
 * proposal, copies nothing but sees the secret once, sends a test event, and a deal changed on its
 * record page is delivered, signed. It delivers as the member who added it: disabled, it stops. A
 * plain member cannot add one.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import pino from 'pino';
import { startListener } from '../../handlers/webhooks/listen.ts';
import { disableMember } from '../../server/admin.ts';
import type { ApplyResult } from '../../server/admin.ts';
import { announceBrowser, launchBrowser, phoneMisfits, signedInPage } from '../support/browser.ts';
import { createDeal, stages } from '../support/fixtures.ts';
import { startReceiver } from '../support/receiver.ts';
import { forEachDatabase } from '../support/service.ts';
import { deliver, hookWorkspace, opensslHmac, receiverPolicy } from './support.ts';

const shots = path.join(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..'), 'test-output');

// The receiver's port goes into the service's egress policy, so it starts before the suites are defined.
const receiver = await startReceiver();
after(() => receiver.close());

announceBrowser('the add-a-webhook browser test');

forEachDatabase(
  'a webhook added on the dashboard, in headless Chromium',
  (svc) => {
    let browser: Browser | undefined;
    let ws: ApplyResult;
    const contexts: BrowserContext[] = [];
    before(async function () {
      this.timeout(60_000);
      browser = await launchBrowser(this);
      ({ ws } = await hookWorkspace(svc()));
      fs.mkdirSync(shots, { recursive: true });
    });
    after(async () => {
      for (const c of contexts) await c.close();
      await browser?.close();
    });
    const as = async (member: 'olga' | 'ada' | 'bob', next: string) => {
      const s = await signedInPage(browser!, svc(), { workspaceId: ws.workspace_id, memberId: ws.members[member]! }, next);
      contexts.push(s.context);
      await s.page.setViewportSize({ width: 1280, height: 900 });
      return s;
    };
    const shot = (page: Page, name: string) => page.screenshot({ path: path.join(shots, `webhooks-add-${name}-${svc().db.dialect}.png`), fullPage: true });

    it('an admin adds, approves and tests a webhook; a deal changed on its page is delivered, signed, until the admin is disabled', async function () {
      this.timeout(90_000);
      receiver.answer(() => ({ status: 200, body: 'ok' }));
      const { page, problems } = await as('bob', '/settings/webhooks');
      await Promise.all([page.waitForURL(/\/settings\/webhooks\/new$/), page.locator('[data-add-webhook]').click()]);
      // Refusals keep the form: an address the egress policy refuses, then no record type.
      await page.fill('input[name="url"]', 'https://10.0.0.1/hook');
      await page.locator('input[name="event"][value="resource.updated"]').check();
      await page.locator('input[name="type"][value="core:Deal"]').check();
      await Promise.all([page.waitForLoadState(), page.locator('[data-propose]').click()]);
      assert.match((await page.locator('[data-problem]').textContent())!, /^The address is refused: /);
      assert.equal(await page.locator('input[name="type"][value="core:Deal"]').isChecked(), true);
      await page.fill('input[name="url"]', receiver.url);
      await page.locator('input[name="type"][value="core:Deal"]').uncheck();
      await Promise.all([page.waitForLoadState(), page.locator('[data-propose]').click()]);
      assert.match((await page.locator('[data-problem]').textContent())!, /Choose at least one record type/);
      problems.length = 0;
      await page.locator('input[name="type"][value="core:Deal"]').check();
      await shot(page, 'form');
      await page.setViewportSize({ width: 390, height: 844 });
      assert.deepEqual(await phoneMisfits(page), []);
      await page.setViewportSize({ width: 1280, height: 900 });

      // The same approval page as a key's proposal, naming the member.
      await Promise.all([page.waitForURL(/\/settings\/webhooks\/proposals\/whp_/), page.locator('[data-propose]').click()]);
      assert.equal(await page.locator('[data-proposer]').textContent(), 'Bob Admin on the dashboard: it delivers what their role may read');
      const proposal = await svc().db.sql.one<{ proposed_by_key: string; proposed_by_member: string }>(`SELECT proposed_by_key, proposed_by_member FROM webhook_proposals WHERE workspace_id = ?`, [ws.workspace_id]);
      assert.deepEqual({ ...proposal }, { proposed_by_key: '', proposed_by_member: ws.members.bob });
      await shot(page, 'approve');
      await Promise.all([page.waitForURL(/\/secret$/), page.locator('button', { hasText: 'Approve' }).click()]);
      const secret = (await page.locator('[data-secret]').textContent())!;
      const webhookId = page.url().split('/').at(-2)!;
      const row = await svc().db.sql.one<{ access_key_id: string | null; access_member_id: string }>(`SELECT access_key_id, access_member_id FROM webhook_subscriptions WHERE id = ?`, [webhookId]);
      assert.deepEqual({ ...row }, { access_key_id: null, access_member_id: ws.members.bob });

      // A test event from its page.
      await page.goto(`${svc().origin}/settings/webhooks/${webhookId}`);
      receiver.requests.length = 0;
      await Promise.all([page.waitForURL(`${svc().origin}/settings/webhooks/${webhookId}`), page.locator('button[data-send-test]').click()]);
      assert.match((await page.locator('.flash').textContent())!, /^Test event sent to .*: HTTP 200 after \d+ ms\.$/);
      assert.equal(receiver.requests.length, 1);

      // A deal changed on its record page arrives, signed with the secret shown once.
      const api = svc().client(ws.keys.hooks!.secret);
      const pipeline = (await api.customers.CreateSalesPipeline({ data: { name: 'New business', stages: stages.basic } })).data!.item;
      const deal = (await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: 'Hooked deal' }))).data!.item;
      await deliver(svc());
      receiver.requests.length = 0;
      svc().clock.advance(1000);
      await page.goto(`${svc().origin}/records/deals/${deal.id}/edit`);
      await page.fill('input[name="f.stage_id"]', 'proposal');
      await Promise.all([page.waitForURL(new RegExp(`/records/deals/${deal.id}$`)), page.locator('[data-save]').click()]);
      await deliver(svc());
      const got = receiver.requests.find((r) => JSON.parse(r.body.toString()).record_id === deal.id);
      assert.ok(got, `the change was delivered: ${receiver.requests.map((r) => r.body.toString()).join('\n')}`);
      const body = JSON.parse(got.body.toString());
      assert.equal(body.event, 'resource.updated');
      assert.deepEqual(body.changed_fields.includes('stage_id'), true);
      const timestamp = String(got.headers['x-webhook-timestamp']);
      assert.ok(String(got.headers['x-webhook-signature']).split(' ').includes(`v1=${opensslHmac(secret, Buffer.from(`${timestamp}.${got.body.toString()}`))}`));

      // It delivers as Bob: once he is disabled, it stops with the reason, and nothing more is sent.
      await disableMember(svc().db, svc().clock, ws.members.bob!);
      receiver.requests.length = 0;
      svc().clock.advance(1000);
      await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'won' } });
      await deliver(svc());
      assert.equal(receiver.requests.length, 0);
      const stopped = await svc().db.sql.one<{ enabled: number | boolean; access_lost: string | null; disabled_reason: string | null }>(`SELECT enabled, access_lost, disabled_reason FROM webhook_subscriptions WHERE id = ?`, [webhookId]);
      assert.equal(Boolean(stopped!.enabled), false);
      assert.equal(stopped!.access_lost, 'member_disabled');
      assert.match(stopped!.disabled_reason!, /who added it on the dashboard, was disabled/);
      assert.deepEqual(problems, []);
    });

    it('the local listener (webhooks listen) receives a test event sent from its page, verified and forwarded nowhere', async function () {
      this.timeout(60_000);
      const lines: string[] = [];
      const listener = await startListener({ db: svc().db, clock: svc().clock, logger: pino({ level: 'silent' }), config: svc().config, env: {} }, { workspaceId: ws.workspace_id, event: 'resource.created', types: ['core:Deal'] }, (l) => lines.push(l));
      const { page, problems } = await as('olga', `/settings/webhooks/${listener.webhookId}`);
      assert.match((await page.locator('main').textContent())!, /listen:\/\//);
      await Promise.all([page.waitForURL(`${svc().origin}/settings/webhooks/${listener.webhookId}`), page.locator('button[data-send-test]').click()]);
      assert.match((await page.locator('.flash').textContent())!, /^Test event queued for the listener \(listen:\/\/.*\): webhooks listen prints it within a second/);
      await listener.poll();
      assert.match(lines.at(-1)!, new RegExp(`webhook\\.test  webhook ${listener.webhookId}  \\(event evt_\\w+, signature verified\\)$`));
      await page.reload();
      assert.match((await page.locator('[data-attempt="1"]').first().textContent())!, /HTTP 200/);
      await shot(page, 'listener');
      // A test delivery is not an event of the API: ListWebhookEvents leaves it out (and answers by the document).
      const events = await svc().client(ws.keys.hooks!.secret).webhooks.ListWebhookEvents({ webhook_id: listener.webhookId });
      assert.equal(events.response.status, 200, JSON.stringify(events.error));
      assert.deepEqual(events.data!.items, []);
      // Disabled, it is enabled again without a test request (it has no address): its listener verifies.
      await Promise.all([page.waitForURL(/done=disabled/), page.locator('form[action$="/disable"] button').click()]);
      await Promise.all([page.waitForURL(/done=enabled/), page.locator('form[action$="/enable"] button').click()]);
      await listener.stop();
      assert.deepEqual(problems, []);
    });

    it('a plain member cannot add a webhook', async function () {
      this.timeout(30_000);
      const { page, problems } = await as('ada', '/settings/webhooks');
      assert.equal(await page.locator('[data-add-webhook]').count(), 0);
      const refused = await page.goto(`${svc().origin}/settings/webhooks/new`);
      assert.equal(refused!.status(), 403);
      problems.length = 0;
      assert.deepEqual(problems, []);
    });
  },
  receiverPolicy(receiver),
);
