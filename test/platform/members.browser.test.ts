/**
 * The Members settings page (handlers/members/) in headless Chromium, on both databases: an owner invites
 * a person (the mail read from a real SMTP server started here), the person opens the link (a GET or
 * HEAD of it changes nothing), joins with their name and lands signed in; a role change and a disable
 * end only those members' sessions; the refusals (last owner, oneself, an admin against an owner); a
 * plain member reads the page without forms; a revoked, used or expired invitation's link is 410.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { addToWorkspace, type ApplyResult } from '../../server/admin.ts';
import { mailConfigFromEnv } from '../../server/mailer.ts';
import { createSigninLink } from '../../server/signin.ts';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { acme } from '../support/fixtures.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { type MailServer, startMailServer } from '../support/smtp.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const shots = path.join(root, 'test-output');
const PUBLIC = 'https://ops.acme.example';
const MEMBERS = '/settings/members';
const DAY = 86_400_000;

announceBrowser('the members page browser test');

/** Waits (real time) until `address` has received `count` mails. */
async function mailsFor(mail: MailServer, address: string, count: number) {
  const got = () => mail.mails.filter((m) => m.to.some((a) => a.toLowerCase() === address.toLowerCase()));
  for (let i = 0; i < 200 && got().length < count; i++) await new Promise((r) => setTimeout(r, 25));
  assert.equal(got().length, count, `${address} received ${got().length} mails, expected ${count}`);
  return got();
}

/** The invitation link path in a mail's text, after the checked public origin. */
function inviteLink(text: string): string {
  const m = /(\S+)\/signin\/invite\/([A-Za-z0-9_-]{43})/.exec(text);
  assert.ok(m, 'no invitation link in the mail');
  assert.equal(m[1], PUBLIC);
  return `/signin/invite/${m[2]}`;
}

