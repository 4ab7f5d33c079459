/**
 * The automation settings pages and the member inbox in headless Chromium (Debian's /usr/bin/chromium
 * driven by playwright-core). Runs and notices are made for real: deals are created and updated
 * through the API, the outbox queues runs and the job runner performs them. Skipped, loudly, when
 * Chromium is missing, unless REQUIRE_BROWSER=1. Screenshots go to test-output/.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { ApplyResult, WorkspaceSpec } from '../../server/admin.ts';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { acme, createDeal, stages } from '../support/fixtures.ts';
import { settleAutomation } from '../support/automation.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const shots = path.join(root, 'test-output');

type Applied = ApplyResult & { automations: Record<string, string> };
const BUILT_IN = 'builtin.deal-closed';
/** Deals created by the setup: each one runs `hello` (and `strict`), so `hello` has more runs than a page holds. */
const DEALS = 22;

/** Acme with an automation key and three rules; a big deal is created and won, and 21 small deals created. */
async function setUp(svc: TestService) {
  const spec = acme() as WorkspaceSpec & { automations?: Record<string, unknown> };
  spec.keys!.auto = {
    name: 'Automation admin',
    operations: ['automation.*', 'customers.*'],
    resources: { 'core:SalesPipeline': ['read', 'write'], 'core:Company': ['read', 'write'], 'core:Deal': ['read', 'write'] },
  };
  spec.automations = {
    big: {
      name: 'Tell the team when a big deal moves',
      trigger: { resource_type: 'core:Deal', event: 'updated', fields: ['stage_id'], conditions: [{ field: 'amount.amount', op: 'gte', value: 10000 }] },
      actions: [{ type: 'notify', to: 'owners_and_admins', title: 'Big deal moved: {{record.data.name}}', body: 'The deal "{{record.data.name}}" is now in stage {{record.data.stage_id}}.' }],
    },
    hello: {
      name: 'Tell Ada about new deals',
      trigger: { resource_type: 'core:Deal', event: 'created' },
      actions: [{ type: 'notify', to: 'member', member_id: 'ada', title: 'New deal: {{record.data.name}}', body: 'Amount {{record.data.amount.amount}} {{record.data.amount.currency}}.' }],
    },
    strict: {
      name: 'Rename deals already won',
      trigger: { resource_type: 'core:Deal', event: 'created' },
      actions: [{ type: 'set_fields', data: { name: '{{record.data.name}} (won)' }, expected: { stage_id: 'won' } }],
    },
  };
  const ws = (await svc.apply(spec)) as Applied;
  const api = svc.client(ws.keys.auto!.secret);
  const pipeline = (await api.customers.CreateSalesPipeline({ data: { name: 'New business', stages: stages.basic } })).data!.item;
  const big = (await api.customers.CreateDeal(createDeal(pipeline.id, 'proposal', { name: 'Fleet', amount: { amount: '25000', currency: 'EUR' } }))).data!.item;
  await settleAutomation(svc);
  // One at a time, a second apart: runs and notices get distinct times (the pages order by time).
  for (let i = 1; i < DEALS; i++) {
    svc.clock.advance(1000);
    await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: `Small ${i}`, amount: { amount: '500', currency: 'EUR' } }));
    await settleAutomation(svc);
  }
  svc.clock.advance(60_000);
  const won = await api.customers.UpdateDeal({ id: big.id, data: { stage_id: 'won' } });
  assert.equal(won.response.status, 200, JSON.stringify(won.error));
  await settleAutomation(svc);
  return { ws, api, pipeline, big };
}

/** Reads the outbox (queues runs) and performs the queued runs, until nothing is left. */

announceBrowser('the automation settings and inbox browser tests');

