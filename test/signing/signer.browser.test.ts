/**
 * The signer's pages in headless Chromium (Debian's /usr/bin/chromium driven by playwright-core), on both
 * databases. Requests are created through the generated client and their invitations arrive at a real
 * SMTP server started here; each recipient opens the link from their own mail. Two recipients sign
 * (one with the mouse on a desktop window, one by keyboard alone on a 390x844 phone screen) and the
 * request completes; in a second request one recipient declines with a reason, the request is cancelled
 * and the other's link is dead. The pages are drawn by pdf.js (canvases with ink on them), the download
 * is the original, and no page scrolls sideways. Screenshots go to test-output/signer-*.png.
 * Skipped, loudly, when Chromium is missing, unless REQUIRE_BROWSER=1.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { ServiceClient } from '../../generated/client.ts';
import { testPersonalNumber } from '../../handlers/signing/bankid/personalNumber.ts';
import { setCredit } from '../../handlers/signing/credit/credit.ts';
import { announceBrowser, launchBrowser } from '../support/browser.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { onService, samplePdf, signerLinkIn, signerServiceConfig, signerSpec, uploadPdf } from './signerKit.ts';
import { type Mail, startMailServer } from '../support/smtp.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const shots = path.join(root, 'test-output');
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const DESKTOP = { width: 1100, height: 900 };
const PHONE = { width: 390, height: 844 };

announceBrowser("the signer's page browser tests");

for (const database of databases) {
  describe(`the signer's pages in headless Chromium [${database.name}]`, function () {
    this.timeout(90_000);
    let browser: Browser | undefined;
    let smtp: Awaited<ReturnType<typeof startMailServer>>;
    let svc: TestService;
    let api: ServiceClient;
    let original: Uint8Array;
    let fileId: string;
    const contexts: BrowserContext[] = [];

    before(async function () {
      browser = await launchBrowser(this);
      smtp = await startMailServer();
      const config = signerServiceConfig(smtp.url);
      // The test signing provider, for the bankid request (standard requests do not use it).
      svc = await startTestService(database.url(), { ...config, env: { BANKID_PROVIDER: 'test' } });
      const ws = await svc.apply(signerSpec());
      await setCredit(svc.db.sql, ws.workspace_id, 5, svc.clock.now());
      api = svc.client(ws.keys.contracts!.secret, ws.members.olga!);
      original = await samplePdf('Service agreement 2027', 3);
      fileId = await uploadPdf(svc, api, original, 'service-agreement.pdf');
      fs.mkdirSync(shots, { recursive: true });
    });
    after(async () => {
      for (const c of contexts) await c.close();
      await browser?.close();
      await svc?.close();
      await smtp?.close();
    });

    const shot = (page: Page, name: string) => page.screenshot({ path: path.join(shots, `signer-${name}-${database.name}.png`), fullPage: true });

    async function createRequest(title: string, signers: Array<{ email: string; name: string }>, message?: string, method: 'standard' | 'bankid' = 'standard') {
      const res = await api.signing.RequestFileSignatures({ file_id: fileId, title, signers, signature_method: method, ...(message ? { message } : {}) });
      assert.equal(res.response.status, 200, JSON.stringify(res.error));
      assert.deepEqual(res.data!.invitation_failures, []);
      return res.data!.signing_request_id;
    }
    /** The signer's link in the newest mail to `email`, on the test server. */
    function linkFor(email: string): string {
      const mails = smtp.to(email);
      assert.ok(mails.length > 0, `a mail to ${email}`);
      return onService(signerLinkIn(mails.at(-1)!.mail), svc.origin);
    }
    const getRequest = async (id: string) => {
      const res = await api.signing.GetSigningRequest({ signing_request_id: id });
      assert.equal(res.response.status, 200, JSON.stringify(res.error));
      return res.data!;
    };
    const kinds = async (id: string) => (await api.signing.ListSigningEvents({ signing_request_id: id, limit: 100 })).data!.items.map((e) => e.kind);

    /** A fresh browser window (no cookies: the signer is nobody to this service) collecting the page's errors. */
    async function open(viewport: { width: number; height: number }) {
      const context = await browser!.newContext({ viewport, deviceScaleFactor: 1 });
      contexts.push(context);
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
      page.on('console', (msg) => {
        // A refused form (400) and a dead link (410) are pages the test asks for.
        if (msg.type() === 'error' && !/status of (400|410)/.test(msg.text())) problems.push(`console: ${msg.text()}`);
      });
      return { context, page, problems };
    }

    /** The document is drawn: `count` pages listed, the first one rendered on a canvas with ink on it. */
    async function expectRendered(page: Page, count: number) {
      await page.locator('.viewer[data-pages]').waitFor();
      assert.equal(await page.locator('.viewer').getAttribute('data-pages'), String(count));
      assert.equal(await page.locator('ol.sheets li.sheet').count(), count);
      await page.locator('li.sheet[data-page="1"][data-rendered="true"]').waitFor({ timeout: 20_000 });
      assert.equal(await page.locator('.viewer-status').textContent(), `${count} pages`);
      assert.equal(await page.locator('li.sheet[data-page="1"] canvas').getAttribute('aria-label'), `Page 1 of ${count}`);
      const ink = await page.$eval('li.sheet[data-page="1"] canvas', (c) => {
        const canvas = c as HTMLCanvasElement;
        const data = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data;
        let dark = 0;
        for (let i = 0; i < data.length; i += 4) if (data[i]! < 128 && data[i + 1]! < 128 && data[i + 2]! < 128) dark++;
        return { dark, width: canvas.width };
      });
      assert.ok(ink.width > 300, `the canvas is drawn at the column's width (${ink.width})`);
      assert.ok(ink.dark > 500, `the first page has text drawn on it (${ink.dark} dark pixels)`);
    }
    const noSideScroll = async (page: Page, what: string) => {
      const { scroll, client } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
      assert.ok(scroll <= client, `${what}: no horizontal scroll (${scroll} > ${client})`);
    };
    const focused = (page: Page) => page.evaluate(() => {
      const el = document.activeElement as HTMLElement | null;
      return el ? (el.id || el.getAttribute('href') || el.textContent?.trim() || el.tagName) : '';
    });

    it('two recipients open their links from the mail, read the rendered pages, type a name, agree and sign: the request completes', async () => {
      const id = await createRequest(
        'Service agreement 2027',
        [
          { email: 'carla@client.test', name: 'Carla Client' },
          { email: 'dan@client.test', name: 'Dan Client' },
        ],
        'Hi both,\nplease sign the renewed agreement before the end of the month.',
      );

      // Carla, with the mouse, on a desktop window.
      const carla = await open(DESKTOP);
      const link = linkFor('carla@client.test');
      const first = await carla.page.goto(link);
      assert.equal(first!.status(), 200);
      assert.equal(await carla.page.locator('h1').textContent(), 'Service agreement 2027');
      assert.match((await carla.page.locator('.lede').textContent())!, /^Olga Owner asks you, Carla Client \(carla@client\.test\), to sign this document\.$/);
      assert.equal(await carla.page.locator('.signer-top .from').textContent(), 'Signature request from Acme Contracts');
      assert.equal(await carla.page.locator('.message .text').textContent(), 'Hi both,\nplease sign the renewed agreement before the end of the month.');
      assert.match((await carla.page.locator('.facts').textContent())!, /service-agreement\.pdf · 3 pages/);
      assert.match((await carla.page.locator('.facts').textContent())!, /Sign by\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(in 30 days\)/);
      assert.equal(await carla.page.locator('nav, .topbar').count(), 0, 'no member navigation');
      assert.equal((await getRequest(id)).recipients[0]!.status, 'pending', 'the first page records nothing');
      await shot(carla.page, 'start');

      await Promise.all([carla.page.waitForURL(/\/review$/), carla.page.getByRole('button', { name: 'Continue to the document' }).click()]);
      assert.equal((await getRequest(id)).recipients[0]!.status, 'opened');
      await expectRendered(carla.page, 3);
      // The download is the original, byte for byte.
      const href = await carla.page.locator('a.download').getAttribute('href');
      const downloaded = await carla.page.evaluate(async (url) => {
        const res = await fetch(url);
        return { type: res.headers.get('content-type'), disposition: res.headers.get('content-disposition'), bytes: Array.from(new Uint8Array(await res.arrayBuffer())) };
      }, href!);
      assert.equal(downloaded.type, 'application/pdf');
      assert.match(downloaded.disposition!, /^attachment; filename="service-agreement\.pdf"/);
      assert.equal(sha256(Uint8Array.from(downloaded.bytes)), sha256(original));
      await shot(carla.page, 'review');

      // Sign without a name or the agreement: the page comes back with both messages, nothing recorded.
      await carla.page.getByRole('button', { name: 'Sign', exact: true }).click();
      await carla.page.locator('#sign-problem').waitFor();
      assert.deepEqual(await carla.page.locator('#sign-problem li').allTextContents(), ['Type your full name.', 'Tick “I agree to sign this document electronically”.']);
      assert.equal(await carla.page.locator('#typed_name').getAttribute('aria-invalid'), 'true');
      // The first field to fix has the focus (autofocus, applied at the page's first rendering).
      await carla.page.waitForFunction(() => document.activeElement?.id === 'typed_name', undefined, { timeout: 5000 });
      assert.equal((await getRequest(id)).recipients[0]!.status, 'opened');
      // Only spaces is no name either.
      await carla.page.fill('#typed_name', '   ');
      await carla.page.check('#agree');
      await carla.page.getByRole('button', { name: 'Sign', exact: true }).click();
      await carla.page.locator('#sign-problem').waitFor();
      assert.deepEqual(await carla.page.locator('#sign-problem li').allTextContents(), ['Type your full name.']);
      await shot(carla.page, 'refused');

      svc.clock.advance(5 * 60_000);
      await carla.page.fill('#typed_name', 'Carla Client');
      await carla.page.check('#agree');
      await Promise.all([carla.page.waitForURL(/\/done$/), carla.page.getByRole('button', { name: 'Sign', exact: true }).click()]);
      assert.equal(await carla.page.locator('h1').textContent(), 'You signed “Service agreement 2027”');
      assert.match((await carla.page.locator('.lede').textContent())!, /^Signed as Carla Client on \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\.$/);
      await shot(carla.page, 'signed');
      let request = await getRequest(id);
      assert.equal(request.status, 'pending');
      assert.deepEqual(request.recipients.map((r) => r.status), ['signed', 'pending']);
      assert.equal(request.recipients[0]!.signed_at, svc.clock.now());

      // Her link is now dead for any change: the 410 page says she signed.
      const again = await carla.page.goto(link);
      assert.equal(again!.status(), 410);
      assert.equal(await carla.page.locator('h1').textContent(), 'You already signed this document');
      assert.match((await carla.page.locator('p.ended').first().textContent())!, /as Carla Client\.$/);
      assert.deepEqual(carla.problems, []);

      // Dan, by keyboard alone, on a phone.
      const dan = await open(PHONE);
      await dan.page.goto(linkFor('dan@client.test'));
      await noSideScroll(dan.page, 'first page (phone)');
      await shot(dan.page, 'start-phone');
      await dan.page.keyboard.press('Tab');
      assert.equal(await focused(dan.page), '#main', 'the skip link comes first');
      await dan.page.keyboard.press('Tab');
      assert.equal(await focused(dan.page), 'Continue to the document');
      await Promise.all([dan.page.waitForURL(/\/review$/), dan.page.keyboard.press('Enter')]);
      await expectRendered(dan.page, 3);
      await noSideScroll(dan.page, 'review (phone)');
      await shot(dan.page, 'review-phone');
      // Skip the document, straight to the form: skip link, then the name field.
      await dan.page.keyboard.press('Tab');
      assert.equal(await focused(dan.page), '#sign');
      await dan.page.keyboard.press('Enter');
      await dan.page.keyboard.press('Tab');
      assert.equal(await focused(dan.page), 'typed_name');
      const outline = await dan.page.$eval('#typed_name', (el) => getComputedStyle(el).outlineStyle);
      assert.notEqual(outline, 'none', 'the focused field shows it');
      await dan.page.keyboard.type('Dan Client');
      await dan.page.keyboard.press('Tab');
      assert.equal(await focused(dan.page), 'agree');
      await dan.page.keyboard.press('Space');
      assert.equal(await dan.page.isChecked('#agree'), true);
      await dan.page.keyboard.press('Tab');
      assert.equal(await focused(dan.page), 'Sign');
      await shot(dan.page, 'keyboard-phone');
      svc.clock.advance(60_000);
      await Promise.all([dan.page.waitForURL(/\/done$/), dan.page.keyboard.press('Enter')]);
      assert.equal(await dan.page.locator('h1').textContent(), 'You signed “Service agreement 2027”');
      assert.match((await dan.page.locator('main').textContent())!, /Every recipient has signed\./);
      await noSideScroll(dan.page, 'done (phone)');
      await shot(dan.page, 'signed-phone');
      assert.deepEqual(dan.problems, []);

      request = await getRequest(id);
      assert.equal(request.status, 'completed');
      assert.equal(request.completed_at, svc.clock.now());
      assert.deepEqual(request.recipients.map((r) => r.status), ['signed', 'signed']);
      const history = await kinds(id);
      assert.deepEqual(history.filter((k) => k.startsWith('recipient.') || k === 'request.completed'), [
        'recipient.opened',
        'recipient.signed',
        'recipient.opened',
        'recipient.signed',
        'request.completed',
      ]);
      // The evidence kept with each recipient (never in the history): typed name, address, browser.
      const rows = await svc.db.sql.all<{ typed_name: string; ip: string; user_agent: string }>(`SELECT typed_name, ip, user_agent FROM signing_recipients WHERE request_id = ? ORDER BY position`, [id]);
      assert.deepEqual(rows.map((r) => r.typed_name), ['Carla Client', 'Dan Client']);
      for (const r of rows) {
        assert.match(r.ip, /^(::ffff:)?127\.0\.0\.1$/);
        assert.match(r.user_agent, /HeadlessChrome\//);
      }
      const events = JSON.stringify((await api.signing.ListSigningEvents({ signing_request_id: id, limit: 100 })).data!.items);
      assert.ok(!events.includes('127.0.0.1') && !events.includes('HeadlessChrome'), 'no address or browser in the history');
    });

    it('a recipient declines with a reason: the request is cancelled and the other recipient’s link is dead', async () => {
      const id = await createRequest('Consulting addendum', [
        { email: 'erin@client.test', name: 'Erin Client' },
        { email: 'frank@client.test', name: 'Frank Client' },
      ]);
      const erin = await open(DESKTOP);
      await erin.page.goto(linkFor('erin@client.test'));
      await Promise.all([erin.page.waitForURL(/\/review$/), erin.page.getByRole('button', { name: 'Continue to the document' }).click()]);
      await expectRendered(erin.page, 3);
      // The decline form is behind a disclosure; an empty reason is refused.
      assert.equal(await erin.page.locator('#reason').isVisible(), false);
      await erin.page.locator('summary', { hasText: 'Decline to sign' }).click();
      await erin.page.getByRole('button', { name: 'Decline' }).click();
      await erin.page.locator('#decline-problem').waitFor();
      assert.equal((await erin.page.locator('#decline-problem').textContent())!.trim(), 'Say why you decline (the sender sees it).');
      assert.equal(await erin.page.locator('details.decline').getAttribute('open'), '');
      await erin.page.waitForFunction(() => document.activeElement?.id === 'reason', undefined, { timeout: 5000 });
      assert.equal((await getRequest(id)).status, 'pending');
      await shot(erin.page, 'decline-refused');

      await erin.page.fill('#reason', 'The payment terms are not what we agreed.\nPlease send a corrected version.');
      svc.clock.advance(120_000);
      await Promise.all([erin.page.waitForURL(/\/done$/), erin.page.getByRole('button', { name: 'Decline' }).click()]);
      assert.equal(await erin.page.locator('h1').textContent(), 'You declined “Consulting addendum”');
      assert.equal(await erin.page.locator('.message .text').textContent(), 'The payment terms are not what we agreed.\nPlease send a corrected version.');
      await shot(erin.page, 'declined');
      assert.deepEqual(erin.problems, []);

      const request = await getRequest(id);
      assert.equal(request.status, 'cancelled');
      assert.equal(request.cancelled_at, svc.clock.now());
      assert.deepEqual(request.recipients.map((r) => r.status), ['declined', 'pending']);
      assert.equal(request.recipients[0]!.decline_reason, 'The payment terms are not what we agreed.\nPlease send a corrected version.');
      assert.deepEqual((await kinds(id)).slice(-2), ['recipient.declined', 'request.cancelled']);

      // Frank's link is dead: a 410 page saying why, with no form.
      const frank = await open(PHONE);
      const dead = await frank.page.goto(linkFor('frank@client.test'));
      assert.equal(dead!.status(), 410);
      assert.equal(await frank.page.locator('h1').textContent(), 'This request was declined');
      assert.match((await frank.page.locator('p.ended').textContent())!, /^Another recipient declined to sign “Consulting addendum”, so the request has ended/);
      assert.equal(await frank.page.locator('form, button').count(), 0);
      await noSideScroll(frank.page, 'dead link (phone)');
      await shot(frank.page, 'dead-phone');
      // And Erin's own link says she declined.
      const own = await erin.page.goto(linkFor('erin@client.test'));
      assert.equal(own!.status(), 410);
      assert.equal(await erin.page.locator('h1').textContent(), 'You declined this document');
      assert.deepEqual(frank.problems, []);
    });

    it('a bankid request: the review offers “Sign with BankID (test)”, the provider’s page signs, the confirmation follows', async () => {
      const id = await createRequest('Loan agreement', [{ email: 'gina@client.test', name: 'Gina Client' }], undefined, 'bankid');
      const gina = await open(PHONE);
      await gina.page.goto(linkFor('gina@client.test'));
      assert.match((await gina.page.locator('.facts').textContent())!, /SigningWith BankID/);
      await Promise.all([gina.page.waitForURL(/\/review$/), gina.page.getByRole('button', { name: 'Continue to the document' }).click()]);
      await expectRendered(gina.page, 3);
      assert.equal(await gina.page.locator('#typed_name').count(), 0, 'no typed name: the electronic ID signs');
      const button = gina.page.getByRole('button', { name: 'Sign with BankID (test)' });
      assert.equal(await button.count(), 1);
      await noSideScroll(gina.page, 'bankid review (phone)');
      await gina.page.locator('#sign').scrollIntoViewIfNeeded();
      await shot(gina.page, 'bankid-review-phone');
      // The agreement is required here too (the browser keeps the form until it is ticked).
      await button.click();
      assert.match(gina.page.url(), /\/review$/);
      await gina.page.check('#agree');
      await Promise.all([gina.page.waitForURL(/\/bankid\/test\//), button.click()]);
      await gina.page.fill('#personal_number', testPersonalNumber('19900101'));
      await Promise.all([gina.page.waitForURL(/\/done$/), gina.page.getByRole('button', { name: 'Confirm and sign (TEST)' }).click()]);
      assert.equal(await gina.page.locator('h1').textContent(), 'You signed “Loan agreement”');
      await shot(gina.page, 'bankid-signed-phone');
      const request = await getRequest(id);
      assert.equal(request.status, 'completed');
      assert.equal(request.recipients[0]!.status, 'signed');
      assert.deepEqual(gina.problems, []);
    });
  });
}
