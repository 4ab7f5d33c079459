/**
 * The completed mail's HTML as a mail client shows it: Chromium at phone and desktop widths,
 * screenshots in test-output/ (looked at); the button and the copyable address carry the archive's
 * link, the verification page is linked, and nothing is wider than the screen.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type { Browser } from 'playwright-core';
import { composeCompletedMail } from '../../handlers/signing/archive/completedMail.ts';
import { announceBrowser, launchBrowser } from '../support/browser.ts';

announceBrowser('the completed mail rendering test');

const link = 'https://sign.acme.example/files/eyJ3Ijoid3NfMSIsImYiOiJmaWxlXzEiLCJlIjoxNzk3MDAwMDAwMDAwfQ.AbCdEfGhIjKlMnOpQrStUv';
const view = {
  name: 'Grace Hopper',
  isSender: false,
  sender: 'Olga Owner (Acme)',
  workspace: 'Acme',
  title: 'Fleet maintenance agreement 2027 <Globex & Acme>',
  requestId: 'sr_7d2k4m1q9x7v3c5b6n0z2a4s',
  bankid: false,
  signers: [
    { name: 'Grace Hopper', signedAt: 'Monday, 23 November 2026, 09:14 UTC' },
    { name: 'Łukasz Żółć', signedAt: 'Tuesday, 24 November 2026, 16:02 UTC' },
  ],
  link,
  filename: 'Fleet maintenance agreement 2027 (signed).pdf',
  expires: 'Tuesday, 1 December 2026, 16:03 UTC',
  sha256: '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
  verifyUrl: 'https://sign.acme.example/verify',
};

describe('the completed mail in a browser', function () {
  this.timeout(30_000);
  let browser: Browser;
  before(async function () {
    browser = await launchBrowser(this);
  });
  after(() => browser?.close());

  for (const [name, v] of [
    ['recipient', view],
    ['sender-bankid', { ...view, name: 'Olga Owner', isSender: true, bankid: true }],
  ] as const) {
    it(`the ${name} mail reads well on a phone and a desktop`, async () => {
      const mail = composeCompletedMail(v);
      assert.equal(mail.subject, 'Signed by everyone: "Fleet maintenance agreement 2027 <Globex & Acme>"');
      for (const [label, width] of [['phone', 390], ['desktop', 1024]] as const) {
        const page = await browser.newPage({ viewport: { width, height: 800 } });
        await page.setContent(mail.html);
        fs.mkdirSync('test-output', { recursive: true });
        await page.screenshot({ path: `test-output/signing-completed-mail-${name}-${label}.png`, fullPage: true });
        const hrefs = await page.$$eval('a', (as) => as.map((a) => a.getAttribute('href')));
        assert.deepEqual(hrefs, [link, link, view.verifyUrl]);
        assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, `no sideways scrolling at ${width}px`);
        const text = await page.evaluate(() => document.body.innerText);
        assert.match(text, /Fleet maintenance agreement 2027 <Globex & Acme>/);
        assert.match(text, /Łukasz Żółć, signed Tuesday, 24 November 2026, 16:02 UTC/);
        assert.match(text, /until Tuesday, 1 December 2026, 16:03 UTC/);
        assert.match(text, v.isSender ? /the request you sent/ : /which Olga Owner \(Acme\) sent you/);
        assert.match(text, v.bankid ? /BankID signature/ : /evidence pages/);
        await page.close();
      }
      assert.match(mail.text, new RegExp(`\\n${link.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\n`));
    });
  }
});
