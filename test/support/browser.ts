/**
 * Headless Chromium for the browser tests (Debian's /usr/bin/chromium driven by playwright-core).
 * Without it the tests are skipped with a loud message, unless REQUIRE_BROWSER=1 (CI), which fails them.
 */
import fs from 'node:fs';
import assert from 'node:assert/strict';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { createSigninLink } from '../../server/signin.ts';
import type { TestService } from './service.ts';

export const CHROMIUM = '/usr/bin/chromium';
const available = fs.existsSync(CHROMIUM);
const required = process.env.REQUIRE_BROWSER === '1';

/** Says once, at load time, that `what` will be skipped (or fail) for want of Chromium. */
export function announceBrowser(what: string): void {
  if (!available) console.warn(`\n!!! ${CHROMIUM} is missing: ${what} ${required ? 'FAILS (REQUIRE_BROWSER=1)' : 'is SKIPPED'}. Install Debian's chromium to run it. !!!\n`);
}

/** Launches Chromium in a `before` hook, or skips the suite (fails it under REQUIRE_BROWSER=1). */
export async function launchBrowser(ctx: Mocha.Context): Promise<Browser> {
  if (!available) {
    if (required) throw new Error(`REQUIRE_BROWSER=1 but ${CHROMIUM} is missing`);
    ctx.skip();
  }
  // Without the background-networking flags Chromium keeps calling out, which this machine refuses.
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/**
 * A browser context signed in as a member through a one-time link (as a person clicks it in a mail);
 * the page ends on `next`. `problems` collects the page's errors and console errors; `cookie` is the
 * session cookie, for requests a test makes around the browser.
 */
export async function signedInPage(
  browser: Browser,
  svc: TestService,
  who: { workspaceId: string; memberId: string },
  next: string,
): Promise<{ context: BrowserContext; page: Page; cookie: string; problems: string[] }> {
  const { url } = await createSigninLink(svc.db, svc.clock, { ...who, next, baseUrl: svc.origin });
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console: ${msg.text()}`);
  });
  const response = await page.goto(url);
  assert.equal(response!.status(), 200);
  const cookie = `wso_session=${(await context.cookies()).find((c) => c.name === 'wso_session')!.value}`;
  return { context, page, cookie, problems };
}

/**
 * What does not fit the page's width (run it at 390 px): the page scrolling sideways, or a table wider
 * than the screen or cut off inside a box that scrolls. Empty when everything fits.
 */
export function phoneMisfits(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    const root = document.documentElement;
    if (root.scrollWidth > window.innerWidth) out.push(`the page is ${root.scrollWidth} px wide`);
    for (const t of Array.from(document.querySelectorAll('table'))) {
      const box = t.parentElement;
      if (t.getBoundingClientRect().right > window.innerWidth + 0.5 || (box !== null && box.scrollWidth > box.clientWidth + 1)) out.push(`table.${t.className || '(no class)'} is ${Math.round(t.scrollWidth)} px wide`);
    }
    return out;
  });
}
