/**
 * The invitation mail's HTML as a mail client shows it: Chromium at phone and desktop widths,
 * screenshots in test-output/ (looked at); the button and the copyable address carry the link, the
 * sender's message keeps its line breaks, and nothing is wider than the screen.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type { Browser } from 'playwright-core';
import { composeMail } from '../../handlers/signing/request/invitationMail.ts';
import type { DbSigningRecipientRow, DbSigningRequestRow } from '../../handlers/signing/queries.ts';
import { announceBrowser, launchBrowser } from '../support/browser.ts';

announceBrowser('the invitation mail rendering test');

const request = {
  id: 'sr_7d2k4m1q9x7v3c5b6n0z2a4s',
  workspace_id: 'ws_1',
  title: 'Fleet maintenance agreement 2027 <Globex & Acme>',
  deadline_at: Date.UTC(2026, 11, 26, 17, 0),
  signature_method: 'standard',
} as DbSigningRequestRow;
const recipient = { id: 'rcp_1', email: 'grace.hopper@globex.example', name: 'Grace Hopper' } as DbSigningRecipientRow;
const link = 'https://sign.acme.example/sign/_3YBaoitEZVrygCTWOHbAMulKL_bsQdJe_oHOZMXZqA';
const who = { sender: 'Olga Owner (Acme)', senderName: 'Olga Owner', workspace: 'Acme' };

describe('the invitation mail in a browser', function () {
  this.timeout(30_000);
  let browser: Browser;
  before(async function () {
    browser = await launchBrowser(this);
  });
  after(() => browser?.close());

  for (const [name, round] of [
    ['invitation', { reminder: false, automatic: false, message: 'Hi Grace,\nhere is the agreement we discussed.\n\nThanks, Olga' }],
    ['reminder', { reminder: true, automatic: true, message: null }],
  ] as const) {
    it(`the ${name} reads well on a phone and a desktop`, async () => {
      const mail = composeMail(request, recipient, who, link, round);
      for (const [label, width] of [['phone', 390], ['desktop', 1024]] as const) {
        const page = await browser.newPage({ viewport: { width, height: 800 } });
        await page.setContent(mail.html);
        fs.mkdirSync('test-output', { recursive: true });
        await page.screenshot({ path: `test-output/signing-${name}-mail-${label}.png`, fullPage: true });
        const hrefs = await page.$$eval('a', (as) => as.map((a) => a.getAttribute('href')));
        assert.deepEqual(hrefs, [link, link]);
        assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, `no sideways scrolling at ${width}px`);
        const text = await page.evaluate(() => document.body.innerText);
        assert.match(text, /Fleet maintenance agreement 2027 <Globex & Acme>/);
        assert.match(text, /Saturday, 26 December 2026, 17:00 UTC/);
        if (round.message) assert.match(text, /Hi Grace,\nhere is the agreement we discussed\.\n\nThanks, Olga/);
        await page.close();
      }
    });
  }
});