for (const database of databases) {
  describe(`the members page [${database.name}]`, function () {
    this.timeout(90_000);
    let mail: MailServer;
    let svc: TestService;
    let ws: ApplyResult;
    let browser: Browser;
    let owner: { context: BrowserContext; page: Page; cookie: string; problems: string[] };
    const contexts: BrowserContext[] = [];
    const tokens: string[] = [];
    let nina = '';
    let ninaCookie = '';

    /** A session cookie for a member (a one-time link opened outside the browser). */
    const sessionOf = async (memberId: string) => {
      const { url } = await createSigninLink(svc.db, svc.clock, { workspaceId: ws.workspace_id, memberId, baseUrl: svc.origin });
      const res = await fetch(url, { redirect: 'manual' });
      assert.equal(res.status, 303);
      return res.headers.get('set-cookie')!.split(';')[0]!;
    };
    const statusWith = async (cookie: string) => (await fetch(`${svc.origin}${MEMBERS}`, { headers: { Cookie: cookie } })).status;
    /** Posts one of the page's forms as the browser would (its CSRF field, the context's cookies, same origin). */
    const post = async (page: Page, action: string, fields: Record<string, string>) => {
      await page.goto(`${svc.origin}${MEMBERS}`);
      const csrf = await page.locator('input[name="_csrf"]').first().getAttribute('value');
      const res = await page.request.post(`${svc.origin}${MEMBERS}/${action}`, { form: { _csrf: csrf ?? '', ...fields }, headers: { Origin: svc.origin }, maxRedirects: 0 });
      return res.status();
    };
    const shown = async (page: Page) => {
      await page.goto(`${svc.origin}${MEMBERS}`);
      return { flash: (await page.locator('.flash').allTextContents()).join(' '), problem: (await page.locator('.problem').allTextContents()).join(' ') };
    };
    const row = (page: Page, id: string) => page.locator(`tr[data-member="${id}"]`);
    const member = (id: string) => svc.db.sql.one<{ role: string; disabled_at: number | null; name: string; email: string }>(`SELECT * FROM members WHERE id = ?`, [id]);

    before(async function () {
      fs.mkdirSync(shots, { recursive: true });
      browser = await launchBrowser(this);
      mail = await startMailServer();
      svc = await startTestService(database.url(), { mail: mailConfigFromEnv({ SMTP_URL: mail.url, MAIL_FROM: 'Acme Operations <ops@acme.example>' }), publicUrl: PUBLIC });
      ws = await svc.apply(acme());
      owner = await signedInPage(browser, svc, { workspaceId: ws.workspace_id, memberId: ws.members.olga! }, MEMBERS);
      contexts.push(owner.context);
    });
    after(async () => {
      for (const c of contexts) await c.close().catch(() => undefined);
      await browser?.close();
      await svc?.close();
      await mail?.close();
    });

    it('an owner invites a person by mail; opening the link changes nothing; the person joins with their name and lands signed in; the link then is 410', async () => {
      const { page } = owner;
      assert.equal(new URL(page.url()).pathname, MEMBERS);
      assert.deepEqual(await page.locator('.topbar nav a[aria-current="page"]').allTextContents(), ['Members']);
      assert.equal(await page.locator('tr[data-member]').count(), 4);
      assert.equal(await row(page, ws.members.max!).locator('[data-state]').textContent(), 'disabled');
      await page.fill('#invite-email', 'nina@acme.test');
      await page.selectOption('#invite-role', 'member');
      await Promise.all([page.waitForURL(`${svc.origin}${MEMBERS}`), page.click('button:has-text("Send invitation")')]);
      assert.match((await page.locator('.flash').textContent())!, /Invited nina@acme\.test as member/);
      assert.match((await page.locator('tr[data-invitation]').textContent())!, /nina@acme\.test\s*member\s*Olga Owner/);
      await page.screenshot({ path: path.join(shots, `members-1-invited-${database.name}.png`), fullPage: true });

      const [received] = await mailsFor(mail, 'nina@acme.test', 1);
      assert.equal(received!.mail.subject, 'Olga Owner invites you to Acme');
      assert.match(received!.mail.text!, /invites you to join the workspace Acme as member/);
      const link = inviteLink(received!.mail.text!);
      tokens.push(link.slice('/signin/invite/'.length));
      assert.ok((received!.mail.html as string).includes(`${PUBLIC}${link}`));

      // Mail scanners and previews: HEAD and GET use nothing up.
      assert.equal((await fetch(`${svc.origin}${link}`, { method: 'HEAD' })).status, 200);
      const preview = await fetch(`${svc.origin}${link}`);
      assert.equal(preview.status, 200);
      assert.match(await preview.text(), /Join Acme/);
      const open = await svc.db.sql.all<{ used_at: number | null }>(`SELECT used_at FROM member_invitations WHERE email = 'nina@acme.test'`);
      assert.deepEqual(open.map((r) => r.used_at), [null]);

      const context = await browser.newContext({ viewport: { width: 900, height: 700 }, deviceScaleFactor: 1 });
      contexts.push(context);
      const guest = await context.newPage();
      const problems: string[] = [];
      guest.on('pageerror', (err) => problems.push(err.message));
      assert.equal((await guest.goto(`${svc.origin}${link}`))!.status(), 200);
      assert.match((await guest.textContent('main'))!, /Olga Owner invites nina@acme\.test to the workspace Acme as member/);
      await guest.fill('#invite-name', 'Nina New');
      await guest.screenshot({ path: path.join(shots, `members-2-join-${database.name}.png`) });
      const [landed] = await Promise.all([guest.waitForNavigation(), guest.click('button:has-text("Join Acme")')]);
      assert.equal(landed!.status(), 200);
      assert.equal(new URL(guest.url()).pathname, '/dashboard');
      assert.equal(await guest.locator('.topbar .who .name').textContent(), 'Nina New');
      await guest.screenshot({ path: path.join(shots, `members-3-joined-${database.name}.png`) });
      const row_ = await svc.db.sql.one<{ id: string; role: string; name: string }>(`SELECT id, role, name FROM members WHERE workspace_id = ? AND email = 'nina@acme.test'`, [ws.workspace_id]);
      assert.equal(row_!.role, 'member');
      nina = row_!.id;
      ninaCookie = `wso_session=${(await context.cookies()).find((c) => c.name === 'wso_session')!.value}`;
      assert.deepEqual(problems, []);

      const used = await (await browser.newContext()).newPage();
      contexts.push(used.context());
      assert.equal((await used.goto(`${svc.origin}${link}`))!.status(), 410);
      assert.equal(await used.getAttribute('main a:has-text("Sign in")', 'href'), '/signin');
      await used.screenshot({ path: path.join(shots, `members-4-used-${database.name}.png`) });
      await page.goto(`${svc.origin}${MEMBERS}`);
      assert.equal(await page.locator('tr[data-invitation]').count(), 0);
    });

    it('inviting an address again replaces its open invitation (the old link 410); an address added meanwhile answers 409 and creates nobody', async () => {
      const { page } = owner;
      const invite = async (email: string, role: string) => {
        await page.goto(`${svc.origin}${MEMBERS}`);
        await page.fill('#invite-email', email);
        await page.selectOption('#invite-role', role);
        await Promise.all([page.waitForURL(`${svc.origin}${MEMBERS}`), page.click('button:has-text("Send invitation")')]);
      };
      await invite('pia@acme.test', 'member');
      await invite('pia@acme.test', 'admin');
      const [first, second] = (await mailsFor(mail, 'pia@acme.test', 2)).map((m) => inviteLink(m.mail.text!));
      tokens.push(first!.slice(15), second!.slice(15));
      const join = async (link: string) => {
        const guest = await (await browser.newContext()).newPage();
        contexts.push(guest.context());
        await guest.goto(`${svc.origin}${link}`);
        await guest.fill('#invite-name', 'Pia');
        const [res] = await Promise.all([guest.waitForNavigation(), guest.click('button.primary')]);
        return { status: res!.status(), text: res!.status() === 200 ? guest.url() : (await guest.textContent('main'))!, guest };
      };
      // The second invitation (any case of the address) replaced the first: one open invitation, the admin one.
      assert.equal(await page.locator('tr[data-invitation]').count(), 1);
      assert.match((await page.locator('.flash').textContent())!, /It replaces the earlier open invitation of this address \(pia@acme\.test as member\)/);
      assert.equal((await fetch(`${svc.origin}${first}`)).status, 410);
      const joined = await join(second!);
      assert.equal(joined.status, 200);
      assert.equal(new URL(joined.text).pathname, '/dashboard');
      assert.equal((await svc.db.sql.one<{ role: string }>(`SELECT role FROM members WHERE email = 'pia@acme.test' AND workspace_id = ?`, [ws.workspace_id]))!.role, 'admin');
      await page.goto(`${svc.origin}${MEMBERS}`);
      assert.equal(await page.locator('tr[data-invitation]').count(), 0);

      await invite('quinn@acme.test', 'member');
      const link = inviteLink((await mailsFor(mail, 'quinn@acme.test', 1))[0]!.mail.text!);
      tokens.push(link.slice(15));
      // An operator adds the address meanwhile (the admin CLI).
      await addToWorkspace(svc.db, svc.clock, ws.workspace_id, { members: { quinn: { name: 'Quinn', email: 'Quinn@acme.test', role: 'member' } } });
      const again = await join(link);
      assert.equal(again.status, 409);
      assert.match(again.text, /quinn@acme\.test already is a member of Acme/);
      await again.guest.screenshot({ path: path.join(shots, `members-5-already-${database.name}.png`) });
      assert.equal((await svc.db.sql.all(`SELECT id FROM members WHERE LOWER(email) = 'quinn@acme.test'`)).length, 1);
      // Inviting a member's address is refused on the page.
      await page.goto(`${svc.origin}${MEMBERS}`);
      await page.fill('#invite-email', 'PIA@acme.test');
      await Promise.all([page.waitForURL(`${svc.origin}${MEMBERS}`), page.click('button:has-text("Send invitation")')]);
      assert.match((await page.locator('.problem').textContent())!, /already a member/);
    });

    it('a role change and a disable end only those members’ sessions; the owner’s and the others’ keep working', async () => {
      const { page } = owner;
      const ada = await sessionOf(ws.members.ada!);
      const ada2 = await sessionOf(ws.members.ada!);
      const bob = await sessionOf(ws.members.bob!);
      for (const c of [ada, ada2, bob, ninaCookie, owner.cookie]) assert.equal(await statusWith(c), 200);

      await page.goto(`${svc.origin}${MEMBERS}`);
      await row(page, ws.members.ada!).locator('select[name="role"]').selectOption('admin');
      await Promise.all([page.waitForURL(`${svc.origin}${MEMBERS}`), row(page, ws.members.ada!).locator('button:has-text("Change role")').click()]);
      assert.match((await page.locator('.flash').textContent())!, /Ada Member is now admin; their sign-in sessions have ended/);
      assert.equal(await row(page, ws.members.ada!).locator('[data-role]').textContent(), 'admin');
      assert.equal(await statusWith(ada), 401);
      assert.equal(await statusWith(ada2), 401);
      for (const c of [bob, ninaCookie, owner.cookie]) assert.equal(await statusWith(c), 200);

      await Promise.all([page.waitForURL(`${svc.origin}${MEMBERS}`), row(page, ws.members.bob!).locator('button:has-text("Disable")').click()]);
      assert.match((await page.locator('.flash').textContent())!, /Bob Admin is disabled/);
      assert.equal(await row(page, ws.members.bob!).locator('[data-state]').textContent(), 'disabled');
      await page.screenshot({ path: path.join(shots, `members-6-changed-${database.name}.png`), fullPage: true });
      assert.equal(await statusWith(bob), 401);
      for (const c of [ninaCookie, owner.cookie]) assert.equal(await statusWith(c), 200);
      assert.equal((await member(ws.members.bob!))!.disabled_at !== null, true);

      // Enabled again: a new sign-in works, the ended session stays ended.
      await Promise.all([page.waitForURL(`${svc.origin}${MEMBERS}`), row(page, ws.members.bob!).locator('button:has-text("Enable")').click()]);
      assert.match((await page.locator('.flash').textContent())!, /Bob Admin is active again/);
      assert.equal(await statusWith(bob), 401);
      assert.equal(await statusWith(await sessionOf(ws.members.bob!)), 200);
      assert.deepEqual(owner.problems, []);
    });

    it('refuses removing the last active owner, changing oneself, and an admin touching an owner', async () => {
      const { page } = owner;
      // Olga is the only owner: her own row has no forms, and a forged post is refused.
      assert.equal(await row(page, ws.members.olga!).locator('form').count(), 0);
      assert.equal(await post(page, 'role', { member: ws.members.olga!, role: 'admin' }), 303);
      assert.match((await shown(page)).problem, /must keep at least one active owner/);
      assert.equal(await post(page, 'state', { member: ws.members.olga!, state: 'disabled' }), 303);
      assert.match((await shown(page)).problem, /must keep at least one active owner/);
      await page.screenshot({ path: path.join(shots, `members-7-last-owner-${database.name}.png`), fullPage: true });
      assert.equal((await member(ws.members.olga!))!.role, 'owner');

      // Ada is an admin now: no forms on the owner's row nor her own; posts are refused.
      const ada = await signedInPage(browser, svc, { workspaceId: ws.workspace_id, memberId: ws.members.ada! }, MEMBERS);
      contexts.push(ada.context);
      assert.equal(await row(ada.page, ws.members.olga!).locator('form').count(), 0);
      assert.equal(await row(ada.page, ws.members.ada!).locator('form').count(), 0);
      assert.equal(await row(ada.page, nina).locator('form').count(), 2);
      assert.deepEqual(await ada.page.locator('#invite-role option').allTextContents(), ['admin', 'member']);
      await ada.page.screenshot({ path: path.join(shots, `members-8-admin-${database.name}.png`), fullPage: true });
      assert.equal(await post(ada.page, 'role', { member: ws.members.olga!, role: 'member' }), 303);
      assert.match((await shown(ada.page)).problem, /Only an owner may change an owner/);
      assert.equal(await post(ada.page, 'state', { member: ws.members.olga!, state: 'disabled' }), 303);
      assert.match((await shown(ada.page)).problem, /Only an owner may change an owner/);
      assert.equal(await post(ada.page, 'role', { member: ws.members.ada!, role: 'member' }), 303);
      assert.match((await shown(ada.page)).problem, /cannot change or disable yourself/);
      assert.equal(await post(ada.page, 'state', { member: ws.members.ada!, state: 'disabled' }), 303);
      assert.match((await shown(ada.page)).problem, /cannot change or disable yourself/);
      assert.equal(await post(ada.page, 'role', { member: nina, role: 'owner' }), 303);
      assert.match((await shown(ada.page)).problem, /As admin you may give the roles admin, member/);
      assert.equal(await post(ada.page, 'invite', { email: 'quinn@acme.test', role: 'owner' }), 303);
      assert.match((await shown(ada.page)).problem, /As admin you may invite as admin or member/);
      assert.equal((await member(ws.members.olga!))!.role, 'owner');
      assert.equal((await member(ws.members.olga!))!.disabled_at, null);
      assert.equal((await member(ws.members.ada!))!.role, 'admin');
      assert.equal((await member(nina))!.role, 'member');
      // Without the CSRF token: 403, nothing changes.
      const forged = await ada.page.request.post(`${svc.origin}${MEMBERS}/state`, { form: { member: nina, state: 'disabled' }, headers: { Origin: svc.origin }, maxRedirects: 0 });
      assert.equal(forged.status(), 403);
      assert.equal((await member(nina))!.disabled_at, null);
      // The owner may make another owner; then she is no longer the last one.
      await Promise.all([owner.page.goto(`${svc.origin}${MEMBERS}`)]);
      assert.equal(await post(owner.page, 'role', { member: ws.members.ada!, role: 'owner' }), 303);
      assert.match((await shown(owner.page)).flash, /Ada Member is now owner/);
      assert.equal(await post(owner.page, 'role', { member: ws.members.olga!, role: 'admin' }), 303);
      assert.match((await shown(owner.page)).problem, /cannot change or disable yourself/);
    });

    it('a plain member sees the list read-only: no forms, and their posts are refused', async () => {
      const { page, problems } = await signedInPage(browser, svc, { workspaceId: ws.workspace_id, memberId: nina }, MEMBERS);
      contexts.push(page.context());
      assert.ok((await page.locator('tr[data-member]').count()) >= 6);
      assert.equal(await page.locator('main form').count(), 0);
      assert.match((await page.locator('.info').textContent())!, /You can see this workspace’s members/);
      await page.screenshot({ path: path.join(shots, `members-9-read-only-${database.name}.png`), fullPage: true });
      const csrf = await page.locator('.topbar input[name="_csrf"]').first().getAttribute('value');
      const res = await page.request.post(`${svc.origin}${MEMBERS}/state`, { form: { _csrf: csrf ?? '', member: ws.members.bob!, state: 'disabled' }, headers: { Origin: svc.origin }, maxRedirects: 0 });
      assert.equal(res.status(), 403);
      assert.equal((await member(ws.members.bob!))!.disabled_at, null);
      assert.deepEqual(problems, []);
    });

    it('a revoked invitation’s link is 410; so is an expired one', async () => {
      const { page } = owner;
      await page.goto(`${svc.origin}${MEMBERS}`);
      await page.fill('#invite-email', 'zoe@acme.test');
      await Promise.all([page.waitForURL(`${svc.origin}${MEMBERS}`), page.click('button:has-text("Send invitation")')]);
      const link = inviteLink((await mailsFor(mail, 'zoe@acme.test', 1))[0]!.mail.text!);
      tokens.push(link.slice(15));
      const zoe = page.locator('tr[data-invitation]', { hasText: 'zoe@acme.test' });
      await Promise.all([page.waitForURL(`${svc.origin}${MEMBERS}`), zoe.locator('button:has-text("Revoke")').click()]);
      assert.match((await page.locator('.flash').textContent())!, /Revoked the invitation for zoe@acme\.test/);
      assert.equal(await zoe.count(), 0);
      const guest = await (await browser.newContext()).newPage();
      contexts.push(guest.context());
      assert.equal((await guest.goto(`${svc.origin}${link}`))!.status(), 410);
      assert.match((await guest.textContent('main'))!, /already used, has expired or was revoked/);
      assert.equal(await guest.getAttribute('main a:has-text("Sign in")', 'href'), '/signin');
      await guest.screenshot({ path: path.join(shots, `members-10-revoked-${database.name}.png`) });

      await page.goto(`${svc.origin}${MEMBERS}`);
      await page.fill('#invite-email', 'yan@acme.test');
      await Promise.all([page.waitForURL(`${svc.origin}${MEMBERS}`), page.click('button:has-text("Send invitation")')]);
      const late = inviteLink((await mailsFor(mail, 'yan@acme.test', 1))[0]!.mail.text!);
      tokens.push(late.slice(15));
      assert.equal((await fetch(`${svc.origin}${late}`)).status, 200);
      svc.clock.advance(7 * DAY);
      assert.equal((await fetch(`${svc.origin}${late}`)).status, 410);
      assert.equal((await fetch(`${svc.origin}/signin/invite/${'A'.repeat(43)}`)).status, 404);
    });

    it('never logs an invitation token', () => {
      const logs = svc.logs();
      assert.ok(tokens.length >= 5);
      for (const t of tokens) assert.ok(!logs.includes(t), 'an invitation token reached the log');
      assert.match(logs, /member joined by invitation/);
    });
  });
}
