/**
 * Sign-in by e-mail (handlers/signin/byEmail.ts): a signed-out person is pointed from a member page to
 * GET /signin, enters their address in headless Chromium, and the one-time link is read from a real
 * SMTP server started by the test; opening it signs them in and lands on `next`, once. Unknown
 * addresses get the same page and no mail; the per-address and per-client limits (fake clock) answer
 * the same page and send nothing; the form is refused without its CSRF token; the log shows neither
 * the token nor the address.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import type { ApplyResult } from '../../server/admin.ts';
import { mailConfigFromEnv } from '../../server/mailer.ts';
import { SIGNIN_LIMITS } from '../../handlers/signin/byEmail.ts';
import { announceBrowser, launchBrowser } from '../support/browser.ts';
import { acme } from '../support/fixtures.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { type MailServer, startMailServer } from '../support/smtp.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const shots = path.join(root, 'test-output');
const MIN = 60_000;
const HOUR = 60 * MIN;
const PUBLIC = 'https://ops.acme.example';
const SAME_PAGE = /If that address belongs to a member, a sign-in link is on its way\. It works once, for 15 minutes\./;

announceBrowser('the sign-in by e-mail test');

/** Waits (real time: the mail is sent after the answer) until `address` has received `count` mails. */
async function mailsFor(mail: MailServer, address: string, count: number) {
  for (let i = 0; i < 200 && to(mail, address).length < count; i++) await new Promise((r) => setTimeout(r, 25));
  const got = to(mail, address);
  assert.equal(got.length, count, `${address} received ${got.length} mails, expected ${count}`);
  return got;
}

/** The mails taken for an address (compared without case: the mailer may write the domain in lower case). */
const to = (mail: MailServer, address: string) => mail.mails.filter((m) => m.to.some((a) => a.toLowerCase() === address.toLowerCase()));

/** The sign-in link paths (`/signin/<token>`) in a mail's text, each after the checked public origin. */
function linksIn(text: string): string[] {
  return [...text.matchAll(/(\S+)\/signin\/([A-Za-z0-9_-]{43})/g)].map((m) => {
    assert.equal(m[1], PUBLIC);
    return `/signin/${m[2]}`;
  });
}

/** A form as a browser gets it: the `wso_form` cookie and the `_csrf` field. */
async function form(svc: TestService): Promise<{ cookie: string; csrf: string }> {
  const res = await fetch(`${svc.origin}/signin`);
  assert.equal(res.status, 200);
  const cookie = res.headers.get('set-cookie')!.split(';')[0]!;
  assert.match(res.headers.get('set-cookie')!, /HttpOnly; SameSite=Strict/i);
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await res.text())![1]!;
  return { cookie, csrf };
}

async function ask(svc: TestService, f: { cookie: string; csrf: string } | null, fields: Record<string, string>, headers: Record<string, string> = {}) {
  const body = new URLSearchParams({ ...(f ? { _csrf: f.csrf } : {}), ...fields }).toString();
  const res = await fetch(`${svc.origin}/signin`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: svc.origin, ...(f ? { Cookie: f.cookie } : {}), ...headers },
    body,
  });
  return { status: res.status, text: await res.text() };
}

