/**
 * A rule authored on a page, in headless Chromium on both databases: an owner fills the form, previews
 * which deals match now, saves it; then changes a deal on its record page and the rule fires (a notice
 * in the inbox whose "Open" leads to the deal). Mistakes are refused in words with the form kept; a
 * plain member cannot author. Screenshots at 1280 and 390 px in test-output/.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { announceBrowser, launchBrowser, phoneMisfits, signedInPage } from '../support/browser.ts';
import { settleAutomation } from '../support/automation.ts';
import { acme, createDeal, stages } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

const shots = path.join(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..'), 'test-output');

announceBrowser('the rule authoring browser test');

forEachDatabase('automation rules authored on a page, in headless Chromium', (svc) => {
  let browser: Browser | undefined;
  const contexts: BrowserContext[] = [];
  let ws: Awaited<ReturnType<ReturnType<typeof svc>['apply']>>;
  let big: string;
  before(async function () {
    this.timeout(60_000);
    browser = await launchBrowser(this);
    fs.mkdirSync(shots, { recursive: true });
    ws = await svc().apply(acme());
    const api = svc().client(ws.keys.sales!.secret);
    const pipeline = (await api.customers.CreateSalesPipeline({ data: { name: 'New business', stages: stages.basic } })).data!.item;
    big = (await api.customers.CreateDeal(createDeal(pipeline.id, 'proposal', { name: 'Fleet', amount: { amount: '25000', currency: 'EUR' } }))).data!.item.id;
    svc().clock.advance(1000);
    await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: 'Small', amount: { amount: '500', currency: 'EUR' } }));
    await settleAutomation(svc());
  });
  after(async () => {
    for (const c of contexts) await c.close();
    await browser?.close();
  });
  const as = async (member: 'olga' | 'ada', next: string) => {
    const s = await signedInPage(browser!, svc(), { workspaceId: ws.workspace_id, memberId: ws.members[member]! }, next);
    contexts.push(s.context);
    await s.page.setViewportSize({ width: 1280, height: 900 });
    return s;
  };
  const shot = (page: Page, name: string, fullPage = true) => page.screenshot({ path: path.join(shots, `rule-author-${name}-${svc().db.dialect}.png`), fullPage });

  it('an owner authors a rule with a preview, and it fires when a deal is changed on its record page', async function () {
    this.timeout(90_000);
    const { page, problems } = await as('olga', '/settings/automation');
    await Promise.all([page.waitForURL(/\/settings\/automation\/new$/), page.locator('[data-new-rule]').click()]);
    await page.fill('input[name="name"]', 'Big deals moving');
    await page.selectOption('select[name="when"]', 'core:Deal|updated');
    await page.fill('input[name="fields"]', 'stage_id');
    await page.fill('input[name="cond_field_0"]', 'amount.amount');
    await page.selectOption('select[name="cond_op_0"]', 'gte');
    await page.fill('input[name="cond_value_0"]', '10000');
    await page.selectOption('select[name="act_type_0"]', 'notify');
    await page.selectOption('select[name="act_to_0"]', 'owners_and_admins');
    await page.fill('input[name="act_title_0"]', 'Big deal moved: {{record.data.name}}');
    await page.fill('input[name="act_body_0"]', 'Now in stage {{record.data.stage_id}}.');

    // A second action that is not JSON: refused in words, the form kept.
    await page.locator('details.more-action summary').first().click();
    await page.selectOption('select[name="act_type_1"]', 'set_fields');
    await page.fill('textarea[name="act_data_1"]', '{stage_id: won');
    await Promise.all([page.waitForLoadState(), page.locator('[data-create]').click()]);
    assert.match((await page.locator('[data-problem]').textContent())!, /Action 2: the fields to set must be a JSON object/);
    assert.equal(await page.inputValue('input[name="cond_value_0"]'), '10000');
    problems.length = 0;
    // One the schema allows but the rules do not: a record created without a type.
    await page.selectOption('select[name="act_type_1"]', 'create_record');
    await page.fill('textarea[name="act_data_1"]', '{"name": "x"}');
    await Promise.all([page.waitForLoadState(), page.locator('[data-create]').click()]);
    assert.match((await page.locator('[data-problem]').textContent())!, /cannot be saved: actions\[1\] \(create_record\): resource_type must be a type that can be created/);
    problems.length = 0;
    await page.selectOption('select[name="act_type_1"]', '');

    // The preview: which deals match now, saving nothing.
    await Promise.all([page.waitForLoadState(), page.locator('[data-preview-button]').click()]);
    assert.match((await page.locator('[data-preview] p').first().textContent())!, /^1 of the 2 most recently changed core:Deal records you can see match the conditions now; it runs when one of them is updated in stage_id\.$/);
    assert.deepEqual(await page.locator('[data-preview] li a').allTextContents(), ['Fleet']);
    assert.equal(await page.locator('[data-preview] li a').getAttribute('href'), `/records/open/${big}`);
    const stored = await svc().db.sql.all(`SELECT rule_id FROM automation_rules WHERE workspace_id = ?`, [ws.workspace_id]);
    assert.equal(stored.length, 0, 'a preview saves nothing');
    await shot(page, 'preview');
    await page.setViewportSize({ width: 390, height: 844 });
    assert.deepEqual(await phoneMisfits(page), []);
    await shot(page, 'phone', false);
    await page.setViewportSize({ width: 1280, height: 900 });

    await Promise.all([page.waitForURL(/\/settings\/automation\/core\/ru_.*done=created/), page.locator('[data-create]').click()]);
    assert.match((await page.locator('.flash').textContent())!, /“Big deals moving” is saved and enabled/);
    assert.equal(await page.locator('dd.trigger').textContent(), 'When a core:Deal is updated (stage_id) and amount.amount ≥ 10000');
    const row = await svc().db.sql.one<{ changed_by: string }>(`SELECT changed_by FROM automation_rules WHERE workspace_id = ?`, [ws.workspace_id]);
    assert.equal(row!.changed_by, `member ${ws.members.olga}`);
    await shot(page, 'saved');

    // The rule fires on a change made on the deal's record page.
    svc().clock.advance(60_000);
    await page.goto(`${svc().origin}/records/deals/${big}/edit`);
    await page.fill('input[name="f.stage_id"]', 'won');
    await Promise.all([page.waitForURL(new RegExp(`/records/deals/${big}$`)), page.locator('[data-save]').click()]);
    await settleAutomation(svc());
    await page.goto(`${svc().origin}/inbox`);
    const notice = page.locator('.notice-item', { hasText: 'Big deal moved: Fleet' });
    assert.equal(await notice.locator('.body').textContent(), 'Now in stage won.');
    await Promise.all([page.waitForURL(new RegExp(`/records/deals/${big}$`)), notice.locator('a', { hasText: 'Open' }).click()]);
    assert.equal(await page.textContent('h1'), 'Fleet');
    assert.deepEqual(problems, []);
  });

  it('a plain member sees the rules but cannot author one', async function () {
    this.timeout(30_000);
    const { page, problems } = await as('ada', '/settings/automation');
    assert.equal(await page.locator('[data-new-rule]').count(), 0);
    const refused = await page.goto(`${svc().origin}/settings/automation/new`);
    assert.equal(refused!.status(), 403);
    assert.match((await page.textContent('main'))!, /Only owners and admins author automation rules/);
    problems.length = 0;
    assert.deepEqual(problems, []);
  });
});
