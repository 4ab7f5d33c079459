/**
 * The record pages in headless Chromium, as an owner and a plain member would use them, on both
 * databases: pipelines, companies and deals created from forms, listed with a filter, opened by id,
 * edited (a concurrent change to another field merges; one to the same field is a conflict shown
 * field by field, saved on purpose the second time), deleted after a confirmation; a private record
 * only for its owner; a member without write access on shared pipelines gets no Edit button and a
 * refusal in words. Screenshots at 1280 and 390 px go to test-output/.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { announceBrowser, launchBrowser, phoneMisfits, signedInPage } from '../support/browser.ts';
import { acme, createCompany, stages } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

const shots = path.join(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..'), 'test-output');

announceBrowser('the record pages browser test');

forEachDatabase('record pages in headless Chromium', (svc) => {
  let browser: Browser | undefined;
  const contexts: BrowserContext[] = [];
  let ws: Awaited<ReturnType<ReturnType<typeof svc>['apply']>>;
  const db = () => svc().db.dialect;
  before(async function () {
    browser = await launchBrowser(this);
    fs.mkdirSync(shots, { recursive: true });
    ws = await svc().apply(acme());
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
  const shot = (page: Page, name: string, fullPage = true) => page.screenshot({ path: path.join(shots, `records-${name}-${db()}.png`), fullPage });
  const sales = () => svc().client(ws.keys.sales!.secret);
  const fitsPhone = async (page: Page, name: string) => {
    await page.setViewportSize({ width: 390, height: 844 });
    assert.deepEqual(await phoneMisfits(page), [], `${name} fits 390 px`);
    await shot(page, `${name}-390`, false);
    await page.setViewportSize({ width: 1280, height: 900 });
  };

  it('an owner creates a pipeline, a company and a deal from forms, finds them in lists and opens them by id', async function () {
    this.timeout(90_000);
    const { page, problems } = await as('olga', '/records');
    await Promise.all([page.waitForURL(/\/records$/), page.locator('.topbar nav a', { hasText: 'Records' }).click()]);
    assert.deepEqual(await page.locator('ul.rec-types h2').allTextContents(), ['Companies', 'Deals', 'Sales pipelines']);
    await shot(page, 'index');

    // A pipeline: its stages as JSON (the field's example is the placeholder).
    await page.goto(`${svc().origin}/records/sales-pipelines/new`);
    assert.match((await page.locator('textarea[name="f.stages"]').getAttribute('placeholder'))!, /"id":"lead"/);
    await page.fill('input[name="f.name"]', 'New business');
    await page.fill('textarea[name="f.stages"]', '[{"id": "lead"');
    await Promise.all([page.waitForLoadState(), page.locator('[data-save]').click()]);
    assert.match((await page.locator('[data-problem]').textContent())!, /Stages is not valid JSON/);
    assert.equal(await page.inputValue('input[name="f.name"]'), 'New business', 'what was typed is kept');
    problems.length = 0;
    await page.fill('textarea[name="f.stages"]', `${'['.repeat(40)}${']'.repeat(40)}`);
    await Promise.all([page.waitForLoadState(), page.locator('[data-save]').click()]);
    assert.match((await page.locator('[data-problem]').textContent())!, /Stages nests deeper than 16 levels/);
    problems.length = 0;
    await page.fill('textarea[name="f.stages"]', JSON.stringify(stages.basic));
    await page.selectOption('select[name="f.is_default"]', 'true');
    await Promise.all([page.waitForURL(/\/records\/sales-pipelines\/pl_/), page.locator('[data-save]').click()]);
    assert.equal(await page.locator('.flash').textContent(), 'Created this sales pipeline.');
    assert.equal(await page.locator('[data-field="Stages"]').textContent(), 'Lead → Proposal sent → Closed won → Closed lost');
    const pipelineId = page.url().split('/').pop()!;

    // A company, with money and an enum.
    await page.goto(`${svc().origin}/records/companies/new`);
    await page.fill('input[name="f.name"]', 'Globex Corporation');
    await page.fill('input[name="f.domain"]', 'https://www.Globex.com/');
    await page.fill('input[name="f.employee_count"]', '250');
    await page.fill('input[name="f.annual_revenue.amount"]', '12500000');
    await page.selectOption('select[name="f.annual_revenue.currency"]', 'USD');
    await page.selectOption('select[name="f.lifecycle_stage"]', 'prospect');
    await page.fill('input[name="f.address.city"]', 'Springfield');
    await shot(page, 'company-new');
    await Promise.all([page.waitForURL(/\/records\/companies\/co_/), page.locator('[data-save]').click()]);
    const companyId = page.url().split('/').pop()!;
    assert.equal(await page.locator('[data-field="Domain"]').textContent(), 'globex.com', 'the service normalised it');
    assert.equal(await page.locator('[data-field="Annual revenue"]').textContent(), '12500000.00 USD');

    // A refused create keeps the form and says why in the operation's words.
    await page.goto(`${svc().origin}/records/deals/new`);
    await page.fill('input[name="f.name"]', 'Fleet renewal');
    await page.fill('input[name="f.pipeline_id"]', pipelineId);
    await page.fill('input[name="f.stage_id"]', 'nowhere');
    await Promise.all([page.waitForLoadState(), page.locator('[data-save]').click()]);
    assert.match((await page.locator('[data-problem]').textContent())!, /stage/i);
    problems.length = 0;
    await page.fill('input[name="f.stage_id"]', 'proposal');
    await page.fill('input[name="f.company_id"]', companyId);
    await page.fill('input[name="f.amount.amount"]', '48000');
    await page.selectOption('select[name="f.amount.currency"]', 'EUR');
    await page.fill('input[name="f.close_date"]', '2027-03-31');
    await Promise.all([page.waitForURL(/\/records\/deals\/dl_/), page.locator('[data-save]').click()]);
    assert.equal(await page.locator('[data-field="Weighted amount"]').textContent(), '28800.00 EUR', 'computed fields are shown');
    await shot(page, 'deal');
    // A reference reads as the record's name and links to it, whatever its type.
    assert.equal(await page.locator('[data-field="Company"]').textContent(), 'Globex Corporation');
    assert.equal(await page.locator('[data-field="Pipeline"]').textContent(), 'New business');
    await Promise.all([page.waitForURL(new RegExp(`/records/companies/${companyId}$`)), page.locator('[data-field="Company"] a').click()]);

    // Another deal through the API in another pipeline: the list filters by pipeline.
    const other = await sales().customers.CreateSalesPipeline({ data: { name: 'Renewals', stages: stages.basic } });
    await sales().customers.CreateDeal({ data: { name: 'Elsewhere', pipeline_id: other.data!.item.id, stage_id: 'lead' } });
    await page.goto(`${svc().origin}/records/deals`);
    assert.deepEqual((await page.locator('[data-records] tbody td:first-child a').allTextContents()).sort(), ['Elsewhere', 'Fleet renewal']);
    await page.fill('input[name="pipeline_id"]', pipelineId);
    await Promise.all([page.waitForURL(/pipeline_id=/), page.locator('.rec-filters button[type=submit]').click()]);
    assert.deepEqual(await page.locator('[data-records] tbody td:first-child a').allTextContents(), ['Fleet renewal']);
    await shot(page, 'deals-filtered');
    await fitsPhone(page, 'deals');
    await page.goto(`${svc().origin}/records/open/${companyId}`);
    assert.equal(new URL(page.url()).pathname, `/records/companies/${companyId}`);
    await fitsPhone(page, 'company');
    assert.deepEqual(problems, []);
  });

  it('edits: another field changed meanwhile merges; the same field changed meanwhile is a conflict shown, then saved on purpose', async function () {
    this.timeout(60_000);
    const made = await sales().customers.CreateCompany(createCompany('Initech', 'initech.com'));
    const id = made.data!.item.id;
    const { page, problems } = await as('olga', `/records/companies/${id}`);
    await Promise.all([page.waitForURL(/\/edit$/), page.locator('[data-edit]').click()]);
    // Someone sets the phone meanwhile; this person changes the industry: both stay.
    await sales().customers.UpdateCompany({ id, data: { phone: '+1 555 0100' } });
    await page.fill('input[name="f.industry"]', 'Software');
    await Promise.all([page.waitForURL(new RegExp(`/records/companies/${id}$`)), page.locator('[data-save]').click()]);
    assert.equal(await page.locator('.flash').textContent(), 'Saved: Industry.');
    assert.equal(await page.locator('[data-field="Phone"]').textContent(), '+1 555 0100');
    assert.equal(await page.locator('[data-field="Industry"]').textContent(), 'Software');

    // Now both change the industry (and someone the website too): the second save is refused and shows what moved.
    await page.locator('[data-edit]').click();
    await page.waitForURL(/\/edit$/);
    assert.equal(await page.getAttribute('input[name="f.name"]', 'maxlength'), '200', 'a field keeps its length limit');
    await sales().customers.UpdateCompany({ id, data: { industry: 'Hardware', website: 'https://initech.example/' } });
    await page.fill('input[name="f.industry"]', 'Consulting');
    await Promise.all([page.waitForLoadState(), page.locator('[data-save]').click()]);
    assert.match((await page.locator('[data-problem] p').textContent())!, /Changed by someone else since you opened it\. Nothing was saved/);
    assert.deepEqual(await page.locator('[data-conflict] tbody td').allTextContents(), ['Industry', 'Software', 'Hardware', 'Website', '—', 'https://initech.example/']);
    assert.equal(await page.inputValue('input[name="f.industry"]'), 'Consulting', 'the person’s change is kept');
    assert.equal(await page.inputValue('input[name="f.website"]'), 'https://initech.example/', 'a field they did not change shows its new value');
    problems.length = 0;
    await shot(page, 'conflict');
    await fitsPhone(page, 'conflict');
    assert.equal((await sales().customers.GetCompany({ id })).data!.item.data.industry, 'Hardware', 'nothing was overwritten');
    await Promise.all([page.waitForURL(new RegExp(`/records/companies/${id}$`)), page.locator('[data-save]').click()]);
    assert.equal(await page.locator('[data-field="Industry"]').textContent(), 'Consulting');
    assert.equal(await page.locator('[data-field="Website"]').textContent(), 'https://initech.example/', 'saving again undoes nobody else’s change');
    // Clearing an optional field removes it; a required one cannot be cleared.
    await page.locator('[data-edit]').click();
    await page.waitForURL(/\/edit$/);
    await page.fill('input[name="f.phone"]', '');
    await Promise.all([page.waitForURL(new RegExp(`/records/companies/${id}$`)), page.locator('[data-save]').click()]);
    assert.equal(await page.locator('[data-field="Phone"]').textContent(), '—');
    // A form that lost what it was opened with is refused rather than saved blind.
    await page.locator('[data-edit]').click();
    await page.waitForURL(/\/edit$/);
    await page.evaluate(() => document.querySelector('input[name="_orig"]')!.remove());
    await page.fill('input[name="f.industry"]', 'Blind');
    const [blind] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST'), page.locator('[data-save]').click()]);
    assert.equal(blind.status(), 400);
    assert.match((await page.textContent('main'))!, /Open the edit page again/);
    problems.length = 0;
    assert.equal((await sales().customers.GetCompany({ id })).data!.item.data.industry, 'Consulting');
    assert.deepEqual(problems, []);
  });

  it('deletes after a confirmation page; the record is gone for everyone', async function () {
    this.timeout(60_000);
    const made = await sales().customers.CreateCompany(createCompany('Doomed', 'doomed.example'));
    const id = made.data!.item.id;
    const { page, problems } = await as('olga', `/records/companies/${id}`);
    await Promise.all([page.waitForURL(/\/delete$/), page.locator('[data-delete]').click()]);
    assert.equal(await page.locator('h1').textContent(), 'Delete “Doomed”?');
    await shot(page, 'delete-confirm');
    assert.equal((await sales().customers.GetCompany({ id })).response.status, 200, 'opening the confirmation deletes nothing');
    await Promise.all([page.waitForURL(/\/records\/companies$/), page.locator('[data-confirm-delete]').click()]);
    assert.equal(await page.locator('.flash').textContent(), 'Deleted the company.');
    assert.equal((await sales().customers.GetCompany({ id })).response.status, 404);
    const gone = await page.goto(`${svc().origin}/records/companies/${id}`);
    assert.equal(gone!.status(), 404);
    problems.length = 0;
    assert.deepEqual(problems, []);
  });

  it('a plain member: private records only for their owner; shared pipelines read-only for their role', async function () {
    this.timeout(60_000);
    const { page, problems } = await as('ada', '/records/companies/new');
    await page.fill('input[name="f.name"]', 'Ada’s secret lead');
    await page.locator('input[name="private"]').check();
    await Promise.all([page.waitForURL(/\/records\/companies\/co_/), page.locator('[data-save]').click()]);
    const secret = page.url().split('/').pop()!;
    assert.match((await page.locator('.lede').textContent())!, /Private company: only you see it/);
    await page.goto(`${svc().origin}/records/companies`);
    assert.equal(await page.locator(`[data-record="/records/companies/${secret}"] .badge`).textContent(), 'private');

    // The owner does not see it, even by its address.
    const owner = await as('olga', '/records/companies');
    assert.equal(await owner.page.locator(`[data-record="/records/companies/${secret}"]`).count(), 0);
    const hidden = await owner.page.goto(`${svc().origin}/records/companies/${secret}`);
    assert.equal(hidden!.status(), 404);
    owner.problems.length = 0;

    // Pipelines: a member reads shared ones, with no Edit; a forged edit is refused in words.
    const pipeline = (await sales().customers.ListSalesPipelines({})).data!.items[0]!;
    await page.goto(`${svc().origin}/records/sales-pipelines/${pipeline.id}`);
    assert.equal(await page.locator('[data-edit]').count(), 0);
    const edit = await page.goto(`${svc().origin}/records/sales-pipelines/${pipeline.id}/edit`);
    assert.equal(edit!.status(), 200);
    await page.fill('input[name="f.name"]', 'Renamed by a member');
    await Promise.all([page.waitForLoadState(), page.locator('[data-save]').click()]);
    assert.match((await page.locator('[data-problem]').textContent())!, /role/i);
    problems.length = 0;
    assert.notEqual((await sales().customers.GetSalesPipeline({ id: pipeline.id })).data!.item.data.name, 'Renamed by a member');
    await fitsPhone(page, 'member-refused');
    assert.deepEqual(problems, []);
  });
});
