/**
 * The API reference (/docs) in headless Chromium, and the document served without a key. The
 * screenshot goes to test-output/docs.png.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import YAML from 'yaml';
import { catalogue } from '../../generated/catalogue.ts';
import { document } from '../../generated/document.ts';
import { announceBrowser, launchBrowser } from '../support/browser.ts';
import { forEachDatabase } from '../support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

announceBrowser('the API reference browser test');

forEachDatabase('API reference', (svc) => {
  it('serves the document without a key, as YAML and as JSON', async () => {
    const yaml = await fetch(`${svc().baseUrl}/openapi.yaml`);
    assert.equal(yaml.status, 200);
    assert.match(yaml.headers.get('content-type')!, /^application\/yaml/);
    assert.deepEqual(YAML.parse(await yaml.text()), JSON.parse(JSON.stringify(document)));
    const json = await fetch(`${svc().baseUrl}/openapi.json`);
    assert.equal(json.status, 200);
    assert.deepEqual(await json.json(), JSON.parse(JSON.stringify(document)));
  });

  describe('in Chromium', () => {
    let browser: Browser | undefined;
    before(async function () {
      browser = await launchBrowser(this);
    });
    after(async () => {
      await browser?.close();
    });

    it('lists every operation with its x-service-* facts, from the package (no CDN), within the page policy', async function () {
      this.timeout(60_000);
      const context = await browser!.newContext({ viewport: { width: 1280, height: 1000 } });
      const problems: string[] = [];
      const outside: string[] = [];
      try {
        const page = await context.newPage();
        page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
        page.on('console', (msg) => {
          if (msg.type() === 'error') problems.push(`console: ${msg.text()}`);
        });
        page.on('request', (req) => {
          if (!req.url().startsWith(svc().origin) && !req.url().startsWith('data:')) outside.push(req.url());
        });
        const response = await page.goto(`${svc().origin}/docs`);
        assert.equal(response!.status(), 200);
        assert.match(response!.headers()['content-security-policy']!, /script-src 'self';/);
        await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
        await page.waitForSelector('.opblock');
        const listed = await page.$$eval('.opblock .opblock-summary-operation-id', (els) => els.map((e) => e.textContent?.trim()));
        for (const e of catalogue) assert.ok(listed.includes(e.id), `${e.id} is listed`);
        // Open one operation: its rules, example and x-service facts are shown.
        const block = page.locator('.opblock', { has: page.locator('.opblock-summary-operation-id', { hasText: /^customers\.UpdateSalesPipeline$/ }) });
        await block.locator('.opblock-summary').first().click();
        await block.locator('.opblock-body').waitFor();
        const opened = (await block.textContent())!;
        assert.match(opened, /x-service-kind/);
        assert.match(opened, /command/);
        assert.match(opened, /x-service-resource/);
        assert.match(opened, /core:SalesPipeline/);
        assert.match(opened, /Idempotency-Key/);
        fs.mkdirSync(path.join(root, 'test-output'), { recursive: true });
        await page.screenshot({ path: path.join(root, 'test-output', 'docs.png'), fullPage: false });
        // The authentication and error model are in the document's description at the top.
        assert.match((await page.textContent('.information-container'))!, /Authorization: Bearer/);
        assert.deepEqual(outside, [], 'nothing is loaded from outside the service');
        assert.deepEqual(problems, []);
      } finally {
        await context.close();
      }
    });
  });
});
