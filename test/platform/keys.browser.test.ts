/**
 * The API keys settings page (handlers/keys/) in headless Chromium, on both databases: the list in words
 * (grants, delegation, last used), creating a key with chosen grants (the secret shown once, copied
 * with the button, then an allowed and a refused call with it through the generated client), replace
 * (both keys work until the old one is revoked), revoke (next call 401), delegation none / selected /
 * all changing what Service-Act-As answers, a plain member's read-only view, and the operator's
 * API-key access off and stopped. Every change is in the audit log with the member as actor.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { AdminError, addToWorkspace, type ApplyResult, setApiKeyAccess } from '../../server/admin.ts';
import { KEY_USAGE_INTERVAL_MS } from '../../server/credentials.ts';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { acme, createPipeline } from '../support/fixtures.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const shots = path.join(root, 'test-output');
const KEYS = '/settings/keys';

announceBrowser('the API keys page browser test');

for (const database of databases) {
  describe(`the API keys page [${database.name}]`, function () {
    this.timeout(90_000);
    let svc: TestService;
    let ws: ApplyResult;
    let browser: Browser;
    let owner: { context: BrowserContext; page: Page; cookie: string; problems: string[] };
    const contexts: BrowserContext[] = [];

    const card = (page: Page, id: string) => page.locator(`article.key[data-key="${id}"]`);
    const open = async (page: Page) => {
      const res = await page.goto(`${svc.origin}${KEYS}`);
      assert.equal(res!.status(), 200);
    };
    /** Submits a form on the page and waits for the redirect back. */
    const submit = async (page: Page, button: string) => {
      await Promise.all([page.waitForURL(`${svc.origin}${KEYS}`), page.locator(button).click()]);
    };
    const audit = (action: string) =>
      svc.db.sql.all<{ actor_type: string; actor_id: string | null; subject_id: string | null; details: string }>(
        `SELECT actor_type, actor_id, subject_id, details FROM audit_log WHERE workspace_id = ? AND action = ? ORDER BY at, id`,
        [ws.workspace_id, action],
      );

    before(async function () {
      fs.mkdirSync(shots, { recursive: true });
      browser = await launchBrowser(this);
      svc = await startTestService(database.url());
      ws = await svc.apply(acme());
      owner = await signedInPage(browser, svc, { workspaceId: ws.workspace_id, memberId: ws.members.olga! }, KEYS);
      await owner.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: svc.origin });
      contexts.push(owner.context);
    });
    after(async () => {
      for (const c of contexts) await c.close().catch(() => undefined);
      await browser?.close();
      await svc?.close();
    });

    it('lists the keys in words with their last use (written at most once a minute), and the sites’ collect keys; never a secret', async () => {
      const { page } = owner;
      assert.equal(await page.locator('article.key').count(), 5);
      const reader = card(page, ws.keys.reader!.id);
      assert.equal((await reader.locator('[data-grants]').textContent())!.trim(), 'Customers — 3 operations: GetSalesPipeline, ListSalesPipelines, UpdateSalesPipeline');
      assert.equal((await reader.locator('[data-resources]').textContent())!.trim(), 'Sales pipelines: read');
      assert.match((await reader.locator('[data-delegation]').textContent())!, /^Acts for no member/);
      assert.equal(await reader.locator('[data-last-used]').textContent(), 'never');
      const ci = card(page, ws.keys.ci!.id);
      assert.match((await ci.locator('[data-grants]').textContent())!, /Customers — all operations \(\d+\)\s*Workspace — all operations/);
      const ciWho = (await ci.locator('[data-delegation]').textContent())!;
      assert.match(ciWho, /^May act for /);
      for (const name of ['Ada Member', 'Olga Owner', 'Max Gone (disabled)']) assert.ok(ciWho.includes(name), ciWho);
      assert.match((await card(page, ws.keys.all!.id).locator('[data-delegation]').textContent())!, /every current and future member/);
      assert.equal(await page.locator(`tr[data-site="${ws.bundles.docs}"] code`).textContent(), ws.collect_keys.docs);
      const html = await page.content();
      for (const k of Object.values(ws.keys)) assert.ok(!html.includes(k.secret), 'a key secret on the page');

      // Last use: written with the first call, not again within the minute, again after it.
      const client = svc.client(ws.keys.reader!.secret);
      assert.equal((await client.customers.ListSalesPipelines({})).response.status, 200);
      await svc.credentials.usageWritten();
      const first = svc.clock.now();
      svc.clock.advance(30_000);
      assert.equal((await client.customers.ListSalesPipelines({})).response.status, 200);
      await svc.credentials.usageWritten();
      const usedAt = async () => Number((await svc.db.sql.one<{ last_used_at: number }>(`SELECT last_used_at FROM api_keys WHERE id = ?`, [ws.keys.reader!.id]))!.last_used_at);
      assert.equal(await usedAt(), first);
      svc.clock.advance(KEY_USAGE_INTERVAL_MS);
      assert.equal((await client.customers.ListSalesPipelines({})).response.status, 200);
      await svc.credentials.usageWritten();
      assert.equal(await usedAt(), svc.clock.now());
      await open(page);
      assert.equal(await card(page, ws.keys.reader!.id).locator('[data-last-used]').textContent(), new Date(svc.clock.now()).toISOString().slice(0, 19).replace('T', ' ') + ' UTC');
      await page.screenshot({ path: path.join(shots, `keys-1-list-${database.name}.png`), fullPage: true });
      // A phone: no sideways scrolling, with the create form's operations open.
      await page.setViewportSize({ width: 390, height: 844 });
      for (const details of await page.locator('form.create-key details').all()) await details.locator('summary').click();
      assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'no sideways scrolling at 390 px');
      await page.screenshot({ path: path.join(shots, `keys-1-phone-${database.name}.png`) });
      await page.setViewportSize({ width: 1100, height: 900 });
      assert.deepEqual(owner.problems, []);
    });

    let created = { id: '', secret: '' };
    it('creates a key with chosen grants: the secret is shown once with a copy button, allows what was chosen and nothing else', async () => {
      const { page } = owner;
      await open(page);
      // Refusals first: no name, then no operation.
      await page.fill('#key-name', 'Pipeline reader');
      await submit(page, 'button:has-text("Create key")');
      assert.match((await page.locator('.problem').textContent())!, /Choose at least one operation/);

      await page.fill('#key-name', 'Pipeline reader');
      const customers = page.locator('fieldset[data-namespace="customers"]');
      await customers.locator('input[value="some"]').check();
      await customers.locator('summary').click();
      await customers.locator('input[value="customers.ListSalesPipelines"]').check();
      await page.locator('fieldset[data-namespace="workspace"] input[value="all"]').check();
      await page.locator('tr[data-resource="core:SalesPipeline"] input[value="core:SalesPipeline=read"]').check();
      await submit(page, 'button:has-text("Create key")');
      assert.match((await page.locator('.flash').textContent())!, /Created the key Pipeline reader \(ak_/);
      const secret = (await page.locator('#new-secret').textContent())!.trim();
      assert.match(secret, /^wso_[0-9a-z]{24}_[A-Za-z0-9_-]{43}$/);
      const id = (await page.locator('[data-new-secret] h2 code').textContent())!.trim();
      created = { id, secret };
      await page.locator('button[data-copy="new-secret"]').click();
      await page.locator('button[data-copy="new-secret"]:text-is("Copied")').waitFor({ timeout: 5000 });
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);
      await page.screenshot({ path: path.join(shots, `keys-2-secret-${database.name}.png`), fullPage: true });

      const row = await svc.db.sql.one<{ secret_hash: string; created_by: string; operations: string; resources: string }>(`SELECT * FROM api_keys WHERE id = ?`, [id]);
      assert.ok(!row!.secret_hash.includes(secret.slice(30)));
      assert.equal(row!.created_by, ws.members.olga);
      assert.ok((JSON.parse(row!.operations) as string[]).includes('workspace.ListBundles'), 'namespace grant stored expanded');
      assert.deepEqual(JSON.parse(row!.resources), { 'core:SalesPipeline': ['read'] });
      assert.match((await card(page, id).locator('[data-grants]').textContent())!, /Customers — 1 operation: ListSalesPipelines\s*Workspace — all operations/);

      const client = svc.client(secret);
      assert.equal((await client.customers.ListSalesPipelines({})).response.status, 200);
      assert.equal((await client.workspace.ListBundles({})).response.status, 200);
      const refused = await client.customers.CreateSalesPipeline(createPipeline());
      assert.equal(refused.response.status, 403);
      assert.match(refused.error!.message, /not granted customers\.CreateSalesPipeline/);

      // Shown once: a reload (or Back) shows it no more.
      await page.reload();
      assert.equal(await page.locator('#new-secret').count(), 0);
      assert.ok(!(await page.content()).includes(secret));
      const [entry] = await audit('key.created').then((rows) => rows.filter((r) => r.subject_id === id));
      assert.equal(entry!.actor_type, 'member');
      assert.equal(entry!.actor_id, ws.members.olga);
      assert.ok(!entry!.details.includes(secret));
    });

    it('replaces a key (both work until the old one is revoked) and revokes (the next call is 401)', async () => {
      const { page } = owner;
      await open(page);
      await submit(page, `article.key[data-key="${created.id}"] button[data-replace]`);
      const fresh = (await page.locator('#new-secret').textContent())!.trim();
      const freshId = (await page.locator('[data-new-secret] h2 code').textContent())!.trim();
      assert.match((await page.locator('[data-new-secret]').textContent())!, /Both keys work until you revoke the old one/);
      assert.match((await card(page, created.id).locator('[data-pair]').textContent())!, new RegExp(`replaced by Pipeline reader ${freshId}: both work until this one is revoked`));
      assert.match((await card(page, freshId).locator('[data-pair]').textContent())!, /both keys work until you revoke the old one/);
      await page.screenshot({ path: path.join(shots, `keys-3-replaced-${database.name}.png`), fullPage: true });
      const old = svc.client(created.secret);
      const next = svc.client(fresh);
      assert.equal((await old.customers.ListSalesPipelines({})).response.status, 200);
      assert.equal((await next.customers.ListSalesPipelines({})).response.status, 200);

      await submit(page, `article.key[data-key="${created.id}"] button[data-revoke]`);
      assert.match((await page.locator('.flash').textContent())!, /Revoked the key/);
      assert.equal((await old.customers.ListSalesPipelines({})).response.status, 401);
      assert.equal((await next.customers.ListSalesPipelines({})).response.status, 200);
      assert.equal(await page.locator(`details.revoked-keys article.key[data-key="${created.id}"]`).count(), 1);
      assert.equal(await card(page, freshId).locator('[data-pair]').count(), 0);
      const [replaced] = await audit('key.replaced');
      assert.equal(replaced!.subject_id, freshId);
      assert.equal(JSON.parse(replaced!.details).replaces, created.id);
      assert.equal((await audit('key.revoked')).at(-1)!.subject_id, created.id);
    });

    it('delegation none, selected and all change what Service-Act-As answers', async () => {
      const { page } = owner;
      const id = ws.keys.reader!.id;
      const asAda = svc.client(ws.keys.reader!.secret, ws.members.ada!);
      const asOlga = svc.client(ws.keys.reader!.secret, ws.members.olga!);
      assert.equal((await asAda.customers.ListSalesPipelines({})).response.status, 403);
      const choose = async (mode: string, members: string[]) => {
        svc.clock.advance(1000);
        await open(page);
        const form = card(page, id).locator('details.delegation-form');
        await form.locator('summary').click();
        await form.locator(`input[name="delegation"][value="${mode}"]`).check();
        for (const box of await form.locator('input[name="delegate"]').all()) await box.setChecked(members.includes((await box.getAttribute('value'))!));
        await submit(page, `article.key[data-key="${id}"] button:has-text("Save whom it acts for")`);
      };
      await choose('selected', [ws.members.ada!]);
      assert.match((await page.locator('.flash').textContent())!, /Changed whom the key/);
      assert.match((await card(page, id).locator('[data-delegation]').textContent())!, /^May act for Ada Member:/);
      assert.equal((await asAda.customers.ListSalesPipelines({})).response.status, 200);
      assert.equal((await asOlga.customers.ListSalesPipelines({})).response.status, 403);
      await choose('all', []);
      assert.equal((await asOlga.customers.ListSalesPipelines({})).response.status, 200);
      await choose('selected', []);
      assert.match((await page.locator('.problem').textContent())!, /Choose at least one member/);
      await choose('none', []);
      assert.equal((await asAda.customers.ListSalesPipelines({})).response.status, 403);
      const changes = (await audit('key.delegation_changed')).map((r) => JSON.parse(r.details) as { before: unknown; after: unknown });
      assert.deepEqual(changes.map((c) => [c.before, c.after]), [['none', [ws.members.ada]], [[ws.members.ada], 'all'], ['all', 'none']]);
    });

    it('a plain member reads the page without forms; their posts are refused', async () => {
      const ada = await signedInPage(browser, svc, { workspaceId: ws.workspace_id, memberId: ws.members.ada! }, KEYS);
      contexts.push(ada.context);
      const { page } = ada;
      assert.equal(await page.locator('main form').count(), 0);
      assert.match((await page.locator('p.info').textContent())!, /Owners and admins create, replace and revoke them/);
      assert.ok((await page.locator('article.key').count()) >= 5);
      await page.screenshot({ path: path.join(shots, `keys-4-member-${database.name}.png`), fullPage: true });
      const csrf = await owner.page.locator('input[name="_csrf"]').first().getAttribute('value');
      const res = await page.request.post(`${svc.origin}${KEYS}/revoke`, { form: { _csrf: csrf ?? '', key: ws.keys.ci!.id }, headers: { Origin: svc.origin }, maxRedirects: 0 });
      assert.equal(res.status(), 403);
      assert.equal((await svc.db.sql.one<{ revoked_at: number | null }>(`SELECT revoked_at FROM api_keys WHERE id = ?`, [ws.keys.ci!.id]))!.revoked_at, null);
      assert.deepEqual(ada.problems, []);
    });

    it('API keys off: no key can be made (page and CLI functions), existing keys work; stopped: existing keys are refused with 403 until on again', async () => {
      const { page } = owner;
      const ci = svc.client(ws.keys.ci!.secret);
      await setApiKeyAccess(svc.db, svc.clock, ws.workspace_id, 'off');
      await open(page);
      assert.match((await page.locator('[data-access="off"]').textContent())!, /The operator has not turned API keys on for this workspace/);
      assert.equal(await page.locator('form.create-key').count(), 0);
      assert.equal(await page.locator('button[data-replace]').count(), 0);
      await page.screenshot({ path: path.join(shots, `keys-5-off-${database.name}.png`), fullPage: true });
      await assert.rejects(addToWorkspace(svc.db, svc.clock, ws.workspace_id, { keys: { k: { name: 'x', operations: ['customers.*'] } } }), (err: Error) => err instanceof AdminError && /not turned API keys on/.test(err.message));
      assert.equal((await ci.customers.ListSalesPipelines({})).response.status, 200);
      // A replacement is a new key: refused as well (a post of a form from before the change).
      const csrf = await page.locator('input[name="_csrf"]').first().getAttribute('value');
      const posted = await page.request.post(`${svc.origin}${KEYS}/replace`, { form: { _csrf: csrf ?? '', key: ws.keys.ci!.id }, headers: { Origin: svc.origin }, maxRedirects: 0 });
      assert.equal(posted.status(), 303);
      await open(page);
      assert.match((await page.locator('.problem').textContent())!, /not turned API keys on/);

      svc.clock.advance(1000);
      await setApiKeyAccess(svc.db, svc.clock, ws.workspace_id, 'stopped');
      const stopped = await ci.customers.ListSalesPipelines({});
      assert.equal(stopped.response.status, 403);
      assert.equal(stopped.error!.error, 'forbidden');
      assert.match(stopped.error!.message, /API keys are stopped for this workspace/);
      assert.equal((await ci.listOperations()).response.status, 403);
      await open(page);
      assert.match((await page.locator('[data-access="stopped"]').textContent())!, /every key is refused/);

      svc.clock.advance(1000);
      await setApiKeyAccess(svc.db, svc.clock, ws.workspace_id, 'on');
      assert.equal((await ci.customers.ListSalesPipelines({})).response.status, 200);
      const changes = (await audit('workspace.api_keys_changed')).map((r) => JSON.parse(r.details) as { before: string; after: string });
      assert.deepEqual(changes.map((c) => `${c.before}->${c.after}`), ['on->off', 'off->stopped', 'stopped->on']);
      assert.deepEqual(owner.problems, []);
    });
  });
}
