/**
 * The webhook approval and settings pages in headless Chromium (Debian's /usr/bin/chromium driven
 * by playwright-core), against a real HTTPS receiver on 127.0.0.1 (a throwaway CA, allowed by the
 * egress policy's explicit test settings). A key proposes through the generated client; people sign
 * in with one-time links and click. Skipped, loudly, when Chromium is missing, unless
 * REQUIRE_BROWSER=1. Screenshots go to test-output/.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { ApplyResult } from '../../server/admin.ts';
import { announceBrowser, launchBrowser, phoneMisfits, signedInPage } from '../support/browser.ts';
import { createDeal, stages } from '../support/fixtures.ts';
import { startReceiver } from '../support/receiver.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';
import { deliver, hookWorkspace, opensslHmac, receiverPolicy } from './support.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const shots = path.join(root, 'test-output');

// The receiver's port goes into the service's egress policy, so it starts before the suites are defined.
const receiver = await startReceiver();
after(() => receiver.close());

announceBrowser('the webhook approval and settings browser tests');

type SubscriptionRow = { id: string; enabled: number | boolean; secret: string; previous_secret: string | null; previous_secret_until: number | string | null; consecutive_failures: number; disabled_reason: string | null };

forEachDatabase(
  'webhook approval and settings pages in headless Chromium',
  (svc) => {
    let browser: Browser | undefined;
    let ws: ApplyResult;
    let api: ReturnType<TestService['client']>;
    const contexts: BrowserContext[] = [];
    /** The subscription approved in the first test, used by the next ones. */
    let approved: { id: string; secret: string; proposalPath: string } | undefined;

    before(async function () {
      this.timeout(60_000);
      browser = await launchBrowser(this);
      ({ ws, api } = await hookWorkspace(svc()));
      fs.mkdirSync(shots, { recursive: true });
    });
    after(async () => {
      for (const c of contexts) await c.close();
      await browser?.close();
    });
    beforeEach(() => {
      receiver.answer(() => ({ status: 200, body: 'ok' }));
    });

    const origin = () => svc().origin;
    const shot = (page: Page, name: string) => page.screenshot({ path: path.join(shots, `${name}-${svc().db.dialect}.png`), fullPage: true });
    const subscriptionRow = (id: string) => svc().db.sql.one<SubscriptionRow>(`SELECT * FROM webhook_subscriptions WHERE id = ?`, [id]);
    const auditRows = (subjectId: string, action: string) =>
      svc().db.sql.all<{ actor_type: string; actor_id: string | null; actor_label: string; details: string; subject_label: string | null }>(
        `SELECT actor_type, actor_id, actor_label, details, subject_label FROM audit_log WHERE subject_id = ? AND action = ? ORDER BY at, id`,
        [subjectId, action],
      );
    const proposalStatus = async (id: string) => (await svc().db.sql.one<{ status: string }>(`SELECT status FROM webhook_proposals WHERE id = ?`, [id]))?.status;
    const need = () => {
      if (!approved) throw new Error('the approval test did not run');
      return approved;
    };

    /** A browser context signed in as the member through a one-time link; the page ends on `next`. */
    async function signIn(member: 'olga' | 'ada' | 'bob', next: string, workspace: ApplyResult = ws) {
      const signed = await signedInPage(browser!, svc(), { workspaceId: workspace.workspace_id, memberId: workspace.members[member]! }, next);
      contexts.push(signed.context);
      return signed;
    }

    async function propose(url: string = receiver.url, types: string[] = ['core:Deal'], actAs?: string) {
      const client = actAs ? svc().client(ws.keys.hooks!.secret, actAs) : api;
      const res = await client.webhooks.PrepareWebhook({ url, event: 'resource.created', resource_types: types });
      assert.equal(res.response.status, 200, JSON.stringify(res.error));
      return { ...res.data!, path: new URL(res.data!.approval_url).pathname };
    }

    it('shows the owner what a proposal carries and who asked; approving shows the secret once, never logged, never again', async function () {
      this.timeout(60_000);
      const proposal = await propose(receiver.url, ['core:Deal', 'core:Company'], ws.members.ada!);
      assert.equal(proposal.path, `/settings/webhooks/proposals/${proposal.proposal_id}`);
      const { page, problems } = await signIn('olga', proposal.path);
      assert.equal(new URL(page.url()).pathname, proposal.path);
      assert.equal(await page.textContent('h1'), 'Approve a webhook?');
      assert.equal(await page.locator('.badges [data-state]').getAttribute('data-state'), 'pending');
      assert.equal(await page.locator('[data-destination]').textContent(), receiver.url, 'the full destination for an owner');
      assert.match((await page.locator('.fields').textContent())!, /resource\.created when a record of these types is created/);
      assert.equal(await page.locator('[data-proposer]').textContent(), `API key “Webhook integration” ${ws.keys.hooks!.id}, acting for Ada Member`);
      assert.match((await page.locator('[data-expires]').textContent())!, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
      assert.match((await page.locator('.fields').textContent())!, /\(in 72 h\)/);
      // Each type with its fields, read from the API document.
      assert.deepEqual(await page.locator('.type-fields').evaluateAll((els) => els.map((e) => e.getAttribute('data-type'))), ['core:Deal', 'core:Company']);
      const deal = page.locator('.type-fields[data-type="core:Deal"]');
      const dealFields = await deal.locator('tr[data-field]').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-field')));
      assert.deepEqual(dealFields, ['name', 'amount', 'pipeline_id', 'stage_id', 'company_id', 'close_date', 'weighted_amount', 'closed_at']);
      assert.equal(await deal.locator('tr[data-field="name"] td').nth(1).textContent(), 'Name of the deal, 1 to 200 characters.');
      assert.match((await deal.locator('tr[data-field="closed_at"] td').nth(1).textContent())!, /^When the deal entered its won or lost stage/);
      assert.match((await deal.locator('tr[data-field="name"] td').first().textContent())!, /required/);
      assert.match((await deal.locator('tr[data-field="weighted_amount"] td').first().textContent())!, /read-only/);
      assert.equal(await deal.locator('tr[data-field="weighted_amount"] td').nth(1).locator('code').first().textContent(), 'amount', 'Markdown code in descriptions is code');
      assert.ok((await page.locator('.type-fields[data-type="core:Company"] tr[data-field]').count()) >= 5);
      assert.match((await page.locator('.carries').textContent())!, /never field values/);
      assert.equal(await page.locator('form button', { hasText: 'Approve' }).count(), 1);
      assert.equal(await page.locator('form button', { hasText: 'Reject' }).count(), 1);
      await shot(page, 'webhooks-proposal');

      // Post/redirect/get: the form answers 303 to the page that shows the secret once.
      const [response] = await Promise.all([page.waitForEvent('response', (r) => r.url().endsWith('/approve')), page.locator('button', { hasText: 'Approve' }).click()]);
      await page.waitForURL(/\/settings\/webhooks\/wh_[0-9a-z]+\/secret$/);
      assert.equal(response.status(), 303);
      assert.equal(response.headers()['cache-control'], 'no-store');
      const secretPath = new URL(page.url()).pathname;
      assert.equal(await page.textContent('h1'), 'Webhook approved');
      const secret = (await page.locator('[data-secret]').textContent())!;
      assert.match(secret, /^whsec_[A-Za-z0-9_-]{43}$/);
      // The copy button puts it on the clipboard (the page kit's script, /assets/page.js).
      await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: origin() });
      await page.locator('button[data-copy="webhook-secret"]').click();
      await page.locator('button[data-copy="webhook-secret"]:text-is("Copied")').waitFor({ timeout: 5000 });
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);
      const row = await svc().db.sql.one<SubscriptionRow & { proposal_id: string; approved_by: string }>(`SELECT * FROM webhook_subscriptions WHERE proposal_id = ?`, [proposal.proposal_id]);
      assert.ok(row, 'the subscription exists');
      assert.equal(row.secret, secret, 'the page shows the stored secret');
      assert.equal(Boolean(row.enabled), true);
      assert.equal(row.approved_by, ws.members.olga);
      assert.equal(await proposalStatus(proposal.proposal_id), 'approved');
      const text = (await page.locator('main').textContent())!;
      assert.match(text, /shown only this once/);
      assert.match(text, /secure channel/);
      assert.match(text, /v1=<hex>/);
      assert.match(text, /<X-Webhook-Timestamp>\.<raw body>/);
      assert.match(text, /more than 5 minutes/);
      assert.match(text, /verifyWebhook\(process\.env\.WEBHOOK_SECRET, headers, rawBody, \{ toleranceSeconds: 300 \}\)/);
      await shot(page, 'webhooks-approved-secret');
      assert.equal(svc().logs().includes(secret), false, 'the secret is never logged');
      approved = { id: row.id, secret, proposalPath: proposal.path };
      // The audit log names the member who approved, never the secret or the destination's path.
      const audit = await auditRows(row.id, 'webhook.approved');
      assert.deepEqual(audit.map((a) => [a.actor_type, a.actor_id, a.actor_label]), [['member', ws.members.olga, 'Olga Owner']]);
      assert.equal(JSON.stringify(audit).includes(secret), false);
      assert.equal(JSON.stringify(audit).includes('/hook'), false);

      assert.equal(secretPath, `/settings/webhooks/${row.id}/secret`, 'the secret is never in the address');

      // Reloading (a GET: nothing is sent again), going Back and Forward, and revisiting never show it again.
      const reloaded = await page.reload();
      assert.equal(reloaded!.status(), 410, 'shown once already');
      assert.equal(await page.textContent('h1'), 'Shown once already');
      assert.equal(await page.locator('.topbar nav a[aria-current="page"]').textContent(), 'Webhooks', 'an error page inside the frame');
      assert.deepEqual(problems.splice(0), ['console: Failed to load resource: the server responded with a status of 410 (Gone)']);
      assert.equal((await page.content()).includes(secret), false, 'not after a reload');
      assert.equal(await page.locator('[data-secret]').count(), 0);
      await shot(page, 'webhooks-secret-gone');
      await page.goBack();
      assert.equal(new URL(page.url()).pathname, proposal.path, 'Back leads to the proposal page, not to the form post');
      assert.equal((await page.content()).includes(secret), false);
      await page.goForward();
      assert.equal((await page.content()).includes(secret), false);
      problems.splice(0);
      assert.equal(await svc().db.sql.one(`SELECT path FROM page_holds WHERE path = ?`, [secretPath]), undefined, 'nothing is held any more');
      await page.goto(`${origin()}${proposal.path}`);
      assert.equal(await page.textContent('h1'), 'Webhook proposal');
      assert.equal(await page.locator('.badges [data-state]').getAttribute('data-state'), 'approved');
      assert.equal(await page.locator('form button', { hasText: 'Approve' }).count(), 0, 'a decided proposal has no buttons');
      assert.match((await page.locator('.fields').textContent())!, /by Olga Owner · Open the webhook/);
      assert.equal((await page.content()).includes(secret), false);
      await Promise.all([page.waitForURL(/\/settings\/webhooks\/wh_/), page.locator('a', { hasText: 'Open the webhook' }).click()]);
      assert.equal((await page.content()).includes(secret), false);
      await page.goto(`${origin()}/settings/webhooks`);
      assert.equal((await page.content()).includes(secret), false);
      const again = await page.context().request.post(`${origin()}${proposal.path}/approve`, { form: { _csrf: await page.locator('input[name="_csrf"]').first().inputValue() }, maxRedirects: 0 });
      assert.equal(again.status(), 409);
      assert.match(await again.text(), /already approved/);
      assert.equal((await again.text()).includes(secret), false);
      assert.equal(svc().logs().includes(secret), false);
      assert.deepEqual(problems, []);
    });

    it('shows a plain member a proposal read-only (origin only); their posts are refused with and without a token', async function () {
      this.timeout(60_000);
      const proposal = await propose(`${receiver.url}?token=abc`);
      const { page, context, cookie, problems } = await signIn('ada', proposal.path);
      assert.equal(await page.textContent('h1'), 'Webhook proposal');
      assert.equal(await page.locator('.badges [data-state]').getAttribute('data-state'), 'pending');
      assert.match((await page.locator('.info').textContent())!, /Only owners and admins approve or reject webhooks/);
      assert.equal(await page.locator('[data-destination]').textContent(), `https://127.0.0.1:${receiver.port}/…`, 'a member sees the origin only');
      assert.equal((await page.content()).includes('token=abc'), false);
      assert.equal(await page.locator('main form').count(), 0, 'no Approve or Reject for a member');
      await shot(page, 'webhooks-proposal-member');
      const token = await page.locator('input[name="_csrf"]').first().inputValue();
      const refused = await context.request.post(`${origin()}${proposal.path}/approve`, { form: { _csrf: token }, maxRedirects: 0 });
      assert.equal(refused.status(), 403);
      assert.match(await refused.text(), /Only owners and admins may approve webhooks/);
      const rejected = await context.request.post(`${origin()}${proposal.path}/reject`, { form: { _csrf: token }, maxRedirects: 0 });
      assert.equal(rejected.status(), 403);
      // A forged post without the CSRF token (the session cookie alone) is refused before anything runs.
      const forged = await fetch(`${origin()}${proposal.path}/approve`, { method: 'POST', redirect: 'manual', headers: { Cookie: cookie, 'Content-Type': 'application/x-www-form-urlencoded' }, body: '' });
      assert.equal(forged.status, 403);
      assert.match(await forged.text(), /Refused/);
      assert.equal(await proposalStatus(proposal.proposal_id), 'pending');
      // The list shows the member the webhooks read-only, without the destination's path.
      await page.goto(`${origin()}/settings/webhooks`);
      assert.equal(await page.locator('li.hook form, li.hook .hook-actions').count(), 0);
      assert.equal(await page.locator(`li.proposal-row[data-proposal="${proposal.proposal_id}"] a`).textContent(), 'View →');
      assert.equal((await page.content()).includes('/hook'), false, 'no destination path for a member');
      const subscriptionPage = await fetch(`${origin()}/settings/webhooks/${need().id}`, { headers: { Cookie: cookie } });
      assert.equal(subscriptionPage.status, 200);
      assert.equal((await subscriptionPage.text()).includes(receiver.url), false);
      for (const action of ['disable', 'enable', 'rotate', 'delete']) {
        const res = await context.request.post(`${origin()}/settings/webhooks/${need().id}/${action}`, { form: { _csrf: token, confirm: 'delete' }, maxRedirects: 0 });
        assert.equal(res.status(), 403, action);
      }
      assert.equal((await fetch(`${origin()}/settings/webhooks/${need().id}/delete`, { headers: { Cookie: cookie } })).status, 403);
      assert.equal(Boolean((await subscriptionRow(need().id))!.enabled), true);
      assert.deepEqual(problems, []);
    });

    it('sends a signed test event from the webhook page and shows the receiver\'s answer; at most 10 an hour', async function () {
      this.timeout(60_000);
      const { id, secret } = need();
      receiver.requests.length = 0;
      receiver.answer(() => ({ status: 202, body: '{"received":true,"note":"from the test receiver"}' }));
      const { page, problems } = await signIn('olga', `/settings/webhooks/${id}`);
      await Promise.all([page.waitForURL(`${origin()}/settings/webhooks/${id}`), page.locator('button[data-send-test]').click()]);
      assert.match((await page.locator('.flash').textContent())!, new RegExp(`^Test event sent to ${receiver.url.replace(/[.]/g, '\\.')}: HTTP 202 after \\d+ ms\\.$`));
      assert.equal(await page.locator('[data-test-response]').textContent(), '{"received":true,"note":"from the test receiver"}');
      // What arrived: a webhook.test event, signed with the subscription's secret (v1 over "<timestamp>.<body>").
      assert.equal(receiver.requests.length, 1);
      const got = receiver.requests[0]!;
      assert.equal(JSON.parse(got.body.toString()).event, 'webhook.test');
      const timestamp = String(got.headers['x-webhook-timestamp']);
      assert.ok(String(got.headers['x-webhook-signature']).split(' ').includes(`v1=${opensslHmac(secret, Buffer.from(`${timestamp}.${got.body.toString()}`))}`));
      await shot(page, 'webhooks-test-event');
      // A receiver that refuses: the answer says so, with its body.
      receiver.answer(() => ({ status: 401, body: 'bad signature' }));
      await Promise.all([page.waitForURL(`${origin()}/settings/webhooks/${id}`), page.locator('button[data-send-test]').click()]);
      assert.match((await page.locator('.problem').textContent())!, /The test event to .* failed: HTTP 401 \(HTTP 401 after \d+ ms\)\./);
      assert.equal(await page.locator('[data-test-response]').textContent(), 'bad signature');
      // The budget: 10 an hour per webhook, counted in the database; the 11th is refused without a request.
      for (let i = 2; i < 10; i++) await Promise.all([page.waitForURL(`${origin()}/settings/webhooks/${id}`), page.locator('button[data-send-test]').click()]);
      assert.equal(receiver.requests.length, 10);
      await Promise.all([page.waitForURL(`${origin()}/settings/webhooks/${id}`), page.locator('button[data-send-test]').click()]);
      assert.match((await page.locator('.problem').textContent())!, /At most 10 test events an hour per webhook: try again in \d+ min\./);
      assert.equal(receiver.requests.length, 10);
      receiver.answer(() => ({ status: 200, body: 'ok' }));
      assert.deepEqual(problems, []);
    });

    it("lists a webhook's deliveries newest first with each one's attempts, paged", async function () {
      this.timeout(60_000);
      const { id } = need();
      const pipeline = (await api.customers.CreateSalesPipeline({ data: { name: 'New business', stages: stages.basic } })).data!.item;
      receiver.requests.length = 0;
      // The first delivery fails once (HTTP 500), is retried 30 s later (plus jitter) and succeeds.
      let calls = 0;
      receiver.answer(() => (++calls === 1 ? { status: 500, body: 'receiver down for maintenance' } : { status: 200, body: 'ok' }));
      const first = (await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: 'First' }))).data!.item;
      await deliver(svc());
      svc().clock.advance(35_000);
      await deliver(svc());
      for (let i = 0; i < 21; i++) {
        svc().clock.advance(1000);
        await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: `Deal ${i}` }));
      }
      await deliver(svc());
      assert.equal(receiver.requests.length, 23);

      const { page, cookie, problems } = await signIn('olga', `/settings/webhooks/${id}`);
      assert.equal(await page.textContent('h1'), `Webhook ${id}`);
      const rows = page.locator('table.deliveries tbody tr');
      assert.equal(await rows.count(), 20);
      assert.equal(await rows.first().locator('.status').textContent(), 'succeeded');
      assert.equal(await page.locator('a[rel="next"]').textContent(), 'Older deliveries →');
      await Promise.all([page.waitForURL(/before=/), page.click('a[rel="next"]')]);
      assert.equal(await rows.count(), 2);
      const oldest = page.locator('table.deliveries tbody tr').last();
      assert.match((await oldest.locator('td').nth(2).textContent())!, new RegExp(first.id));
      await oldest.locator('summary').click();
      const attempts = oldest.locator('ol.attempts li');
      assert.equal(await attempts.count(), 2);
      assert.match((await attempts.nth(0).textContent())!, /#1 .* · HTTP 500/);
      assert.equal(await attempts.nth(0).locator('pre.response').textContent(), 'receiver down for maintenance');
      assert.match((await attempts.nth(0).textContent())!, /next attempt \d{4}-/);
      assert.match((await attempts.nth(1).textContent())!, /#2 .* · HTTP 200/);
      await shot(page, 'webhooks-deliveries');
      // Resend, beside the automatic retries: the same event again, as a new delivery with the same event id.
      const eventId = (await oldest.locator('[data-resend]').getAttribute('data-resend'))!;
      const sentBefore = receiver.requests.length;
      svc().clock.advance(1000);
      await Promise.all([page.waitForURL(`${origin()}/settings/webhooks/${id}`), oldest.locator('[data-resend]').click()]);
      assert.match((await page.locator('.flash').textContent())!, new RegExp(`^Event ${eventId} is queued to be sent again`));
      await deliver(svc());
      assert.equal(receiver.requests.length, sentBefore + 1);
      assert.equal(receiver.requests.at(-1)!.headers['x-webhook-event-id'], eventId, 'the same event id: receivers drop a duplicate');
      await page.reload();
      assert.equal(await rows.first().locator('.status').textContent(), 'succeeded');
      assert.match((await rows.first().textContent())!, /replay/);
      await Promise.all([page.waitForURL(/before=/), page.click('a[rel="next"]')]);
      assert.equal(await page.locator('.pager a', { hasText: 'Newest deliveries' }).count(), 1);
      // Filters, and positions this page did not make.
      await page.goto(`${origin()}/settings/webhooks/${id}?status=failed`);
      assert.equal(await page.locator('table.deliveries').count(), 0);
      assert.match((await page.locator('main').textContent())!, /No failed deliveries/);
      for (const bad of ['x', '1.whd_a;', '99999999999999999.whd_a']) {
        const res = await fetch(`${origin()}/settings/webhooks/${id}?before=${encodeURIComponent(bad)}`, { headers: { Cookie: cookie } });
        assert.equal(res.status, 400, bad);
      }
      assert.deepEqual(problems, []);
    });

    it('lets an owner disable, re-enable after a signed test delivery (a failed one keeps it disabled), rotate and delete', async function () {
      this.timeout(60_000);
      const { id, secret } = need();
      const { page, context, problems } = await signIn('olga', '/settings/webhooks');
      const card = page.locator(`li.hook[data-webhook="${id}"]`);
      assert.equal(await card.locator('h2 .destination').textContent(), receiver.url);
      assert.equal(await card.locator('[data-state]').textContent(), 'Enabled');
      assert.match((await card.locator('.badges').textContent())!, /resource\.createdcore:Dealcore:Company/);
      assert.equal(await card.locator('[data-failures]').textContent(), '0');
      assert.match((await card.locator('.stats').textContent())!, /Last success\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
      assert.match((await card.locator('.stats').textContent())!, /Last failure\d{4}-/);
      // The member's proposal of the previous test waits for approval here.
      assert.equal(await page.locator('li.proposal-row a').first().textContent(), 'Review and approve →');
      await shot(page, 'webhooks-list');

      // Disable.
      await Promise.all([page.waitForURL(/done=disabled/), card.locator('button', { hasText: 'Disable' }).click()]);
      assert.match((await page.locator('.flash').textContent())!, new RegExp(`The webhook ${id} is disabled`));
      assert.equal(await card.locator('[data-state]').textContent(), 'Disabled');
      assert.match((await card.locator('[data-reason]').textContent())!, /^Disabled \d{4}-.* UTC: disabled by Olga Owner$/);
      let row = (await subscriptionRow(id))!;
      assert.equal(Boolean(row.enabled), false);
      assert.equal(row.disabled_reason, `disabled by member ${ws.members.olga!}`);

      // Enable while the receiver answers 500: the test delivery fails, the error is shown, it stays disabled.
      receiver.requests.length = 0;
      receiver.answer(() => ({ status: 500, body: 'nope' }));
      const [enableResponse] = await Promise.all([page.waitForEvent('response', (r) => r.url().endsWith('/enable')), card.locator('button', { hasText: 'Test and enable' }).click()]);
      assert.equal(enableResponse.status(), 303, 'post/redirect/get');
      await page.waitForURL(/\/settings\/webhooks$/);
      assert.match((await page.locator('.problem').textContent())!, /The test delivery to https:\/\/127\.0\.0\.1:\d+\/hook failed: HTTP 500 .*The webhook stays disabled/);
      assert.equal(await card.locator('[data-state]').textContent(), 'Disabled');
      assert.equal(Boolean((await subscriptionRow(id))!.enabled), false);
      assert.equal(receiver.requests.length, 1);
      await shot(page, 'webhooks-enable-failed');
      await page.reload();
      assert.equal(await page.locator('.problem').count(), 0, 'the outcome is shown once; a reload sends nothing again');
      assert.equal(receiver.requests.length, 1);

      // Enable while it answers 200: enabled, after a signed test delivery.
      receiver.requests.length = 0;
      receiver.answer(() => ({ status: 200, body: 'ok' }));
      await Promise.all([page.waitForURL(/done=enabled/), page.locator(`li.hook[data-webhook="${id}"] button`, { hasText: 'Test and enable' }).click()]);
      assert.match((await page.locator('.flash').textContent())!, /is enabled again: the test delivery succeeded/);
      assert.equal(await card.locator('[data-state]').textContent(), 'Enabled');
      row = (await subscriptionRow(id))!;
      assert.equal(Boolean(row.enabled), true);
      assert.equal(Number(row.consecutive_failures), 0);
      assert.equal(receiver.requests.length, 1);
      const test = receiver.requests[0]!;
      assert.equal(JSON.parse(test.body.toString()).event, 'webhook.test');
      const ts = String(test.headers['x-webhook-timestamp']);
      assert.equal(test.headers['x-webhook-signature'], `v1=${opensslHmac(secret, Buffer.concat([Buffer.from(`${ts}.`), test.body]))}`, 'signed with the secret shown at approval');

      // Rotate: a new secret, shown once, with the grace period.
      await Promise.all([page.waitForURL(new RegExp(`/settings/webhooks/${id}/secret$`)), card.locator('button', { hasText: 'Rotate secret' }).click()]);
      assert.equal(await page.textContent('h1'), 'New signing secret');
      const rotated = (await page.locator('[data-secret]').textContent())!;
      assert.match(rotated, /^whsec_[A-Za-z0-9_-]{43}$/);
      assert.notEqual(rotated, secret);
      row = (await subscriptionRow(id))!;
      assert.equal(row.secret, rotated);
      assert.equal(row.previous_secret, secret);
      assert.match((await page.locator('[data-grace]').textContent())!, /The old secret keeps signing beside this one for 24 h, until \d{4}-/);
      await shot(page, 'webhooks-rotated-secret');
      assert.equal(svc().logs().includes(rotated), false, 'the new secret is never logged');
      const rotations = await auditRows(id, 'webhook.secret_rotated');
      assert.deepEqual(rotations.map((a) => [a.actor_type, a.actor_id, a.actor_label]), [['member', ws.members.olga, 'Olga Owner']]);
      assert.equal(JSON.stringify(rotations).includes(rotated), false, 'never the secret in the audit log');
      await Promise.all([page.waitForURL(new RegExp(`/settings/webhooks/${id}$`)), page.locator('a', { hasText: 'open the webhook' }).click()]);
      assert.equal((await page.content()).includes(rotated), false, 'never shown again');
      const backToSecret = await page.goBack();
      assert.equal(backToSecret!.status(), 410);
      assert.equal((await page.content()).includes(rotated), false, 'not on Back either');
      assert.equal(problems.splice(0).length, 1, 'the 410 of Back');
      await page.goForward();
      assert.match((await page.locator('.fields').textContent())!, /Rotated: the previous secret also signs until/);

      // A phone: nothing wider than the screen, no table cut off (the deliveries stack a row a block).
      await page.setViewportSize({ width: 390, height: 800 });
      for (const [where, name] of [['/settings/webhooks', 'webhooks-list-phone'], [`/settings/webhooks/${id}`, 'webhooks-subscription-phone'], [need().proposalPath, 'webhooks-proposal-phone']] as const) {
        await page.goto(`${origin()}${where}`);
        assert.deepEqual(await phoneMisfits(page), [], where);
        await shot(page, name);
      }
      await page.setViewportSize({ width: 1100, height: 900 });
      await page.goto(`${origin()}/settings/webhooks/${id}`);

      // Delete: a confirmation page with a required checkbox.
      await Promise.all([page.waitForURL(/\/delete$/), page.locator('a', { hasText: 'Delete…' }).click()]);
      assert.equal(await page.textContent('h1'), 'Delete this webhook?');
      assert.equal(await page.locator('input[name="confirm"]').getAttribute('required'), '');
      await shot(page, 'webhooks-delete-confirm');
      const token = await page.locator('input[name="_csrf"]').first().inputValue();
      const unconfirmed = await context.request.post(`${origin()}/settings/webhooks/${id}/delete`, { form: { _csrf: token }, maxRedirects: 0 });
      assert.equal(unconfirmed.status(), 400);
      assert.match(await unconfirmed.text(), /Tick the box to confirm/);
      assert.ok(await subscriptionRow(id), 'not deleted without confirmation');
      await page.locator('input[name="confirm"]').check();
      await Promise.all([page.waitForURL(/done=deleted/), page.locator('button', { hasText: 'Delete webhook' }).click()]);
      assert.equal(await page.locator('.flash').textContent(), 'The subscription and its delivery history are deleted.');
      assert.equal(await page.locator(`li.hook[data-webhook="${id}"]`).count(), 0);
      assert.equal(await subscriptionRow(id), undefined);
      assert.equal(Number((await svc().db.sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE webhook_id = ?`, [id]))!.n), 0);
      assert.equal((await fetch(`${origin()}/settings/webhooks/${id}`, { headers: { Cookie: `wso_session=${(await context.cookies()).find((c) => c.name === 'wso_session')!.value}` } })).status, 404);
      assert.equal(svc().logs().includes(secret) || svc().logs().includes(rotated), false);
      assert.deepEqual(problems, []);
    });

    it('lets an admin reject a proposal: 303 back with a notice, no subscription', async function () {
      this.timeout(60_000);
      const proposal = await propose();
      const { page, problems } = await signIn('bob', '/settings/webhooks');
      await Promise.all([page.waitForURL(new RegExp(proposal.path)), page.locator(`li.proposal-row[data-proposal="${proposal.proposal_id}"] a`).click()]);
      const [response] = await Promise.all([page.waitForEvent('response', (r) => r.url().endsWith('/reject')), page.locator('button', { hasText: 'Reject' }).click()]);
      assert.equal(response.status(), 303);
      await page.waitForURL(/done=rejected/);
      assert.equal(new URL(page.url()).pathname, proposal.path);
      assert.equal(await page.locator('.flash').textContent(), 'The proposal is rejected: nothing will be delivered.');
      assert.equal(await page.locator('.badges [data-state]').getAttribute('data-state'), 'rejected');
      assert.match((await page.locator('.fields').textContent())!, /Rejected\d{4}-.* by Bob Admin/);
      assert.equal(await page.locator('main form').count(), 0);
      await shot(page, 'webhooks-proposal-rejected');
      assert.equal(await proposalStatus(proposal.proposal_id), 'rejected');
      assert.deepEqual((await auditRows(proposal.proposal_id, 'webhook.rejected')).map((r) => [r.actor_type, r.actor_id, r.actor_label]), [['member', ws.members.bob, 'Bob Admin']]);
      assert.equal(await svc().db.sql.one(`SELECT id FROM webhook_subscriptions WHERE proposal_id = ?`, [proposal.proposal_id]), undefined);
      await page.goto(`${origin()}/settings/webhooks`);
      assert.equal(await page.locator(`li.proposal-row[data-proposal="${proposal.proposal_id}"]`).count(), 0, 'no longer waiting');
      assert.deepEqual(problems, []);
    });

    it("answers 404 for unknown ids and another workspace's proposal, 401 without a session; expired proposals have no buttons", async function () {
      this.timeout(60_000);
      const other = await hookWorkspace(svc());
      const theirs = await other.api.webhooks.PrepareWebhook({ url: receiver.url, event: 'resource.created', resource_types: ['core:Deal'] });
      const theirPath = new URL(theirs.data!.approval_url).pathname;
      const { page, cookie, context, problems } = await signIn('olga', '/settings/webhooks');
      for (const where of [theirPath, '/settings/webhooks/proposals/whp_nothing', '/settings/webhooks/proposals/x%3Cscript%3E', '/settings/webhooks/wh_nothing', '/settings/webhooks/proposals']) {
        const res = await fetch(`${origin()}${where}`, { headers: { Cookie: cookie } });
        assert.equal(res.status, 404, where);
        assert.equal((await res.text()).includes('<script>'), false);
      }
      const token = await page.locator('input[name="_csrf"]').first().inputValue();
      const foreign = await context.request.post(`${origin()}${theirPath}/approve`, { form: { _csrf: token }, maxRedirects: 0 });
      assert.equal(foreign.status(), 404);
      assert.equal(await proposalStatus(theirs.data!.proposal_id), 'pending');
      assert.equal((await fetch(`${origin()}/settings/webhooks`)).status, 401);
      assert.equal((await fetch(`${origin()}${theirPath}`)).status, 401);

      // A legacy meeting.completed proposal carries no record type: the page says what it does carry.
      const meeting = await api.webhooks.PrepareWebhook({ url: receiver.url, event: 'meeting.completed' });
      assert.equal(meeting.response.status, 200, JSON.stringify(meeting.error));
      const meetingPage = await fetch(meeting.data!.approval_url.replace(/^https?:\/\/[^/]+/, origin()), { headers: { Cookie: cookie } });
      assert.equal(meetingPage.status, 200);
      const meetingHtml = await meetingPage.text();
      assert.match(meetingHtml, /the meeting id and when the meeting completed/);
      assert.equal(meetingHtml.includes('class="type-fields"'), false);

      // Three days later the proposal has expired (a fresh sign-in: sessions last 12 h).
      const proposal = await propose();
      svc().clock.advance(73 * 3_600_000);
      const later = await signIn('olga', proposal.path);
      assert.equal(await later.page.locator('.badges [data-state]').getAttribute('data-state'), 'expired');
      assert.equal(await later.page.locator('main form').count(), 0);
      assert.match((await later.page.locator('.fields').textContent())!, /Ask the integration to propose it again/);
      await shot(later.page, 'webhooks-proposal-expired');
      const late = await later.context.request.post(`${origin()}${proposal.path}/approve`, { form: { _csrf: await later.page.locator('input[name="_csrf"]').first().inputValue() }, maxRedirects: 0 });
      assert.equal(late.status(), 410);
      assert.match(await late.text(), /expired/);
      assert.deepEqual([...problems, ...later.problems], []);
    });
  },
  receiverPolicy(receiver),
);