forEachDatabase('automation settings and inbox in headless Chromium', (svc) => {
  let browser: Browser | undefined;
  let setup: Awaited<ReturnType<typeof setUp>>;
  const contexts: BrowserContext[] = [];

  before(async function () {
    this.timeout(60_000);
    browser = await launchBrowser(this);
    setup = await setUp(svc());
    fs.mkdirSync(shots, { recursive: true });
  });
  after(async () => {
    for (const c of contexts) await c.close();
    await browser?.close();
  });

  const origin = () => svc().origin;
  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(shots, `${name}-${svc().db.dialect}.png`), fullPage: true });
  const ruleId = (handle: string) => setup.ws.automations[handle]!;
  const ruleRow = (id: string) => svc().db.sql.one<{ enabled: number | boolean; changed_by: string | null }>(`SELECT enabled, changed_by FROM automation_rules WHERE rule_id = ?`, [id]);
  const apiEnabled = async (id: string) => {
    const res = await setup.api.automation.GetRule({ rule_id: id });
    assert.equal(res.response.status, 200, JSON.stringify(res.error));
    return res.data!.item.enabled;
  };

  /** A browser context signed in as the member through a one-time link; the page ends on `next`. */
  async function signIn(member: 'olga' | 'ada' | 'bob', next: string) {
    const signed = await signedInPage(browser!, svc(), { workspaceId: setup.ws.workspace_id, memberId: setup.ws.members[member]! }, next);
    contexts.push(signed.context);
    return signed;
  }

  const ruleCard = (page: Page, id: string) => page.locator(`li.rule[data-rule="${id}"]`);

  it('lists every rule in words, built-in first and locked; an owner pauses and resumes a rule and the API agrees', async function () {
    this.timeout(60_000);
    const { page, problems } = await signIn('olga', '/settings/automation');
    assert.equal(new URL(page.url()).pathname, '/settings/automation');
    assert.equal(await page.textContent('h1'), 'Automation rules');
    const ids = await page.$$eval('li.rule', (els) => els.map((el) => el.getAttribute('data-rule')));
    assert.equal(ids[0], BUILT_IN, 'built-in rules come first');
    assert.deepEqual(new Set(ids.slice(1)), new Set([ruleId('big'), ruleId('hello'), ruleId('strict')]));

    const builtIn = ruleCard(page, BUILT_IN);
    assert.equal(await builtIn.locator('.badge.locked').textContent(), 'Built in · locked');
    assert.equal(await builtIn.locator('form, button').count(), 0, 'a built-in rule never has a button');
    assert.equal(await builtIn.locator('.trigger').textContent(), 'When a core:Deal is updated (closed_at) and closed_at is set');
    assert.equal(await builtIn.locator('.last .status').textContent(), 'succeeded');

    const big = ruleCard(page, ruleId('big'));
    assert.equal(await big.locator('h2').textContent(), 'Tell the team when a big deal moves');
    assert.equal(await big.locator('.badge.app').textContent(), 'app core');
    assert.equal(await big.locator('.trigger').textContent(), 'When a core:Deal is updated (stage_id) and amount.amount ≥ 10000');
    assert.deepEqual(await big.locator('.actions li').allTextContents(), ['Notify owners and admins: “Big deal moved: {{record.data.name}}”']);
    assert.equal(await big.locator('[data-state]').textContent(), 'Enabled');
    assert.equal(await big.locator('.last .status').textContent(), 'succeeded');
    assert.match((await big.locator('.last time').textContent())!, /^2026-11-22 12:\d\d:\d\d UTC$/);
    assert.deepEqual(await ruleCard(page, ruleId('hello')).locator('.actions li').allTextContents(), ['Notify Ada Member: “New deal: {{record.data.name}}”']);
    const strict = ruleCard(page, ruleId('strict'));
    assert.equal(await strict.locator('.trigger').textContent(), 'When a core:Deal is created');
    assert.deepEqual(await strict.locator('.actions li').allTextContents(), ['Set name on the record, only if stage_id is still "won"']);
    assert.equal(await strict.locator('.last .status').textContent(), 'failed');
    assert.equal(await page.locator('.info').count(), 0, 'owners see no read-only note');
    // The inbox link in the top bar carries the unread count: the closed deal and the big deal.
    assert.equal(await page.locator('.topbar .count').getAttribute('data-count'), '2');
    await shot(page, 'automation-rules');

    // Pause: a form post with the page's CSRF token, 303 back to the list with a notice.
    await Promise.all([page.waitForURL(/done=paused/), big.locator('button', { hasText: 'Pause' }).click()]);
    assert.equal(new URL(page.url()).pathname, '/settings/automation');
    assert.equal(await page.locator('.flash').textContent(), '“Tell the team when a big deal moves” is paused: changes from now on do not run it.');
    assert.equal(await big.locator('[data-state]').textContent(), 'Paused');
    assert.equal(await big.locator('button').textContent(), 'Resume');
    const paused = (await ruleRow(ruleId('big')))!;
    assert.equal(Boolean(paused.enabled), false);
    assert.equal(paused.changed_by, `member ${setup.ws.members.olga!}`);
    assert.equal(await apiEnabled(ruleId('big')), false);
    await shot(page, 'automation-rules-paused');

    // A paused rule does not run: moving the big deal again starts no run of it.
    const runsBefore = (await setup.api.automation.GetRule({ rule_id: ruleId('big') })).data!.runs.length;
    await setup.api.customers.UpdateDeal({ id: setup.big.id, data: { stage_id: 'proposal' } });
    await settleAutomation(svc());
    assert.equal((await setup.api.automation.GetRule({ rule_id: ruleId('big') })).data!.runs.length, runsBefore);

    await Promise.all([page.waitForURL(/done=resumed/), big.locator('button', { hasText: 'Resume' }).click()]);
    assert.match((await page.locator('.flash').textContent())!, /is running again/);
    assert.equal(await big.locator('[data-state]').textContent(), 'Enabled');
    assert.equal(await big.locator('button').textContent(), 'Pause');
    assert.equal(Boolean((await ruleRow(ruleId('big')))!.enabled), true);
    assert.equal(await apiEnabled(ruleId('big')), true);
    assert.deepEqual(problems, []);
  });

  it("shows a rule's configuration and its runs, newest first and paged; bad positions are a 400 page", async function () {
    this.timeout(60_000);
    const { page, cookie, problems } = await signIn('olga', '/settings/automation');
    await Promise.all([page.waitForURL(/\/settings\/automation\/core\//), ruleCard(page, ruleId('big')).locator('h2 a').click()]);
    assert.equal(new URL(page.url()).pathname, `/settings/automation/core/${ruleId('big')}`);
    assert.equal(await page.textContent('h1'), 'Tell the team when a big deal moves');
    assert.equal(await page.locator('dd.trigger').textContent(), 'When a core:Deal is updated (stage_id) and amount.amount ≥ 10000');
    assert.match((await page.locator('.fields').textContent())!, /Notify owners and admins: “Big deal moved: \{\{record\.data\.name\}\}”The deal "\{\{record\.data\.name\}\}" is now in stage/);
    const rows = page.locator('table.runs tbody tr');
    assert.equal(await rows.count(), 1);
    assert.equal(await rows.locator('.status').textContent(), 'succeeded');
    assert.deepEqual((await rows.locator('td').allTextContents()).slice(1, 3), ['updated', setup.big.id]);
    assert.deepEqual(await rows.locator('.outcomes li').allTextContents(), ['notify: succeeded · 2 notified']);
    assert.equal(await page.locator('.pager').count(), 0);
    // Pause and resume from the rule page come back to it.
    await Promise.all([page.waitForURL(/done=paused/), page.locator('form.rule-action button', { hasText: 'Pause' }).click()]);
    assert.equal(new URL(page.url()).pathname, `/settings/automation/core/${ruleId('big')}`);
    assert.equal(await page.locator('.badges [data-state]').textContent(), 'Paused');
    await Promise.all([page.waitForURL(/done=resumed/), page.locator('form.rule-action button', { hasText: 'Resume' }).click()]);
    assert.equal(await page.locator('.badges [data-state]').textContent(), 'Enabled');
    assert.match((await page.locator('.fields').textContent())!, /Last changed2026-11-22 \d\d:\d\d:\d\d UTC by Olga Owner\n/);
    await shot(page, 'automation-rule');

    // A failed run shows its error and each action's outcome.
    await page.goto(`${origin()}/settings/automation/core/${ruleId('strict')}`);
    const failed = page.locator('table.runs tbody tr').first();
    assert.equal(await failed.locator('.status').textContent(), 'failed');
    assert.match((await failed.locator('.error').textContent())!, /action 1 \(set_fields\) was refused: 409 conflict/);
    assert.match((await failed.locator('.outcomes li').first().textContent())!, /^set_fields: failed · 409 conflict/);

    // hello ran once per created deal: 20 on the first page, newest first, then "Older runs".
    await page.goto(`${origin()}/settings/automation/core/${ruleId('hello')}`);
    const api = (await setup.api.automation.GetRule({ rule_id: ruleId('hello'), runs_limit: 100 })).data!.runs;
    assert.equal(api.length, DEALS);
    const shown = async () => page.$$eval('table.runs tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-run')));
    assert.deepEqual(await shown(), api.slice(0, 20).map((r) => r.run_id));
    await Promise.all([page.waitForURL(/before=/), page.click('a[rel="next"]')]);
    assert.deepEqual(await shown(), api.slice(20).map((r) => r.run_id));
    assert.equal(await page.locator('a[rel="next"]').count(), 0);
    assert.equal(await page.locator('.pager a', { hasText: 'Newest runs' }).count(), 1);
    await shot(page, 'automation-rule-older');

    // The built-in rule has a page, with no button.
    await page.goto(`${origin()}/settings/automation/core/${BUILT_IN}`);
    assert.equal(await page.locator('.badge.locked').textContent(), 'Built in · locked');
    assert.equal(await page.locator('form.rule-action').count(), 0);
    assert.equal(await page.locator('table.runs tbody tr .status').first().textContent(), 'succeeded');

    for (const bad of ['abc', '1.', '99999999999999999.rn_x', '1.rn_x;DROP', '-1.rn_a']) {
      const res = await fetch(`${origin()}/settings/automation/core/${ruleId('hello')}?before=${encodeURIComponent(bad)}`, { headers: { Cookie: cookie } });
      assert.equal(res.status, 400, bad);
      assert.match(await res.text(), /Bad request/);
    }
    const twice = await fetch(`${origin()}/settings/automation/core/${ruleId('hello')}?before=1.rn_a&before=2.rn_b`, { headers: { Cookie: cookie } });
    assert.equal(twice.status, 400);
    // A phone: nothing wider than the screen (the runs table scrolls inside its card).
    await page.setViewportSize({ width: 390, height: 800 });
    for (const [where, name] of [['/settings/automation', 'automation-rules-phone'], [`/settings/automation/core/${ruleId('big')}`, 'automation-rule-phone'], ['/inbox', 'inbox-phone']] as const) {
      await page.goto(`${origin()}${where}`);
      assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, where);
      await shot(page, name);
    }
    const unknown = await fetch(`${origin()}/settings/automation/core/ru_nothing`, { headers: { Cookie: cookie } });
    assert.equal(unknown.status, 404);
    const anonymous = await fetch(`${origin()}/settings/automation`);
    assert.equal(anonymous.status, 401);
    assert.deepEqual(problems, []);
  });

  it('shows a plain member the rules read-only; their posts and posts on built-in rules are refused', async function () {
    this.timeout(60_000);
    const { page, context, problems } = await signIn('ada', '/settings/automation');
    assert.equal(await page.locator('li.rule').count(), 4);
    assert.equal(await page.locator('li.rule form, li.rule button').count(), 0, 'no Pause or Resume for a member');
    assert.match((await page.locator('.info').textContent())!, /Owners and admins manage them/);
    await shot(page, 'automation-rules-member');
    await page.goto(`${origin()}/settings/automation/core/${ruleId('big')}`);
    assert.equal(await page.locator('form.rule-action').count(), 0);
    // A member with a valid token is still refused.
    const token = await page.locator('input[name="_csrf"]').first().inputValue();
    const refused = await context.request.post(`${origin()}/settings/automation/core/${ruleId('big')}/pause`, { form: { _csrf: token, back: 'list' }, maxRedirects: 0 });
    assert.equal(refused.status(), 403);
    assert.match(await refused.text(), /Only owners and admins may pause or resume/);
    assert.equal(Boolean((await ruleRow(ruleId('big')))!.enabled), true);

    // An admin's valid post on a built-in rule is refused too.
    const admin = await signIn('bob', '/settings/automation');
    const adminToken = await admin.page.locator('input[name="_csrf"]').first().inputValue();
    const builtIn = await admin.context.request.post(`${origin()}/settings/automation/core/${BUILT_IN}/pause`, { form: { _csrf: adminToken }, maxRedirects: 0 });
    assert.equal(builtIn.status(), 403);
    assert.match(await builtIn.text(), /built into the service and locked/);
    assert.deepEqual(problems, []);
  });

  it('refuses a pause without the CSRF token, with a wrong one, or from another origin, and changes nothing', async function () {
    this.timeout(60_000);
    const { cookie, page } = await signIn('olga', '/settings/automation');
    const token = await page.locator('input[name="_csrf"]').first().inputValue();
    const csrfCookie = (await page.context().cookies()).filter((c) => c.name === 'wso_csrf').map((c) => `${c.name}=${c.value}`);
    const post = (body: Record<string, string>, headers: Record<string, string> = {}) =>
      fetch(`${origin()}/settings/automation/core/${ruleId('hello')}/pause`, {
        method: 'POST',
        redirect: 'manual',
        headers: { Cookie: [cookie, ...csrfCookie].join('; '), 'Content-Type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(body).toString(),
      });
    for (const [body, headers] of [
      [{ back: 'list' }, {}],
      [{ _csrf: 'forged', back: 'list' }, {}],
      [{ _csrf: token, back: 'list' }, { Origin: 'https://evil.example' }],
    ] as const) {
      const res = await post(body, headers);
      assert.equal(res.status, 403, JSON.stringify([body, headers]));
      assert.match(await res.text(), /Refused/);
    }
    assert.equal(Boolean((await ruleRow(ruleId('hello')))!.enabled), true);
    assert.equal(await apiEnabled(ruleId('hello')), true);
    // The same post with the page's token (and its cookie) goes through: the refusals were the token's.
    const ok = await post({ _csrf: token, back: 'list' }, { Origin: origin() });
    assert.equal(ok.status, 303);
    assert.equal(ok.headers.get('location'), `/settings/automation?done=paused&rule=${ruleId('hello')}`);
    assert.equal(await apiEnabled(ruleId('hello')), false);
    const resumed = await fetch(`${origin()}/settings/automation/core/${ruleId('hello')}/resume`, {
      method: 'POST',
      redirect: 'manual',
      headers: { Cookie: [cookie, ...csrfCookie].join('; '), 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: token, back: 'rule' }).toString(),
    });
    assert.equal(resumed.status, 303);
    assert.equal(resumed.headers.get('location'), `/settings/automation/core/${ruleId('hello')}?done=resumed&rule=${ruleId('hello')}`);
    assert.equal(await apiEnabled(ruleId('hello')), true);
  });

  it("shows the owner's inbox with its unread count; marking one and then all read drops the count", async function () {
    this.timeout(60_000);
    const { page, problems } = await signIn('olga', '/inbox');
    assert.equal(await page.textContent('h1'), 'Inbox');
    assert.equal(await page.locator('[data-unread-count]').getAttribute('data-unread-count'), '2');
    assert.equal(await page.locator('[data-unread-count]').textContent(), '2 unread notices.');
    assert.equal(await page.locator('.topbar .count').getAttribute('data-count'), '2');
    const titles = await page.locator('.notice-item h2').allTextContents();
    assert.equal(titles.length, 2);
    assert.deepEqual(titles.map((t) => t.replace(/^Unread: /, '')).sort(), ['Big deal moved: Fleet', 'Deal closed: Fleet']);
    assert.equal(await page.locator('.notice-item.unread').count(), 2);
    const bigNotice = page.locator('.notice-item', { hasText: 'Big deal moved: Fleet' });
    assert.equal(await bigNotice.locator('.body').textContent(), 'The deal "Fleet" is now in stage won.');
    assert.equal(await bigNotice.locator('a', { hasText: 'Open' }).getAttribute('href'), `/records/open/${setup.big.id}`);
    await shot(page, 'inbox');

    await Promise.all([page.waitForURL(/done=read/), bigNotice.locator('button', { hasText: 'Mark as read' }).click()]);
    assert.equal(await page.locator('[data-unread-count]').getAttribute('data-unread-count'), '1');
    assert.equal(await page.locator('.topbar .count').getAttribute('data-count'), '1');
    assert.equal(await page.locator('.notice-item', { hasText: 'Big deal moved: Fleet' }).locator('button').count(), 0);
    assert.equal(await page.locator('.notice-item.unread').count(), 1);
    await shot(page, 'inbox-one-read');

    await Promise.all([page.waitForURL(/done=all/), page.locator('button', { hasText: 'Mark all as read' }).click()]);
    assert.equal(await page.locator('[data-unread-count]').textContent(), 'No unread notices.');
    assert.equal(await page.locator('.topbar .count').count(), 0);
    assert.equal(await page.locator('.notice-item.unread').count(), 0);
    const unread = await svc().db.sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM inbox_notifications WHERE member_id = ? AND read_at IS NULL`, [setup.ws.members.olga!]);
    assert.equal(Number(unread!.n), 0);

    // The notice's link opens the record it is about (the deal's page).
    await Promise.all([page.waitForURL(new RegExp(`/records/deals/${setup.big.id}$`)), page.locator('.notice-item', { hasText: 'Big deal moved' }).locator('a', { hasText: 'Open' }).click()]);
    assert.equal(await page.textContent('h1'), 'Fleet');
    assert.deepEqual(problems, []);
  });

  it("pages a member's inbox; a notice of someone else is untouched; bad input is a 400 page", async function () {
    this.timeout(60_000);
    const { page, context, cookie, problems } = await signIn('ada', '/inbox');
    assert.equal(await page.locator('[data-unread-count]').getAttribute('data-unread-count'), String(DEALS));
    const first = await page.locator('.notice-item h2').allTextContents();
    assert.equal(first.length, 20);
    assert.equal(first[0], `Unread: New deal: Small ${DEALS - 1}`, 'newest first');
    await Promise.all([page.waitForURL(/before=/), page.click('a[rel="next"]')]);
    const older = await page.locator('.notice-item h2').allTextContents();
    assert.deepEqual(older, ['Unread: New deal: Small 1', 'Unread: New deal: Fleet']);
    // Marking one read on the second page comes back to it.
    const position = new URL(page.url()).searchParams.get('before')!;
    await Promise.all([page.waitForURL(/done=read/), page.locator('.notice-item', { hasText: 'Fleet' }).locator('button').click()]);
    assert.equal(new URL(page.url()).searchParams.get('before'), position);
    assert.equal(await page.locator('[data-unread-count]').getAttribute('data-unread-count'), String(DEALS - 1));
    await shot(page, 'inbox-older');

    // Another member's notice id changes nothing.
    const bobs = await svc().db.sql.one<{ id: string }>(`SELECT id FROM inbox_notifications WHERE member_id = ? AND read_at IS NULL`, [setup.ws.members.bob!]);
    const token = await page.locator('input[name="_csrf"]').first().inputValue();
    const res = await context.request.post(`${origin()}/inbox/read`, { form: { _csrf: token, id: bobs!.id }, maxRedirects: 0 });
    assert.equal(res.status(), 303);
    assert.equal((await svc().db.sql.one<{ read_at: number | null }>(`SELECT read_at FROM inbox_notifications WHERE id = ?`, [bobs!.id]))!.read_at, null);
    for (const form of [{ _csrf: token }, { _csrf: token, id: 'x y' }, { _csrf: token, all: '1', before: 'nope' }] as Array<Record<string, string>>) {
      const bad = await context.request.post(`${origin()}/inbox/read`, { form, maxRedirects: 0 });
      assert.equal(bad.status(), 400, JSON.stringify(form));
    }
    const noToken = await context.request.post(`${origin()}/inbox/read`, { form: { all: '1' }, maxRedirects: 0 });
    assert.equal(noToken.status(), 403);
    for (const bad of ['x', '1.nt_a.b', '123456789012345678.nt_a']) {
      const got = await fetch(`${origin()}/inbox?before=${encodeURIComponent(bad)}`, { headers: { Cookie: cookie } });
      assert.equal(got.status, 400, bad);
    }
    assert.equal((await fetch(`${origin()}/inbox`)).status, 401);
    assert.deepEqual(problems, []);
  });
});
