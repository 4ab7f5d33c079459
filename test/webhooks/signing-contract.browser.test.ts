/**
 * Moving a legacy `meeting.completed` subscription to the timestamped `v1` signature on its settings
 * page, in headless Chromium (REQUIRE_BROWSER=1 makes a missing Chromium a failure), against a real
 * HTTPS receiver: the page explains what the receiver must change first; the form is CSRF-protected,
 * needs the confirmation box, answers 303 (post/redirect/get) and is one-way; a plain member reads the
 * contract but gets no form; the next delivery carries `v1=` with a timestamp; the audit log names the
 * member. Screenshots go to test-output/.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { verifyWebhook, type WebhookHeaders } from '../../client/src/index.ts';
import { recordMeetingCompleted } from '../../handlers/webhooks/subscriptions.ts';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { startReceiver } from '../support/receiver.ts';
import { forEachDatabase } from '../support/service.ts';
import { deliver, hookWorkspace, opensslHmac, receiverPolicy, subscribe } from './support.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const shots = path.join(root, 'test-output');

const receiver = await startReceiver();
after(() => receiver.close());

announceBrowser('the webhook signing-contract browser test');

forEachDatabase(
  'webhook signing contract on the settings page in headless Chromium',
  (svc) => {
    let browser: Browser | undefined;
    const contexts: BrowserContext[] = [];
    before(async function () {
      this.timeout(60_000);
      browser = await launchBrowser(this);
      fs.mkdirSync(shots, { recursive: true });
    });
    after(async () => {
      for (const c of contexts) await c.close();
      await browser?.close();
    });
    const shot = (page: Page, name: string) => page.screenshot({ path: path.join(shots, `${name}-${svc().db.dialect}.png`), fullPage: true });

    it('an owner moves a legacy subscription to v1 after reading what the receiver must change; the next delivery is v1, the audit log names her', async function () {
      this.timeout(90_000);
      receiver.answer(() => ({ status: 200, body: 'ok' }));
      receiver.requests.length = 0;
      const { ws } = await hookWorkspace(svc());
      const hook = await subscribe(svc(), ws, receiver.url, 'meeting.completed', []);
      const origin = svc().origin;
      const href = `/settings/webhooks/${hook.id}`;

      // Before: bare hex, no timestamp.
      await recordMeetingCompleted(svc().db, svc().clock, ws.workspace_id, 'mtg_legacy');
      await deliver(svc());
      const before = receiver.requests.at(-1)!;
      assert.equal(before.headers['x-webhook-timestamp'], undefined);
      assert.equal(before.headers['x-webhook-signature'], opensslHmac(hook.secret, before.body));

      // A plain member reads the contract but has no form, and a post is refused.
      const member = await signedInPage(browser!, svc(), { workspaceId: ws.workspace_id, memberId: ws.members.ada! }, href);
      contexts.push(member.context);
      assert.equal(await member.page.locator('[data-signing-contract]').getAttribute('data-signing-contract'), 'legacy');
      assert.equal(await member.page.locator('form.signing-move').count(), 0);
      assert.match((await member.page.locator('[data-signing-move]').textContent())!, /Owners and admins move a webhook to the v1 signature/);
      const memberToken = await member.page.locator('input[name="_csrf"]').first().inputValue();
      const refused = await member.context.request.post(`${origin}${href}/signing-contract`, { form: { _csrf: memberToken, to: 'v1', confirm: 'receiver-ready' }, maxRedirects: 0 });
      assert.equal(refused.status(), 403);

      // The list marks it, linking to the move on its page.
      const { page, context, cookie, problems } = await signedInPage(browser!, svc(), { workspaceId: ws.workspace_id, memberId: ws.members.olga! }, '/settings/webhooks');
      contexts.push(context);
      const badge = page.locator(`li.hook[data-webhook="${hook.id}"] [data-legacy-signature]`);
      assert.equal(await badge.textContent(), 'legacy signature');
      await shot(page, 'webhooks-signing-list');
      await Promise.all([page.waitForURL(`${origin}${href}#signing`), badge.click()]);
      const card = page.locator('[data-signing-move]');
      const text = (await card.textContent())!;
      assert.match(text, /The receiver must change first/);
      assert.match(text, /Read X-Webhook-Timestamp/);
      assert.match(text, /v1=<hex>/);
      assert.match(text, /<timestamp>\.<raw body>/);
      assert.match(text, /more than 5 minutes \(300 s\)/);
      assert.match(text, /accept both formats/);
      assert.match(text, /The move is one-way/);
      await card.scrollIntoViewIfNeeded();
      await shot(page, 'webhooks-signing-legacy');

      // A forged post without the CSRF token changes nothing.
      const forged = await fetch(`${origin}${href}/signing-contract`, { method: 'POST', redirect: 'manual', headers: { Cookie: cookie, 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'to=v1&confirm=receiver-ready' });
      assert.equal(forged.status, 403);

      // Without the box ticked: back to the page (303) with the reason, nothing moved.
      const [unticked] = await Promise.all([page.waitForEvent('response', (r) => r.url().endsWith('/signing-contract')), page.locator('form.signing-move button').click()]);
      assert.equal(unticked.status(), 303);
      await page.waitForURL(`${origin}${href}`);
      assert.match((await page.locator('.problem[role="alert"]').textContent())!, /Not moved: tick that the receiver already accepts the v1 signature/);
      assert.equal(await page.locator('[data-signing-contract]').getAttribute('data-signing-contract'), 'legacy');

      await page.locator('form.signing-move input[name="confirm"]').check();
      const [moved] = await Promise.all([page.waitForEvent('response', (r) => r.url().endsWith('/signing-contract')), page.locator('form.signing-move button').click()]);
      assert.equal(moved.status(), 303);
      await page.waitForURL(/\?done=signing_v1/);
      assert.match((await page.locator('.flash').textContent())!, /now signs with the timestamped v1 signature/);
      assert.equal(await page.locator('[data-signing-contract]').getAttribute('data-signing-contract'), 'v1');
      assert.match((await page.locator('[data-signing-contract]').textContent())!, /moved from the legacy signature .* by Olga Owner/);
      assert.equal(await page.locator('[data-signing-move]').count(), 0, 'no way back');
      await shot(page, 'webhooks-signing-moved');
      await page.goto(`${origin}/settings/webhooks`);
      assert.equal(await page.locator(`li.hook[data-webhook="${hook.id}"] [data-legacy-signature]`).count(), 0);
      await page.goto(`${origin}${href}`);
      // A reload is a GET: nothing is sent again.
      assert.equal((await page.reload())!.status(), 200);

      // A stale form posted again: refused (409), not moved twice.
      const token = await page.locator('input[name="_csrf"]').first().inputValue();
      const again = await context.request.post(`${origin}${href}/signing-contract`, { form: { _csrf: token, to: 'v1', confirm: 'receiver-ready' }, maxRedirects: 0 });
      assert.equal(again.status(), 409);
      assert.match(await again.text(), /already signs with the timestamped v1 signature/);

      const audit = await svc().db.sql.all<{ actor_type: string; actor_id: string; actor_label: string; details: string }>(
        `SELECT actor_type, actor_id, actor_label, details FROM audit_log WHERE subject_id = ? AND action = 'webhook.signing_contract_changed'`,
        [hook.id],
      );
      assert.deepEqual(audit.map((a) => [a.actor_type, a.actor_id, a.actor_label, JSON.parse(a.details)]), [['member', ws.members.olga, 'Olga Owner', { before: 'legacy', after: 'v1' }]]);

      // The next delivery to the real receiver: v1= over "<timestamp>.<body>", verified.
      svc().clock.advance(1000);
      await recordMeetingCompleted(svc().db, svc().clock, ws.workspace_id, 'mtg_v1');
      await deliver(svc());
      const after = receiver.requests.at(-1)!;
      const ts = String(after.headers['x-webhook-timestamp']);
      assert.equal(ts, String(Math.floor(svc().clock.now() / 1000)));
      assert.equal(after.headers['x-webhook-signature'], `v1=${opensslHmac(hook.secret, Buffer.concat([Buffer.from(`${ts}.`), after.body]))}`);
      assert.equal(verifyWebhook(hook.secret, after.headers as WebhookHeaders, after.body, { now: svc().clock.now() }).meeting_id, 'mtg_v1');
      assert.deepEqual([...problems, ...member.problems].filter((p) => !/status of 40[39]/.test(p)), []);
    });
  },
  receiverPolicy(receiver),
);