for (const database of databases) {
  describe(`sign-in by e-mail [${database.name}]`, function () {
    this.timeout(60_000);
    let mail: MailServer;
    let svc: TestService;
    let ws: ApplyResult;
    let browser: Browser | undefined;
    const tokens: string[] = [];
    const seen = (paths: string[]) => {
      tokens.push(...paths.map((p) => p.slice('/signin/'.length)));
      return paths;
    };

    before(async () => {
      fs.mkdirSync(shots, { recursive: true });
      mail = await startMailServer();
      svc = await startTestService(database.url(), {
        mail: mailConfigFromEnv({ SMTP_URL: mail.url, MAIL_FROM: 'Acme Operations <ops@acme.example>' }),
        publicUrl: PUBLIC,
      });
      ws = await svc.apply(acme());
    });
    after(async () => {
      await browser?.close();
      await svc?.close();
      await mail?.close();
    });
    // Every test starts with full budgets (the limits are per hour).
    beforeEach(() => svc.clock.advance(2 * HOUR));

    it('a signed-out person goes from /dashboard to /signin, gets the link by mail, and lands signed in on next; the link works once', async function () {
      browser = await launchBrowser(this);
      const context = await browser.newContext({ viewport: { width: 900, height: 700 }, deviceScaleFactor: 1 });
      try {
        const page = await context.newPage();
        const problems: string[] = [];
        page.on('pageerror', (err) => problems.push(err.message));
        const signedOut = await page.goto(`${svc.origin}/dashboard`);
        assert.equal(signedOut!.status(), 401);
        assert.doesNotMatch((await page.textContent('main'))!, /npm run/);
        await page.screenshot({ path: path.join(shots, `signin-email-1-signed-out-${database.name}.png`) });
        await page.click('main a:has-text("Sign in")');
        await page.waitForURL(`${svc.origin}/signin?next=%2Fdashboard`);
        await page.fill('#signin-email', 'Ada@Acme.test');
        await page.screenshot({ path: path.join(shots, `signin-email-2-form-${database.name}.png`) });
        const [answer] = await Promise.all([page.waitForNavigation(), page.click('button:has-text("Send me a sign-in link")')]);
        assert.equal(answer!.status(), 200);
        assert.match((await page.textContent('main'))!, SAME_PAGE);
        await page.screenshot({ path: path.join(shots, `signin-email-3-sent-${database.name}.png`) });

        const [received] = await mailsFor(mail, 'Ada@Acme.test', 1);
        assert.equal(received!.mail.subject, 'Sign in to Acme');
        assert.match(received!.mail.text!, /Sign in to Acme:/);
        assert.match(received!.mail.text!, /The link works once, for 15 minutes\./);
        assert.match(received!.mail.text!, /If you did not ask for this, ignore this mail/);
        const [link] = seen(linksIn(received!.mail.text!));
        assert.ok(link);
        assert.ok((received!.mail.html as string).includes(`${PUBLIC}${link}`));

        const opened = await page.goto(`${svc.origin}${link}`);
        assert.equal(opened!.status(), 200);
        assert.equal(new URL(page.url()).pathname, '/dashboard');
        assert.ok((await context.cookies()).some((c) => c.name === 'wso_session'));
        await page.screenshot({ path: path.join(shots, `signin-email-4-signed-in-${database.name}.png`) });

        const again = await (await browser.newContext()).newPage();
        const used = await again.goto(`${svc.origin}${link}`);
        assert.equal(used!.status(), 410);
        assert.equal(await again.getAttribute('main a:has-text("Sign in")', 'href'), '/signin');
        assert.doesNotMatch((await again.textContent('main'))!, /npm run/);
        await again.screenshot({ path: path.join(shots, `signin-email-5-used-${database.name}.png`) });
        await again.context().close();
        assert.deepEqual(problems, []);
      } finally {
        await context.close();
      }
    });

    it('answers an unknown or disabled address with the same page and sends nothing; a bad address gets the form again (400)', async () => {
      const before = mail.mails.length;
      for (const email of ['nobody@acme.test', 'max@acme.test']) {
        const res = await ask(svc, await form(svc), { email, next: '/dashboard' });
        assert.equal(res.status, 200);
        assert.match(res.text, SAME_PAGE);
      }
      // Mails go out in the order the requests were answered: once bob's has come, the others would have.
      await ask(svc, await form(svc), { email: 'bob@acme.test' });
      await mailsFor(mail, 'bob@acme.test', 1);
      assert.equal(mail.mails.length, before + 1);
      const bad = await ask(svc, await form(svc), { email: 'not an address' });
      assert.equal(bad.status, 400);
      assert.match(bad.text, /Enter an e-mail address/);
      assert.match(bad.text, /value="not an address"/);
    });

    it('keeps next only when it is a local path', async () => {
      await ask(svc, await form(svc), { email: 'olga@acme.test', next: 'https://evil.example/' });
      const [m] = await mailsFor(mail, 'olga@acme.test', 1);
      assert.equal(m!.mail.from!.text, '"Acme Operations" <ops@acme.example>');
      const [link] = seen(linksIn(m!.mail.text!));
      const res = await fetch(`${svc.origin}${link}`, { redirect: 'manual' });
      assert.equal(res.status, 303);
      assert.equal(res.headers.get('location'), '/');
    });

    it(`limits each address to ${SIGNIN_LIMITS.address} requests per hour: the same page, no mail; one more after 12 minutes`, async () => {
      const f = await form(svc);
      const had = to(mail, 'ada@acme.test').length;
      for (let i = 0; i < SIGNIN_LIMITS.address; i++) assert.match((await ask(svc, f, { email: 'ada@acme.test' })).text, SAME_PAGE);
      await mailsFor(mail, 'ada@acme.test', had + SIGNIN_LIMITS.address);
      const limited = await ask(svc, f, { email: 'ADA@acme.test' });
      assert.equal(limited.status, 200);
      assert.match(limited.text, SAME_PAGE);
      // Another address from the same client still gets its mail (and, in order, proves ada's sent nothing).
      const bobs = to(mail, 'bob@acme.test').length;
      await ask(svc, f, { email: 'bob@acme.test' });
      await mailsFor(mail, 'bob@acme.test', bobs + 1);
      assert.equal(to(mail, 'ada@acme.test').length, had + SIGNIN_LIMITS.address);
      svc.clock.advance(12 * MIN);
      await ask(svc, f, { email: 'ada@acme.test' });
      await mailsFor(mail, 'ada@acme.test', had + SIGNIN_LIMITS.address + 1);
    });

    it(`limits each client address to ${SIGNIN_LIMITS.client} requests per hour: the same page, no mail; one more after 3 minutes`, async () => {
      const f = await form(svc);
      for (let i = 0; i < SIGNIN_LIMITS.client; i++) assert.match((await ask(svc, f, { email: `someone${i}@nowhere.test` })).text, SAME_PAGE);
      const olgas = to(mail, 'olga@acme.test').length;
      const limited = await ask(svc, f, { email: 'olga@acme.test' });
      assert.match(limited.text, SAME_PAGE);
      svc.clock.advance(3 * MIN);
      const bobs = to(mail, 'bob@acme.test').length;
      await ask(svc, f, { email: 'bob@acme.test' });
      await mailsFor(mail, 'bob@acme.test', bobs + 1);
      assert.equal(to(mail, 'olga@acme.test').length, olgas);
      // The budgets are rows of the shared rate_limits table, hashed: no address in clear.
      const buckets = await svc.db.sql.all<{ bucket: string }>(`SELECT bucket FROM rate_limits WHERE bucket LIKE 'signin-%'`);
      assert.ok(buckets.length >= 2);
      for (const b of buckets) assert.match(b.bucket, /^signin-(client|address):[0-9a-f]{64}$/);
    });

    it('refuses the form without its CSRF token or cookie, or from another origin (403), and sends nothing', async () => {
      const f = await form(svc);
      const before = mail.mails.length;
      assert.equal((await ask(svc, null, { email: 'bob@acme.test' })).status, 403);
      assert.equal((await ask(svc, { cookie: f.cookie, csrf: 'x'.repeat(43) }, { email: 'bob@acme.test' })).status, 403);
      assert.equal((await ask(svc, { cookie: 'wso_form=' + 'A'.repeat(43), csrf: f.csrf }, { email: 'bob@acme.test' })).status, 403);
      const other = await ask(svc, f, { email: 'bob@acme.test' }, { Origin: 'https://evil.example' });
      assert.equal(other.status, 403);
      assert.match(other.text, /did not come from this service/);
      const olgas = to(mail, 'olga@acme.test').length;
      await ask(svc, f, { email: 'olga@acme.test' });
      await mailsFor(mail, 'olga@acme.test', olgas + 1);
      assert.equal(mail.mails.length, before + 1);
    });

    it('sends one mail with one link per workspace to an address that is a member of several', async () => {
      const beta = await svc.apply({ workspace: { name: 'Beta' }, members: { o: { name: 'Olga Beta', email: 'OLGA@acme.test', role: 'member' } } });
      const had = to(mail, 'olga@acme.test').length;
      await ask(svc, await form(svc), { email: 'olga@acme.test', next: '/dashboard' });
      const got = await mailsFor(mail, 'olga@acme.test', had + 1);
      const last = got[got.length - 1]!.mail;
      assert.equal(last.subject, 'Your sign-in links');
      assert.match(last.text!, /Sign in to Acme:[\s\S]*Sign in to Beta:/);
      assert.match(last.text!, /Each link works once, for 15 minutes\./);
      const links = seen(linksIn(last.text!));
      assert.equal(links.length, 2);
      const sessions = [];
      for (const link of links) {
        const res = await fetch(`${svc.origin}${link}`, { redirect: 'manual' });
        assert.equal(res.status, 303);
        assert.equal(res.headers.get('location'), '/dashboard');
        sessions.push(res.headers.get('set-cookie')!);
      }
      const rows = await svc.db.sql.all<{ workspace_id: string }>(`SELECT workspace_id FROM member_sessions WHERE member_id IN (?, ?)`, [ws.members.olga!, beta.members.o!]);
      assert.deepEqual(new Set(rows.map((r) => r.workspace_id)), new Set([ws.workspace_id, beta.workspace_id]));
    });

    it('never logs a link token or an address in clear', () => {
      const logs = svc.logs();
      assert.ok(tokens.length >= 4);
      for (const token of tokens) assert.ok(!logs.includes(token), 'a token reached the log');
      assert.doesNotMatch(logs, /acme\.test|nowhere\.test/i);
      assert.match(logs, /sign-in link mailed/);
      assert.match(logs, /rate limited, nothing sent/);
    });
  });
}
