/**
 * Black-box checks of issue 16 as the README promises it, on both databases: a team admin in the browser,
 * as one story: sign-in by e-mail, the settings index, API keys (create, last use, delegation, replace,
 * revoke), bad page input, members (invite, join, role, disable), the webhook signing contract move, the
 * audit log, no secret stored in clear, and the admin CLI reading what the pages made. A readable refusal,
 * never a 500, never a change on GET. Split from one suite; the shared setup is blackbox16Kit.ts.
 * Screenshots: test-output/bb16-*.png.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import type { Page } from 'playwright-core';
import type { ApplyResult } from '../../server/admin.ts';
import { announceBrowser } from '../support/browser.ts';
import { databases, type TestService } from '../support/service.ts';
import type { MailServer } from '../support/smtp.ts';
import { root, shots, PUBLIC, run, mailsFor, everyStoredText, blackbox16Service } from './blackbox16Kit.ts';

announceBrowser('the issue 16 black-box browser test (settings)');

for (const database of databases) {
  describe(`issue 16, black box [${database.name}]`, function () {
    this.timeout(120_000);
    const kit = blackbox16Service(database);
    const { secretsShown, tokensSeen, newPage, signInByMail, csrfOf, postForm, callWith, keyRow, countKeys } = kit;
    let mail: MailServer;
    let svc: TestService;
    let ws: ApplyResult;
    let other: ApplyResult;
    let owner: Page;
    let ownerCookie = '';
    before(() => ({ mail, svc, ws, other } = kit.state()));

    it('a signed-out settings page points to /signin; the owner signs in by e-mail and lands on the page', async () => {
      const { page } = await newPage();
      const res = await page.goto(`${svc.origin}/settings/keys`);
      assert.equal(res!.status(), 401);
      assert.ok(await page.locator('a[href^="/signin"]').count());
      assert.doesNotMatch((await page.textContent('body'))!, /npm run/);
      const signed = await signInByMail('olga@acme.test', '/settings/keys');
      owner = signed.page;
      ownerCookie = signed.cookie;
      assert.equal(new URL(owner.url()).pathname, '/settings/keys');
      assert.equal(await owner.locator('.topbar .who .name').textContent(), 'Olga Owner');
      await owner.screenshot({ path: path.join(shots, `bb16-keys-${database.name}.png`), fullPage: false });
    });

    it('an unknown or disabled address gets the same answer and no mail', async () => {
      for (const email of ['nobody@acme.test', 'max@acme.test', 'OLGA@globex.test '.trim().toLowerCase().replace('olga', 'zed')]) {
        const { page } = await newPage();
        await page.goto(`${svc.origin}/signin`);
        await page.fill('#signin-email', email);
        await Promise.all([page.waitForNavigation(), page.click('button:has-text("Send me a sign-in link")')]);
        assert.match((await page.textContent('main'))!, /If that address belongs to a member, a sign-in link is on its way/);
      }
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(mail.mails.filter((m) => m.to.some((a) => ['nobody@acme.test', 'max@acme.test', 'zed@globex.test'].includes(a))).length, 0);
    });

    it('a used sign-in link is 410 pointing to /signin; an unknown one 404; neither is a 500', async () => {
      const used = await fetch(`${svc.origin}/signin/${tokensSeen[0]}`, { redirect: 'manual' });
      assert.equal(used.status, 410);
      assert.match(await used.text(), /href="\/signin/);
      const unknown = await fetch(`${svc.origin}/signin/${'A'.repeat(43)}`, { redirect: 'manual' });
      assert.equal(unknown.status, 404);
    });

    it('the settings index lists the pages with summaries; each settings page has the sub-menu with itself current', async () => {
      await owner.goto(`${svc.origin}/settings`);
      const entries = await owner.locator('.settings-index [data-settings]').evaluateAll((els) => els.map((e) => e.getAttribute('data-settings')));
      for (const p of ['/settings/members', '/settings/keys', '/settings/audit', '/settings/signing']) assert.ok(entries.includes(p), `${p} missing from the index`);
      for (const p of ['/settings/members', '/settings/keys', '/settings/audit']) {
        await owner.goto(`${svc.origin}${p}`);
        assert.equal(await owner.locator('nav.subnav a[aria-current="page"]').getAttribute('href'), p);
        assert.equal(await owner.locator('.topbar nav[aria-label="Pages"] a[aria-current="true"]').getAttribute('href'), '/settings');
      }
    });

    it('a plain member sees the index without the audit log, reads the keys page without forms, and is refused the audit log with 403', async () => {
      const ada = await signInByMail('ada@acme.test', '/settings');
      const entries = await ada.page.locator('.settings-index [data-settings]').evaluateAll((els) => els.map((e) => e.getAttribute('data-settings')));
      assert.ok(entries.includes('/settings/keys'));
      assert.ok(!entries.includes('/settings/audit'));
      await ada.page.goto(`${svc.origin}/settings/keys`);
      assert.equal(await ada.page.locator('form[action^="/settings/keys/"]').count(), 0);
      assert.ok(await ada.page.locator('article.key').count());
      const audit = await ada.page.goto(`${svc.origin}/settings/audit`);
      assert.equal(audit!.status(), 403);
      assert.match((await ada.page.textContent('main'))!, /owners and admins/i);
      // A member posting an action anyway is refused and nothing changes.
      const before = await countKeys(ws.workspace_id);
      const res = await postForm(ada.page, '/settings/keys', '/settings/keys/create', { name: 'Sneaky', delegation: 'none' });
      assert.equal(res.status, 403);
      assert.equal(await countKeys(ws.workspace_id), before);
    });

    let dealsKey = { id: '', secret: '' };
    it('the owner creates a key with chosen operations, a resource and chosen delegation; the secret is shown once and works as granted', async () => {
      await owner.goto(`${svc.origin}/settings/keys`);
      await owner.fill('#key-name', 'Deals sync');
      const customers = owner.locator('fieldset[data-namespace="customers"]');
      await customers.locator('input[value="some"]').check();
      await customers.locator('summary').click();
      await customers.locator('input[value="customers.ListDeals"]').check();
      await customers.locator('input[value="customers.GetDeal"]').check();
      await owner.locator('input[name="res"][value="core:Deal=read"]').check();
      const form = owner.locator('form.create-key');
      await form.locator('input[name="delegation"][value="selected"]').check();
      await form.locator(`input[name="delegate"][value="${ws.members.ada}"]`).check();
      await Promise.all([owner.waitForNavigation(), owner.click('button:has-text("Create key")')]);
      assert.equal(owner.url().includes('/settings/keys'), true);
      const body = (await owner.textContent('main'))!;
      const secret = /wso_[A-Za-z0-9_-]{30,}/.exec(body)?.[0];
      assert.ok(secret, `no secret on the page after create: ${body.slice(0, 500)}`);
      assert.ok(await owner.locator('button:has-text("Copy")').count(), 'no copy button beside the secret');
      await owner.screenshot({ path: path.join(shots, `bb16-key-created-${database.name}.png`) });
      secretsShown.push(secret);
      const id = /^wso_([a-z0-9]+)_/.exec(secret)![1]!;
      dealsKey = { id: `ak_${id}`, secret };

      // Shown once: a reload shows it no more.
      const keysBefore = await countKeys(ws.workspace_id);
      await owner.reload();
      assert.ok(!(await owner.content()).includes(secret));
      assert.equal(await countKeys(ws.workspace_id), keysBefore, 'a reload after the create made another key');
      const article = owner.locator(`article.key[data-key="${dealsKey.id}"]`);
      assert.match((await article.locator('[data-grants]').textContent())!, /Customers — 2 operations: GetDeal, ListDeals/);
      assert.match((await article.locator('[data-resources]').textContent())!, /Deals: read/);
      assert.match((await article.locator('[data-delegation]').textContent())!, /Ada Member/);
      assert.match((await article.textContent())!, /by Olga Owner/);

      // Used as granted: reads deals, not companies, not writing; acts for Ada only.
      assert.equal((await callWith(secret, 'customers.ListDeals', {})).status, 200);
      assert.equal((await callWith(secret, 'customers.ListCompanies', {})).status, 403);
      assert.equal((await callWith(secret, 'customers.ListDeals', {}, { 'Service-Act-As': ws.members.ada! })).status, 200);
      const bob = await callWith(secret, 'customers.ListDeals', {}, { 'Service-Act-As': ws.members.bob! });
      assert.equal(bob.status, 403);
      const refusal = (await bob.json()) as { error: string; message: string };
      assert.equal(refusal.error, 'forbidden');
      assert.ok(refusal.message.length > 10);
      const ops = (await (await fetch(`${svc.baseUrl}/operations`, { headers: { Authorization: `Bearer ${secret}` } })).json()) as { data?: Array<{ id: string }> } & Record<string, unknown>;
      const listed = JSON.stringify(ops);
      assert.ok(listed.includes('customers.ListDeals') && !listed.includes('customers.CreateDeal'));
    });

    it('the key is listed with its last use after a call', async () => {
      await owner.goto(`${svc.origin}/settings/keys`);
      for (let i = 0; i < 40; i++) {
        const text = await owner.locator(`article.key[data-key="${dealsKey.id}"] [data-last-used]`).textContent();
        if (text !== 'never') break;
        await new Promise((r) => setTimeout(r, 50));
        await owner.reload();
      }
      assert.notEqual(await owner.locator(`article.key[data-key="${dealsKey.id}"] [data-last-used]`).textContent(), 'never');
    });

    it('changing whom the key acts for to every member lets it act for Bob from its next request', async () => {
      const article = owner.locator(`article.key[data-key="${dealsKey.id}"]`);
      await article.locator('summary:has-text("Change whom it acts for")').click();
      await article.locator('input[name="delegation"][value="all"]').check();
      await Promise.all([owner.waitForNavigation(), article.locator('button:has-text("Save whom it acts for")').click()]);
      assert.match((await owner.locator(`article.key[data-key="${dealsKey.id}"] [data-delegation]`).textContent())!, /every current and future member/);
      assert.equal((await callWith(dealsKey.secret, 'customers.ListDeals', {}, { 'Service-Act-As': ws.members.bob! })).status, 200);
    });

    let replacement = { id: '', secret: '' };
    it('replace: a new key with the same grants and delegation; both work and both say so until the old one is revoked', async () => {
      const article = owner.locator(`article.key[data-key="${dealsKey.id}"]`);
      await Promise.all([owner.waitForNavigation(), article.locator('button:has-text("Make a replacement")').click()]);
      const body = (await owner.textContent('main'))!;
      const secret = /wso_[A-Za-z0-9_-]{30,}/.exec(body)?.[0];
      assert.ok(secret, 'no secret after replace');
      assert.notEqual(secret, dealsKey.secret);
      secretsShown.push(secret);
      replacement = { id: `ak_${/^wso_([a-z0-9]+)_/.exec(secret)![1]}`, secret };
      await owner.reload();
      for (const id of [dealsKey.id, replacement.id]) assert.match((await owner.locator(`article.key[data-key="${id}"]`).textContent())!, /both (keys )?work until (you revoke the old one|this one is revoked)/i);
      const fresh = owner.locator(`article.key[data-key="${replacement.id}"]`);
      assert.match((await fresh.locator('[data-grants]').textContent())!, /Customers — 2 operations: GetDeal, ListDeals/);
      assert.match((await fresh.locator('[data-delegation]').textContent())!, /every current and future member/);
      for (const s of [dealsKey.secret, secret]) {
        assert.equal((await callWith(s, 'customers.ListDeals', {})).status, 200);
        assert.equal((await callWith(s, 'customers.ListDeals', {}, { 'Service-Act-As': ws.members.bob! })).status, 200);
      }
      await owner.screenshot({ path: path.join(shots, `bb16-key-replaced-${database.name}.png`), fullPage: true });
    });

    it('revoke: the old key is refused (401) from its next request; the replacement goes on', async () => {
      const article = owner.locator(`article.key[data-key="${dealsKey.id}"]`);
      await Promise.all([owner.waitForNavigation(), article.locator('button:has-text("Revoke")').click()]);
      const old = await callWith(dealsKey.secret, 'customers.ListDeals', {});
      assert.equal(old.status, 401);
      const body = (await old.json()) as { error: string; message: string };
      assert.equal(body.error, 'invalid_key');
      assert.match(body.message, /revoked|unknown/i);
      assert.equal((await callWith(replacement.secret, 'customers.ListDeals', {})).status, 200);
      assert.ok(!(await owner.locator(`article.key[data-key="${replacement.id}"]`).textContent())!.match(/both keys work/i));
    });

    it('page actions refuse a wrong CSRF token, another origin, and a GET; nothing changes', async () => {
      const before = await countKeys(ws.workspace_id);
      const csrf = await csrfOf(owner, '/settings/keys');
      const wrong = await owner.request.post(`${svc.origin}/settings/keys/create`, { form: { _csrf: `${csrf.slice(0, -4)}0000`, name: 'x', delegation: 'none' }, headers: { Origin: svc.origin }, maxRedirects: 0 });
      assert.equal(wrong.status(), 403);
      const none = await owner.request.post(`${svc.origin}/settings/keys/create`, { form: { name: 'x', delegation: 'none' }, headers: { Origin: svc.origin }, maxRedirects: 0 });
      assert.equal(none.status(), 403);
      const foreign = await owner.request.post(`${svc.origin}/settings/keys/create`, { form: { _csrf: csrf, name: 'x', delegation: 'none' }, headers: { Origin: 'https://evil.example' }, maxRedirects: 0 });
      assert.equal(foreign.status(), 403);
      for (const action of ['/settings/keys/create', '/settings/keys/revoke', '/settings/keys/replace', '/settings/keys/delegation', '/settings/members/invite', '/settings/members/role', '/settings/members/state']) {
        const res = await fetch(`${svc.origin}${action}?key=${replacement.id}&member=${ws.members.ada}&role=owner&state=disabled&name=x`, { headers: { Cookie: ownerCookie, Accept: 'text/html' }, redirect: 'manual' });
        assert.ok([404, 405].includes(res.status), `GET ${action} answered ${res.status}`);
      }
      assert.equal(await countKeys(ws.workspace_id), before);
      assert.equal((await keyRow(replacement.id))!.revoked_at, null);
      assert.equal((await svc.db.sql.one<{ role: string }>(`SELECT role FROM members WHERE id = ?`, [ws.members.ada!]))!.role, 'member');
    });

    it("unknown ids and another workspace's ids are refused readably; the other workspace's key still works", async () => {
      for (const [action, fields] of [
        ['/settings/keys/revoke', { key: 'ak_doesnotexist000000000000' }],
        ['/settings/keys/revoke', { key: other.keys.ci!.id }],
        ['/settings/keys/replace', { key: other.keys.ci!.id }],
        ['/settings/keys/delegation', { key: other.keys.ci!.id, delegation: 'all' }],
        ['/settings/keys/delegation', { key: replacement.id, delegation: 'selected', delegate: other.members.olga! }],
        ['/settings/members/role', { member: other.members.ada!, role: 'owner' }],
        ['/settings/members/state', { member: other.members.ada!, state: 'disabled' }],
        ['/settings/members/role', { member: ws.members.ada!, role: 'emperor' }],
        ['/settings/keys/revoke', { key: '' }],
      ] as const) {
        const res = await postForm(owner, '/settings/keys', action, fields as Record<string, string>);
        assert.ok(res.status < 500, `${action} ${JSON.stringify(fields)} answered ${res.status}`);
        if (res.status === 303) {
          await owner.goto(`${svc.origin}${res.location}`);
          assert.ok((await owner.locator('.problem').count()) > 0, `${action} ${JSON.stringify(fields)}: redirected without a problem shown`);
        } else assert.ok([400, 403, 404, 409].includes(res.status), `${action}: ${res.status}`);
      }
      assert.equal((await callWith(other.keys.ci!.secret, 'customers.ListSalesPipelines', {})).status, 200);
      assert.equal((await keyRow(other.keys.ci!.id))!.revoked_at, null);
      const otherAda = await svc.db.sql.one<{ role: string; disabled_at: number | null }>(`SELECT role, disabled_at FROM members WHERE id = ?`, [other.members.ada!]);
      assert.deepEqual([otherAda!.role, otherAda!.disabled_at], ['member', null]);
      assert.equal((await svc.db.sql.one<{ role: string }>(`SELECT role FROM members WHERE id = ?`, [ws.members.ada!]))!.role, 'member');
    });

    it('overlong, empty and odd names are refused readably or kept exactly; never a 500', async () => {
      const cases: Array<[string, string]> = [
        ['overlong', 'K'.repeat(5000)],
        ['empty', ''],
        ['blank', '   '],
        ['rtl and emoji', 'Sync سارة 🔑 Åsa'],
        ['bidi override', 'Sync \u202Egnp.exe 🔑 Åsa'],
        ['markup', '<script>alert(1)</script>'],
      ];
      for (const [label, name] of cases) {
        const before = await countKeys(ws.workspace_id);
        const res = await postForm(owner, '/settings/keys', '/settings/keys/create', { name, delegation: 'none', ns_workspace: 'all' });
        assert.ok(res.status < 500, `${label}: ${res.status}`);
        const created = (await countKeys(ws.workspace_id)) - before;
        if (['overlong', 'empty', 'blank', 'bidi override'].includes(label)) {
          assert.equal(created, 0, `${label}: a key was made`);
          if (res.status === 303) {
            await owner.goto(`${svc.origin}${res.location}`);
            assert.ok((await owner.locator('.problem').count()) > 0, `${label}: no problem shown`);
          }
        } else {
          assert.equal(created, 1, `${label}: no key made`);
          const row = await svc.db.sql.one<{ name: string }>(`SELECT name FROM api_keys WHERE workspace_id = ? AND name = ?`, [ws.workspace_id, name]);
          assert.equal(row?.name, name, `${label}: not kept exactly`);
        }
      }
      await owner.goto(`${svc.origin}/settings/keys`);
      assert.equal(await owner.locator('script:not([src])').count(), 0);
      assert.ok((await owner.content()).includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
    });

    it('invite and join by the mailed link; a role change and a disable end only that member\'s sessions', async () => {
      await owner.goto(`${svc.origin}/settings/members`);
      await owner.fill('#invite-email', 'nina@acme.test');
      await owner.selectOption('#invite-role', 'member');
      await Promise.all([owner.waitForNavigation(), owner.click('button:has-text("Send invitation")')]);
      const [received] = await mailsFor(mail, 'nina@acme.test', 1);
      const m = /\/signin\/invite\/([A-Za-z0-9_-]{20,})/.exec(received!.mail.text!);
      assert.ok(m);
      tokensSeen.push(m[1]!);
      const guest = await newPage();
      assert.equal((await guest.page.goto(`${svc.origin}/signin/invite/${m[1]}`))!.status(), 200);
      await guest.page.fill('#invite-name', 'Nina Ny 🌱');
      await Promise.all([guest.page.waitForNavigation(), guest.page.click('button:has-text("Join Acme")')]);
      assert.equal(await guest.page.locator('.topbar .who .name').textContent(), 'Nina Ny 🌱');
      const ninaCookie = `wso_session=${(await guest.context.cookies()).find((c) => c.name === 'wso_session')!.value}`;
      const nina = (await svc.db.sql.one<{ id: string }>(`SELECT id FROM members WHERE workspace_id = ? AND email = 'nina@acme.test'`, [ws.workspace_id]))!.id;
      // Opening the used link again: 410 pointing to sign-in.
      const again = await fetch(`${svc.origin}/signin/invite/${m[1]}`);
      assert.equal(again.status, 410);

      const bob = await signInByMail('bob@acme.test', '/settings/members');
      const alive = async (cookie: string) => (await fetch(`${svc.origin}/settings/members`, { headers: { Cookie: cookie } })).status;
      assert.equal(await alive(ninaCookie), 200);
      assert.equal(await alive(bob.cookie), 200);

      // Bob (an admin) makes Nina an admin: Nina's session ends, Bob's and Olga's go on.
      await bob.page.goto(`${svc.origin}/settings/members`);
      const row = bob.page.locator(`tr[data-member="${nina}"]`);
      await row.locator('select[name="role"]').selectOption('admin');
      await Promise.all([bob.page.waitForNavigation(), row.locator('button:has-text("Change role")').click()]);
      assert.equal(await bob.page.locator(`tr[data-member="${nina}"] [data-role]`).textContent(), 'admin');
      assert.equal(await alive(ninaCookie), 401);
      assert.equal(await alive(bob.cookie), 200);
      assert.equal(await alive(ownerCookie), 200);

      // Nina signs in again, then Olga disables her: her session ends again; Bob's goes on.
      const nina2 = await signInByMail('nina@acme.test', '/settings/members');
      assert.equal(await alive(nina2.cookie), 200);
      await owner.goto(`${svc.origin}/settings/members`);
      await Promise.all([owner.waitForNavigation(), owner.locator(`tr[data-member="${nina}"] button:has-text("Disable")`).click()]);
      assert.equal(await alive(nina2.cookie), 401);
      assert.equal(await alive(bob.cookie), 200);
      // A disabled member asking for a link gets the same page and no mail.
      const count = mail.mails.filter((x) => x.to.includes('nina@acme.test')).length;
      const p = await newPage();
      await p.page.goto(`${svc.origin}/signin`);
      await p.page.fill('#signin-email', 'nina@acme.test');
      await Promise.all([p.page.waitForNavigation(), p.page.click('button:has-text("Send me a sign-in link")')]);
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(mail.mails.filter((x) => x.to.includes('nina@acme.test')).length, count);
    });

    it('an admin never touches an owner; nobody changes themselves; refusals are readable', async () => {
      const bob = await signInByMail('bob@acme.test', '/settings/members');
      const toOwner = await postForm(bob.page, '/settings/members', '/settings/members/state', { member: ws.members.olga!, state: 'disabled' });
      assert.ok(toOwner.status < 500);
      const self = await postForm(bob.page, '/settings/members', '/settings/members/role', { member: ws.members.bob!, role: 'owner' });
      assert.ok(self.status < 500);
      const olga = await svc.db.sql.one<{ disabled_at: number | null }>(`SELECT disabled_at FROM members WHERE id = ?`, [ws.members.olga!]);
      assert.equal(olga!.disabled_at, null);
      assert.equal((await svc.db.sql.one<{ role: string }>(`SELECT role FROM members WHERE id = ?`, [ws.members.bob!]))!.role, 'admin');
    });

    it('webhook signing contract: a legacy subscription moves to v1 only when the box is ticked, once, on the page; GET changes nothing', async () => {
      const prep = await callWith(ws.keys.hooks!.secret, 'webhooks.PrepareWebhook', { url: 'https://127.0.0.1:9443/hook', event: 'meeting.completed', resource_types: [] }, { 'Idempotency-Key': 'bb16-hook-1' });
      assert.equal(prep.status, 200);
      const approval = new URL(((await prep.json()) as { approval_url: string }).approval_url);
      assert.equal(approval.origin, PUBLIC);
      await owner.goto(`${svc.origin}${approval.pathname}`);
      await Promise.all([owner.waitForNavigation(), owner.locator('form[action$="/approve"] button').click()]);
      const secret = /whsec_[A-Za-z0-9_-]+/.exec((await owner.textContent('main'))!)?.[0];
      assert.ok(secret, 'no signing secret shown after approval');
      secretsShown.push(secret);
      const wh = /\/settings\/webhooks\/(wh_[a-z0-9]+)/.exec(owner.url())![1]!;
      const contract = async () => {
        const list = (await (await callWith(ws.keys.hooks!.secret, 'webhooks.ListWebhookSubscriptions', {})).json()) as { items: Array<{ webhook_id: string; signing_contract: string }> };
        return list.items.find((d) => d.webhook_id === wh)!.signing_contract;
      };
      assert.equal(await contract(), 'legacy');
      await owner.goto(`${svc.origin}/settings/webhooks/${wh}`);
      const main = (await owner.textContent('main'))!;
      assert.match(main, /Move to the timestamped signature \(v1\)/);
      assert.match(main, /receiver/i);
      const move = owner.locator('button:has-text("Move to v1 (one-way)")');
      const action = await move.locator('xpath=ancestor::form').getAttribute('action');
      assert.ok(action);
      // A GET of the action changes nothing.
      const get = await fetch(`${svc.origin}${action}?confirm=on&receiver_ready=on`, { headers: { Cookie: ownerCookie }, redirect: 'manual' });
      assert.ok(get.status < 500 && get.status !== 303 && get.status !== 200, `GET ${action}: ${get.status}`);
      assert.equal(await contract(), 'legacy');
      // Unticked: nothing changes and the page says why.
      await Promise.all([owner.waitForNavigation(), move.click()]);
      assert.equal(await contract(), 'legacy');
      assert.match((await owner.textContent('main'))!, /receiver/i);
      // Ticked: moved, with a notice; the page shows when and by whom.
      await owner.locator('label:has-text("The receiver already accepts the v1 signature") input').check();
      await Promise.all([owner.waitForNavigation(), owner.locator('button:has-text("Move to v1 (one-way)")').click()]);
      assert.equal(await contract(), 'v1');
      assert.match((await owner.textContent('main'))!, /Olga Owner/);
      await owner.screenshot({ path: path.join(shots, `bb16-webhook-moved-${database.name}.png`), fullPage: true });
      // Posting the move again (a second tab, a double click) is refused readably and changes nothing.
      const again = await postForm(owner, `/settings/webhooks/${wh}`, action!, { confirm: 'on' });
      assert.ok(again.status < 500);
      assert.equal(await contract(), 'v1');
      const moved = await svc.db.sql.all<{ id: string }>(`SELECT id FROM audit_log WHERE workspace_id = ? AND action = 'webhook.signing_contract_changed'`, [ws.workspace_id]);
      assert.equal(moved.length, 1);
    });

    it('the audit log says who did what and when, pages, filters, refuses unknown filters with 400, and shows no secret', async () => {
      const res = await owner.goto(`${svc.origin}/settings/audit`);
      assert.equal(res!.status(), 200);
      const html = await owner.content();
      const rows = await owner.locator('tr[data-entry]').evaluateAll((els) => els.map((e) => ({ action: e.getAttribute('data-action'), who: e.querySelector('[data-who]')?.textContent, what: e.querySelector('[data-what]')?.textContent })));
      const actions = rows.map((r) => r.action);
      for (const a of ['webhook.approved', 'webhook.signing_contract_changed', 'key.created', 'key.replaced', 'key.revoked', 'key.delegation_changed', 'member.invited', 'member.joined', 'member.role_changed', 'member.disabled']) assert.ok(actions.includes(a), `${a} missing from the audit page`);
      const created = rows.find((r) => r.action === 'key.created' && r.what?.includes('Deals sync'));
      assert.ok(created, 'no key.created entry naming “Deals sync”');
      assert.equal(created!.who, 'Olga Owner (member)');
      const role = rows.find((r) => r.action === 'member.role_changed');
      assert.match(role!.what!, /Nina Ny 🌱.*member to admin/);
      assert.equal(role!.who, 'Bob Admin (member)');
      for (const s of secretsShown) assert.ok(!html.includes(s) && !html.includes(s.slice(-20)), 'a key secret is on the audit page');
      for (const t of tokensSeen) assert.ok(!html.includes(t), 'a link token is on the audit page');
      await owner.screenshot({ path: path.join(shots, `bb16-audit-${database.name}.png`), fullPage: true });

      // Filters and paging.
      await owner.goto(`${svc.origin}/settings/audit?family=keys`);
      const keyActions = await owner.locator('tr[data-entry]').evaluateAll((els) => els.map((e) => e.getAttribute('data-action')!));
      assert.ok(keyActions.length > 0 && keyActions.every((a) => a.startsWith('key.') || a === 'workspace.api_keys_changed'));
      for (const q of ['?family=nope', '?before=au_nope', '?family=keys&before=%00', `?before=${'x'.repeat(5000)}`]) {
        const r = await fetch(`${svc.origin}/settings/audit${q}`, { headers: { Cookie: ownerCookie } });
        assert.equal(r.status, 400, `audit ${q.slice(0, 40)}: ${r.status}`);
      }
      // Another workspace's entry id as a cursor shows nothing of that workspace.
      const foreign = await svc.db.sql.one<{ id: string }>(`SELECT id FROM audit_log WHERE workspace_id = ? LIMIT 1`, [other.workspace_id]);
      const fr = await fetch(`${svc.origin}/settings/audit?before=${foreign!.id}`, { headers: { Cookie: ownerCookie } });
      assert.ok(fr.status < 500);
      assert.ok(!(await fr.text()).includes('Globex'));
    });

    it('the audit log pages 50 at a time through “Older entries” without repeating or losing an entry', async () => {
      // 60 more entries: delegation flips on the replacement key (each recorded).
      for (let i = 0; i < 60; i++) {
        svc.clock.advance(1000);
        const r = await postForm(owner, '/settings/keys', '/settings/keys/delegation', { key: replacement.id, delegation: i % 2 ? 'all' : 'none' });
        assert.equal(r.status, 303);
      }
      const total = (await svc.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM audit_log WHERE workspace_id = ?`, [ws.workspace_id]))!.n;
      const seen: string[] = [];
      await owner.goto(`${svc.origin}/settings/audit`);
      for (let pages = 0; pages < 10; pages++) {
        const ids = await owner.locator('tr[data-entry]').evaluateAll((els) => els.map((e) => e.getAttribute('data-entry')!));
        assert.ok(ids.length <= 50);
        seen.push(...ids);
        const older = owner.locator('a:has-text("Older entries")');
        if (!(await older.count())) break;
        await Promise.all([owner.waitForNavigation(), older.click()]);
      }
      assert.equal(new Set(seen).size, seen.length);
      assert.equal(seen.length, total);
    });

    it('no secret shown to anyone sits in any table of the database, and no link token in clear', async () => {
      const tables = await everyStoredText(svc);
      for (const [table, stored] of tables) {
        for (const s of secretsShown) {
          // A webhook's signing secret must be kept to sign deliveries: in its subscription's row, nowhere else.
          if (s.startsWith('whsec_') && table === 'webhook_subscriptions') continue;
          const tail = s.startsWith('whsec_') ? s.slice('whsec_'.length) : s.split('_').slice(2).join('_');
          assert.ok(!stored.includes(s) && !stored.includes(tail), `the secret ${s.slice(0, 12)}... is stored in clear in ${table}`);
        }
        for (const t of tokensSeen) assert.ok(!stored.includes(t), `a link token is stored in clear in ${table}`);
      }
      for (const t of tokensSeen) assert.ok(!svc.logs().includes(t), 'a link token is in the log');
      for (const s of secretsShown) assert.ok(!svc.logs().includes(s), 'a key secret is in the log');
    });


    it('the admin CLI prints tables by default and JSON with --json; bad input is one line in words', async () => {
      const tsx = path.join(root, 'node_modules/.bin/tsx');
      const env = { ...process.env, DATABASE_URL: svc.databaseUrl };
      const table = await run(tsx, [path.join(root, 'scripts/admin.ts'), 'key', 'list', '--workspace', ws.workspace_id], { env, cwd: root });
      assert.doesNotMatch(table.stdout.trim(), /^[[{]/);
      assert.match(table.stdout, /Deals sync/);
      for (const s of secretsShown) assert.ok(!table.stdout.includes(s));
      const json = await run(tsx, [path.join(root, 'scripts/admin.ts'), 'key', 'list', '--workspace', ws.workspace_id, '--json'], { env, cwd: root });
      assert.doesNotThrow(() => JSON.parse(json.stdout));
      const audit = await run(tsx, [path.join(root, 'scripts/admin.ts'), 'audit', 'list', '--workspace', ws.workspace_id, '--limit', '5'], { env, cwd: root });
      assert.match(audit.stdout, /Olga Owner|Bob Admin/);
      const bad = await run(tsx, [path.join(root, 'scripts/admin.ts'), 'member', 'add', '--workspace', ws.workspace_id, '--name', 'X', '--email', 'x@acme.test', '--role', 'boss'], { env, cwd: root }).then(
        () => ({ code: 0, stderr: '' }),
        (e: { code: number; stderr: string }) => e,
      );
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /--role must be one of owner, admin, member \(got "boss"\)/);
      assert.doesNotMatch(bad.stderr, /\/role|at .*\.ts:\d+/);
    });
  });
}
