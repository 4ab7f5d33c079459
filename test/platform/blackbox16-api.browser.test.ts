/**
 * Black-box checks of issue 16 as the README promises it, on both databases: an API caller and the sign-in
 * limits: errors that explain, the reference page, the sign-in form's rate limit, an expired sign-in link,
 * and API keys turned off, stopped and on again by the operator. A readable refusal, never a 500, never a
 * change on GET. Split from one suite; the shared setup is blackbox16Kit.ts. Screenshots: test-
 * output/bb16-*.png.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import type { ApplyResult } from '../../server/admin.ts';
import { announceBrowser } from '../support/browser.ts';
import { createPipeline } from '../support/fixtures.ts';
import { databases, type TestService } from '../support/service.ts';
import type { MailServer } from '../support/smtp.ts';
import { root, shots, run, mailsFor, blackbox16Service } from './blackbox16Kit.ts';

announceBrowser('the issue 16 black-box browser test (api)');

for (const database of databases) {
  describe(`issue 16, black box [${database.name}]`, function () {
    this.timeout(120_000);
    const kit = blackbox16Service(database);
    const { tokensSeen, newPage, signInByMail, callWith, countKeys } = kit;
    let mail: MailServer;
    let svc: TestService;
    let ws: ApplyResult;
    let other: ApplyResult;
    before(() => ({ mail, svc, ws, other } = kit.state()));

    it('API errors explain: unknown field with a suggestion, invalid JSON with where, missing Idempotency-Key, no /v1 prefix, long enums', async () => {
      const key = ws.keys.sales!.secret;
      const unknown = await callWith(key, 'customers.ListDeals', { limt: 10 });
      assert.equal(unknown.status, 400);
      assert.match(((await unknown.json()) as { message: string }).message, /limt.*did you mean `limit`/);
      const bad = await fetch(`${svc.baseUrl}/operations/customers.ListDeals`, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: '{"limit": 10,,}' });
      assert.equal(bad.status, 400);
      const badBody = (await bad.json()) as { error: string; message: string; request_id: string };
      assert.equal(badBody.error, 'invalid_json');
      assert.match(badBody.message, /position|line|column|char/i);
      assert.equal(badBody.request_id, bad.headers.get('request-id'));
      const noIdem = await callWith(key, 'customers.CreateCompany', { data: { name: 'Initech', domain: 'initech.example' } });
      assert.equal(noIdem.status, 400);
      assert.match(((await noIdem.json()) as { message: string }).message, /Idempotency-Key/);
      const noPrefix = await fetch(`${svc.origin}/operations/workspace.ListBundles`, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: '{}' });
      assert.equal(noPrefix.status, 404);
      assert.match(((await noPrefix.json()) as { message: string }).message, /did you mean \/v1\/operations\/workspace\.ListBundles/);
      const pl = ((await (await callWith(key, 'customers.CreateSalesPipeline', createPipeline('Enterprise'), { 'Idempotency-Key': 'bb16-pl-1' })).json()) as { item: { id: string } }).item;
      const deal = await callWith(key, 'customers.CreateDeal', { data: { name: 'D', pipeline_id: pl.id, stage_id: 'lead', amount: { amount: '10', currency: 'eur' } } }, { 'Idempotency-Key': 'bb16-deal-1' });
      assert.equal(deal.status, 400);
      const dealMsg = ((await deal.json()) as { message: string }).message;
      assert.match(dealMsg, /ISO 4217/);
      assert.match(dealMsg, /did you mean "EUR"/);
      assert.ok(dealMsg.length < 400, `the enum message is long: ${dealMsg.length}`);
    });

    it('the reference page: search, samples, the error table; no Authorize, no internal words', async () => {
      const { page } = await newPage();
      const problems: string[] = [];
      page.on('pageerror', (e) => problems.push(e.message));
      await page.goto(`${svc.origin}/docs`);
      await page.waitForSelector('[role="search"] input, input[placeholder*="Search" i]', { timeout: 30_000 });
      const text = (await page.textContent('body'))!;
      assert.doesNotMatch(text, /Authorize/);
      assert.doesNotMatch(text, /x-service|Dredd|generator/);
      assert.match(text, /Guides|Getting started/i);
      const search = page.locator('[role="search"] input, input[placeholder*="Search" i]').first();
      await search.fill('ListDeals');
      await page.waitForSelector('[data-role="search:result"], [role="search"] li, .search-results', { timeout: 15_000 }).catch(() => undefined);
      await page.screenshot({ path: path.join(shots, `bb16-docs-search-${database.name}.png`) });
      const json = (await (await fetch(`${svc.origin}/docs/reference.json`)).text());
      assert.doesNotMatch(json, /x-service|Dredd|generator/);
      assert.match(json, /curl/);
      assert.deepEqual(problems, []);
    });

    it('the sign-in form is limited to 5 mails an hour per address, with the same answer; an hour later it mails again', async () => {
      const email = 'olga@globex.test';
      const ask = async () => {
        const { page } = await newPage();
        await page.goto(`${svc.origin}/signin`);
        await page.fill('#signin-email', email);
        const [res] = await Promise.all([page.waitForNavigation(), page.click('button:has-text("Send me a sign-in link")')]);
        assert.ok(res!.status() < 500);
        assert.match((await page.textContent('main'))!, /If that address belongs to a member, a sign-in link is on its way/);
      };
      for (let i = 0; i < 6; i++) await ask();
      await mailsFor(mail, email, 5);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(mail.to(email).length, 5);
      svc.clock.advance(61 * 60_000);
      await ask();
      await mailsFor(mail, email, 6);
    });
    it('an expired sign-in link is 410 and points to /signin, not to a command', async () => {
      const email = 'ada@globex.test';
      const { page } = await newPage();
      await page.goto(`${svc.origin}/signin`);
      await page.fill('#signin-email', email);
      await Promise.all([page.waitForNavigation(), page.click('button:has-text("Send me a sign-in link")')]);
      const [received] = await mailsFor(mail, email, 1);
      const token = /\/signin\/([A-Za-z0-9_-]{20,})/.exec(received!.mail.text!)![1]!;
      tokensSeen.push(token);
      svc.clock.advance(16 * 60_000);
      const res = await page.goto(`${svc.origin}/signin/${token}`);
      assert.equal(res!.status(), 410);
      assert.ok(await page.locator('a[href^="/signin"]').count());
      assert.doesNotMatch((await page.textContent('body'))!, /npm run/);
    });

    it('API keys turned off by the operator: the page says so and makes no key, existing keys work; stopped: they are refused; on again: all back', async () => {
      const bob = await signInByMail('bob@globex.test', '/settings/keys');
      const tsx = path.join(root, 'node_modules/.bin/tsx');
      const cli = (mode: string) => run(tsx, [path.join(root, 'scripts/admin.ts'), 'workspace', 'api-keys', '--workspace', other.workspace_id, mode], { env: { ...process.env, DATABASE_URL: svc.databaseUrl }, cwd: root });
      const before = await countKeys(other.workspace_id);
      await cli('--off');
      await bob.page.goto(`${svc.origin}/settings/keys`);
      assert.match((await bob.page.textContent('main'))!, /operator has not turned API keys on for this workspace/);
      assert.equal(await bob.page.locator('form.create-key').count(), 0);
      const csrf = (await bob.page.locator('input[name="_csrf"]').first().getAttribute('value'))!;
      const made = await bob.page.request.post(`${svc.origin}/settings/keys/create`, { form: { _csrf: csrf, name: 'x', ns_workspace: 'all', delegation: 'none' }, headers: { Origin: svc.origin }, maxRedirects: 0 });
      assert.ok(made.status() < 500);
      assert.equal(await countKeys(other.workspace_id), before);
      assert.equal((await callWith(other.keys.ci!.secret, 'customers.ListSalesPipelines', {})).status, 200);
      await cli('--stop');
      const stopped = await callWith(other.keys.ci!.secret, 'customers.ListSalesPipelines', {});
      assert.equal(stopped.status, 403);
      assert.match(((await stopped.json()) as { message: string }).message, /API keys are stopped for this workspace/);
      await cli('--on');
      assert.equal((await callWith(other.keys.ci!.secret, 'customers.ListSalesPipelines', {})).status, 200);
      await bob.page.goto(`${svc.origin}/settings/keys`);
      assert.equal(await bob.page.locator('form.create-key').count(), 1);
      const audit = await svc.db.sql.all<{ action: string }>(`SELECT action FROM audit_log WHERE workspace_id = ? AND action = 'workspace.api_keys_changed'`, [other.workspace_id]);
      assert.equal(audit.length, 3);
    });
  });
}
