/**
 * The audit log page (/settings/audit) in headless Chromium, on both databases: an owner's actions on
 * the Members page (invite, revoke an invitation, role change, disable, enable) and a person joining by
 * invitation appear, newest first and in words, with the CLI's session revoke; the filter by family;
 * paging by "Older entries" (50 a page) reads every entry once; a plain member gets the 403 page and no
 * menu entry; bad query strings are 400 pages; reading changes nothing. Screenshots in test-output/.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { ApplyResult } from '../../server/admin.ts';
import { OPERATOR, recordAudit } from '../../server/audit.ts';
import { listMailbox, readMailbox } from '../../server/mailer/mailbox.ts';
import { revokeSession } from '../../server/signin.ts';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { acme } from '../support/fixtures.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const shots = path.join(root, 'test-output');
const MEMBERS = '/settings/members';
const AUDIT = '/settings/audit';

announceBrowser('the audit log browser test');

for (const database of databases) {
  describe(`the audit log page [${database.name}]`, function () {
    this.timeout(90_000);
    let svc: TestService;
    let ws: ApplyResult;
    let browser: Browser;
    let owner: { context: BrowserContext; page: Page; cookie: string; problems: string[] };
    const contexts: BrowserContext[] = [];

    const row = (page: Page, id: string) => page.locator(`tr[data-member="${id}"]`);
    /** Clicks a button that submits a form and waits for the redirect back. */
    const submit = async (page: Page, button: ReturnType<Page['locator']>) => {
      await Promise.all([page.waitForURL(`${svc.origin}${MEMBERS}`), button.click()]);
      assert.equal(await page.locator('.problem').count(), 0, await page.locator('.problem').allTextContents().then((t) => t.join()));
      svc.clock.advance(1000);
    };
    const whats = async (page: Page) => page.locator('tr[data-entry] td[data-what]').allTextContents();
    const count = async () => Number((await svc.db.sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM audit_log WHERE workspace_id = ?`, [ws.workspace_id]))!.n);

    before(async function () {
      fs.mkdirSync(shots, { recursive: true });
      browser = await launchBrowser(this);
      svc = await startTestService(database.url());
      ws = await svc.apply(acme());
      svc.clock.advance(1000);
      owner = await signedInPage(browser, svc, { workspaceId: ws.workspace_id, memberId: ws.members.olga! }, MEMBERS);
      contexts.push(owner.context);
    });
    after(async () => {
      for (const c of contexts) await c.close().catch(() => undefined);
      await browser?.close();
      await svc?.close();
    });

    it("shows the Members page's actions and a join in words, newest first, with who did them", async () => {
      const { page } = owner;
      await page.fill('#invite-email', 'nina@acme.test');
      await page.selectOption('#invite-role', 'member');
      await submit(page, page.locator('button:has-text("Send invitation")'));
      await page.fill('#invite-email', 'zed@acme.test');
      await page.selectOption('#invite-role', 'admin');
      await submit(page, page.locator('button:has-text("Send invitation")'));
      await submit(page, page.locator('tr[data-invitation]', { hasText: 'zed@acme.test' }).locator('button:has-text("Revoke")'));
      await row(page, ws.members.bob!).locator('select').selectOption('member');
      await submit(page, row(page, ws.members.bob!).locator('button:has-text("Change role")'));
      await submit(page, row(page, ws.members.ada!).locator('button:has-text("Disable")'));
      await submit(page, row(page, ws.members.ada!).locator('button:has-text("Enable")'));

      // Nina joins through the mailed link (read from the development mailbox).
      const [mail] = await listMailbox(svc.db, { workspaceId: ws.workspace_id, to: 'nina@acme.test', limit: 5 });
      const link = /\/signin\/invite\/[A-Za-z0-9_-]{43}/.exec((await readMailbox(svc.db, mail!.id))!.text)![0];
      const context = await browser.newContext({ viewport: { width: 900, height: 700 } });
      contexts.push(context);
      const guest = await context.newPage();
      await guest.goto(`${svc.origin}${link}`);
      await guest.fill('#invite-name', 'Nina New');
      await Promise.all([guest.waitForNavigation(), guest.click('button:has-text("Join Acme")')]);
      svc.clock.advance(1000);
      // The operator ends Nina's session from the CLI.
      const nina = (await svc.db.sql.one<{ id: string }>(`SELECT id FROM members WHERE workspace_id = ? AND email = 'nina@acme.test'`, [ws.workspace_id]))!.id;
      assert.deepEqual(await revokeSession(svc.db, svc.clock, { memberId: nina }), { revoked: 1 });

      const before = await count();
      assert.equal((await page.goto(`${svc.origin}${AUDIT}`))!.status(), 200);
      assert.equal(await count(), before, 'reading changes nothing');
      assert.equal(await page.locator('h1').textContent(), 'Audit log');
      const what = await whats(page);
      assert.deepEqual(what.slice(0, 8), [
        "ended Nina New's one sign-in session",
        'joined as member through an invitation from Olga Owner',
        'enabled Ada Member',
        'disabled Ada Member',
        "changed Bob Admin's role from admin to member",
        'revoked the invitation for zed@acme.test (as admin)',
        'invited zed@acme.test as admin',
        'invited nina@acme.test as member',
      ]);
      assert.match(what.at(-1)!, /^created the workspace “Acme” \(ws_\w+\) with 4 members, 1 site, 1 app and 5 API keys$/);
      const who = await page.locator('tr[data-entry] td[data-who]').allTextContents();
      assert.deepEqual(who.slice(0, 3), ['operator (admin CLI)', 'Nina New (member)', 'Olga Owner (member)']);
      assert.equal(await page.locator('tr[data-entry]').first().locator('[data-subject]').textContent(), `member ${nina}`);
      assert.match((await page.locator('tr[data-entry] time').first().textContent())!, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
      assert.equal(await page.locator('a[rel="next"]').count(), 0, 'one page: no Older entries');
      // No secret, token or link in what the page shows.
      assert.doesNotMatch(await page.content(), /signin\/invite\/|wsk_|wss_/);
      assert.deepEqual(owner.problems, []);
      await page.screenshot({ path: path.join(shots, `audit-1-entries-${database.name}.png`), fullPage: true });

      // Filter by family.
      await page.click('.audit-filter a:has-text("Members")');
      assert.equal(new URL(page.url()).search, '?family=members');
      assert.equal(await page.locator('.audit-filter a[aria-current="page"]').textContent(), 'Members');
      const members = await page.locator('tr[data-entry]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-action')));
      assert.ok(members.length >= 8 && members.every((a) => /^(member|invitation|session)\./.test(a!)), members.join());
      await page.click('.audit-filter a:has-text("Webhooks")');
      assert.equal(await page.locator('[data-empty]').textContent(), 'No entries about webhooks yet.');
      await page.setViewportSize({ width: 390, height: 800 });
      await page.goto(`${svc.origin}${AUDIT}`);
      assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'no horizontal scroll at 390 px');
      await page.screenshot({ path: path.join(shots, `audit-2-phone-${database.name}.png`), fullPage: false });
      await page.setViewportSize({ width: 1100, height: 900 });
    });

    it('pages 50 at a time with "Older entries" (every entry once, in order) and back to the newest', async () => {
      const { page } = owner;
      const at = svc.clock.now();
      // 70 key entries, several sharing a millisecond (the id orders them).
      for (let i = 0; i < 70; i++) {
        await recordAudit(svc.db.sql, {
          workspaceId: ws.workspace_id, actor: OPERATOR, action: 'key.revoked', subject: { type: 'key', id: `ak_page${String(i).padStart(2, '0')}`, label: `Key ${i}` }, at: at + Math.floor(i / 3),
        });
      }
      const total = await count();
      const ids: string[] = [];
      await page.goto(`${svc.origin}${AUDIT}`);
      for (let pages = 1; ; pages++) {
        const shown = await page.locator('tr[data-entry]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-entry')!));
        assert.ok(shown.length <= 50);
        ids.push(...shown);
        if (pages === 1) {
          assert.equal(shown.length, 50);
          assert.equal((await whats(page))[0], 'revoked the API key “Key 69” (ak_page69): it no longer works');
        }
        const older = page.locator('a[rel="next"]');
        if (!(await older.count())) break;
        await Promise.all([page.waitForNavigation(), older.click()]);
        assert.match(new URL(page.url()).search, /^\?before=au_\w+$/);
        assert.equal(await page.locator('a[rel="first"]').count(), 1);
      }
      assert.equal(ids.length, total);
      assert.equal(new Set(ids).size, total, 'no entry twice');
      await page.screenshot({ path: path.join(shots, `audit-3-older-${database.name}.png`), fullPage: true });
      await Promise.all([page.waitForNavigation(), page.click('a[rel="first"]')]);
      assert.equal(new URL(page.url()).pathname + new URL(page.url()).search, AUDIT);

      // Filtered paging keeps the filter.
      await page.goto(`${svc.origin}${AUDIT}?family=keys`);
      assert.equal(await page.locator('tr[data-entry]').count(), 50);
      await Promise.all([page.waitForNavigation(), page.click('a[rel="next"]')]);
      assert.match(new URL(page.url()).search, /^\?family=keys&before=au_\w+$/);
      assert.equal(await page.locator('tr[data-entry]').count(), 20);
    });

    it('a plain member gets the 403 page and no menu entry; bad query strings are 400 pages', async () => {
      const ada = await signedInPage(browser, svc, { workspaceId: ws.workspace_id, memberId: ws.members.ada! }, MEMBERS);
      contexts.push(ada.context);
      assert.equal(await ada.page.locator(`a[href="${AUDIT}"]`).count(), 0, 'no Audit log entry for a member');
      assert.ok((await owner.page.goto(`${svc.origin}${MEMBERS}`)) && (await owner.page.locator(`a[href="${AUDIT}"]`).count()) > 0, 'owners see the entry');
      const refused = await ada.page.goto(`${svc.origin}${AUDIT}`);
      assert.equal(refused!.status(), 403);
      assert.match((await ada.page.textContent('main'))!, /Only owners and admins can read the audit log\./);
      assert.equal(await ada.page.locator('tr[data-entry]').count(), 0);
      await ada.page.screenshot({ path: path.join(shots, `audit-4-member-refused-${database.name}.png`) });

      for (const query of ['?family=nope', '?before=au_nope', '?before=%27%3B--', '?family=keys&before=x']) {
        const res = await fetch(`${svc.origin}${AUDIT}${query}`, { headers: { Cookie: owner.cookie } });
        assert.equal(res.status, 400, query);
        assert.match(await res.text(), /Unknown (filter|position)/);
      }
      // Signed out: the page kit's sign-in answer, never the entries.
      const anonymous = await fetch(`${svc.origin}${AUDIT}`, { redirect: 'manual' });
      assert.notEqual(anonymous.status, 200);
    });
  });
}
