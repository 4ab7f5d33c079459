/**
 * Headless Chromium for the browser tests (Debian's /usr/bin/chromium driven by playwright-core).
 * Without it the tests are skipped with a loud message, unless REQUIRE_BROWSER=1 (CI), which fails them.
 */
import fs from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

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
