/**
 * Scoped page sessions (server/pages/scoped.ts): a person who is not a member opens a one-time link
 * in headless Chromium and gets a page session for one purpose and subject. A GET of the link changes
 * nothing (mail scanners and previews fetch links); the session reaches only its purpose's pages,
 * never member pages or the API; it expires; only hashes are stored; tokens never reach the log.
 * A small probe module stands in for the module that will use it (documents and signing).
 */
import crypto from 'node:crypto';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { Request, Response } from 'express';
import pino from 'pino';
import type { Browser } from 'playwright-core';
import { migrations, modules } from '../../app.ts';
import { type Database, openDatabase } from '../../db/database.ts';
import { applyWorkspace } from '../../server/admin.ts';
import { FakeClock } from '../../server/clock.ts';
import { loadConfig } from '../../server/config.ts';
import { loggerOptions } from '../../server/logger.ts';
import type { AnyServiceModule } from '../../server/module.ts';
import { createScopedLink } from '../../server/pages/scoped.ts';
import { buildService } from '../../server/service.ts';
import { createSigninLink } from '../../server/signin.ts';
import { announceBrowser, launchBrowser } from '../support/browser.ts';
import { acme } from '../support/fixtures.ts';
import { databases } from '../support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** The module of the next issue, in miniature: one page for the purpose `probe.sign`, one for another purpose. */
const probe: AnyServiceModule = {
  namespace: 'probe',
  handlers: {},
  routes: ({ pages }) => {
    const router = pages.router();
    for (const [where, purpose] of [['/probe/sign', 'probe.sign'], ['/probe/other', 'probe.other']] as const) {
      router.get(where, async (req: Request, res: Response) => {
        const session = await pages.scoped(req, res, purpose);
        if (!session) return;
        pages.notice(res, 200, 'Signing', [`subject ${session.subject}`, `workspace ${session.workspaceId}`]);
      });
    }
    return router;
  },
};

announceBrowser('the scoped page session test');

for (const database of databases) {
  describe(`scoped page sessions opened by a one-time link [${database.name}]`, function () {
    this.timeout(60_000);
    let db: Database;
    let server: Server;
    let origin: string;
    let browser: Browser | undefined;
    let logs = '';
    const clock = new FakeClock();
    const url = database.url();

    before(async function () {
      db = openDatabase(url);
      await db.migrate(migrations);
      const config = { ...loadConfig({}), databaseUrl: url, validateResponses: true, rateLimitPerSecond: 1000, rateLimitBurst: 1000, collectFlushIntervalMs: 0 };
      const sink = new Writable({ write: (chunk, _enc, done) => ((logs += chunk.toString()), done()) });
      const service = buildService({ db, clock, config, logger: pino(loggerOptions('info'), sink) }, [...modules, probe]);
      server = await new Promise((resolve) => {
        const s = http.createServer(service.handler).listen(0, '127.0.0.1', () => resolve(s));
      });
      origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      browser = await launchBrowser(this);
    });
    after(async () => {
      await browser?.close();
      server?.closeAllConnections();
      await new Promise((resolve) => server?.close(resolve));
      const schema = db?.dialect === 'pg' ? new URL(url).searchParams.get('schema') : null;
      if (schema) await db.knex.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await db?.close();
    });

    const rows = async () => ({
      links: await db.sql.all(`SELECT * FROM one_time_links ORDER BY created_at, token_hash`),
      sessions: await db.sql.all(`SELECT * FROM scoped_sessions ORDER BY id`),
    });

    it('opens a session through the link (a GET changes nothing); it reaches its purpose only, never member pages or the API, and expires', async () => {
      const ws = await applyWorkspace(db, clock, acme());
      const { url: link } = await createScopedLink(db, clock, {
        workspaceId: ws.workspace_id,
        purpose: 'probe.sign',
        subject: 'signer_1',
        next: '/probe/sign',
        baseUrl: origin,
        linkTtlMs: 7 * DAY,
        sessionTtlMs: HOUR,
      });
      const token = link.slice(link.lastIndexOf('/') + 1);
      assert.match(link, new RegExp(`^${origin}/signin/scoped/[A-Za-z0-9_-]{43}$`));

      // Scanners and previews GET (and HEAD) the link: it stays unused, nothing is written.
      const before = await rows();
      assert.equal(before.links.length, 1);
      assert.equal(JSON.stringify(before).includes(token), false, 'only the hash is stored');
      for (const method of ['GET', 'GET', 'HEAD']) {
        const res = await fetch(link, { method, redirect: 'manual' });
        assert.equal(res.status, 200, method);
        assert.equal(res.headers.getSetCookie().length, 0, 'no cookie from a GET');
        assert.equal(res.headers.get('referrer-policy'), 'same-origin', 'the token goes nowhere else as a referrer');
      }
      assert.deepEqual(await rows(), before, 'a GET of the link changed nothing');

      // A person clicks it in a mail and confirms.
      const context = await browser!.newContext();
      const page = await context.newPage();
      await page.goto(link);
      assert.equal(await page.textContent('h1'), 'Continue');
      await Promise.all([page.waitForURL(`${origin}/probe/sign`), page.click('button:has-text("Continue")')]);
      assert.deepEqual(await page.locator('main p').allTextContents(), ['subject signer_1', `workspace ${ws.workspace_id}`]);
      fs.mkdirSync(path.join(root, 'test-output'), { recursive: true });
      await page.screenshot({ path: path.join(root, 'test-output', `scoped-session-${database.name}.png`) });
      const cookies = await context.cookies();
      assert.deepEqual(cookies.map((c) => c.name), ['wso_scoped'], 'a scoped session, never a member session');
      const scoped = cookies[0]!;
      assert.equal(scoped.httpOnly, true);
      assert.equal(scoped.sameSite, 'Lax');
      const after = await rows();
      assert.notEqual(after.links[0]!.used_at, null);
      assert.equal(after.sessions.length, 1);
      assert.equal(JSON.stringify(after).includes(scoped.value), false, 'only the session hash is stored');

      // Only its purpose: member pages, another purpose and the API refuse it; `/` treats it as nobody.
      const cookie = { Cookie: `wso_scoped=${scoped.value}` };
      for (const where of ['/inbox', '/dashboard', '/settings/webhooks', '/settings/automation', '/probe/other']) {
        const res = await fetch(`${origin}${where}`, { headers: cookie, redirect: 'manual' });
        assert.equal(res.status, 401, where);
        assert.match(res.headers.get('content-type')!, /^text\/html/);
      }
      const api = await fetch(`${origin}/v1/operations/workspace.ListBundles`, { method: 'POST', headers: { ...cookie, 'Content-Type': 'application/json' }, body: '{}' });
      assert.equal(api.status, 401);
      const home = await fetch(`${origin}/`, { headers: cookie, redirect: 'manual' });
      assert.equal(home.headers.get('location'), '/docs');
      // A member session does not open the scoped page either.
      const memberLink = await createSigninLink(db, clock, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, baseUrl: origin });
      const signedIn = await fetch(memberLink.url, { redirect: 'manual' });
      const memberCookie = signedIn.headers.getSetCookie()[0]!.split(';')[0]!;
      assert.equal((await fetch(`${origin}/probe/sign`, { headers: { Cookie: memberCookie } })).status, 401);

      // The link works once; the session ends after its hour.
      const again = await fetch(link, { method: 'POST', redirect: 'manual', headers: { Origin: origin } });
      assert.equal(again.status, 410);
      assert.equal((await fetch(link)).status, 410);
      clock.advance(HOUR + 1);
      await page.reload();
      assert.equal(await page.textContent('h1'), 'Link needed');
      await context.close();

      // Neither token reached the log (the link is under /signin/, logged as /signin/[redacted]).
      assert.equal(logs.includes(token), false);
      assert.equal(logs.includes(scoped.value), false);
      assert.match(logs, /"url":"\/signin\/\[redacted\]"/);
    });

    it('refuses unknown, malformed and expired links, and posts from another origin', async () => {
      const ws = await applyWorkspace(db, clock, acme());
      const make = () => createScopedLink(db, clock, { workspaceId: ws.workspace_id, purpose: 'probe.sign', subject: 's', next: '/probe/sign', baseUrl: origin, linkTtlMs: DAY, sessionTtlMs: HOUR });
      assert.equal((await fetch(`${origin}/signin/scoped/${'A'.repeat(43)}`)).status, 404);
      assert.equal((await fetch(`${origin}/signin/scoped/short`)).status, 404);
      const foreign = await make();
      const refused = await fetch(foreign.url, { method: 'POST', redirect: 'manual', headers: { Origin: 'https://evil.example' } });
      assert.equal(refused.status, 403);
      assert.equal((await fetch(foreign.url)).status, 200, 'still unused');
      clock.advance(DAY + 1);
      assert.equal((await fetch(foreign.url)).status, 410);
      assert.equal((await fetch(foreign.url, { method: 'POST', redirect: 'manual', headers: { Origin: origin } })).status, 410);
      await assert.rejects(
        createScopedLink(db, clock, { workspaceId: ws.workspace_id, purpose: 'probe.sign', subject: 's', next: '//evil.example', baseUrl: origin, linkTtlMs: DAY, sessionTtlMs: HOUR }),
        /next must be a path/,
      );
      await assert.rejects(
        createScopedLink(db, clock, { workspaceId: ws.workspace_id, purpose: 'probe.sign', subject: 's', next: '/probe/sign', baseUrl: origin, linkTtlMs: DAY, sessionTtlMs: 2 * DAY }),
        /TTLs out of bounds/,
      );
      await assert.rejects(
        createScopedLink(db, clock, { workspaceId: ws.workspace_id, purpose: 'signin', subject: 's', next: '/probe/sign', baseUrl: origin, linkTtlMs: DAY, sessionTtlMs: HOUR }),
        /purpose must be/,
      );
    });

    it('keeps sign-in and scoped links in one store, and neither kind opens as the other', async () => {
      const ws = await applyWorkspace(db, clock, acme());
      const scoped = await createScopedLink(db, clock, { workspaceId: ws.workspace_id, purpose: 'probe.sign', subject: 's', next: '/probe/sign', baseUrl: origin, linkTtlMs: DAY, sessionTtlMs: HOUR });
      const signin = await createSigninLink(db, clock, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, baseUrl: origin });
      const scopedToken = scoped.url.split('/').pop()!;
      const signinToken = signin.url.split('/').pop()!;
      const stored = (await rows()).links as { purpose: string; subject: string; token_hash: string }[];
      const hashOf = (token: string) => crypto.createHash('sha256').update(token).digest('hex');
      const ours = stored.filter((l) => l.token_hash === hashOf(scopedToken) || l.token_hash === hashOf(signinToken));
      assert.deepEqual(ours.map((l) => [l.purpose, l.subject]).sort(), [['probe.sign', 's'], ['signin', ws.members.olga!]]);
      assert.equal(JSON.stringify(stored).includes(scopedToken) || JSON.stringify(stored).includes(signinToken), false, 'only hashes are stored');
      // A scoped token at the sign-in path, and a sign-in token at the scoped path: unknown, and not used up.
      assert.equal((await fetch(`${origin}/signin/${scopedToken}`, { redirect: 'manual' })).status, 404);
      assert.equal((await fetch(`${origin}/signin/scoped/${signinToken}`)).status, 404);
      assert.equal((await fetch(`${origin}/signin/scoped/${signinToken}`, { method: 'POST', redirect: 'manual', headers: { Origin: origin } })).status, 404);
      assert.equal((await fetch(scoped.url)).status, 200, 'the scoped link is still unused');
      assert.equal((await fetch(signin.url, { redirect: 'manual' })).status, 303, 'the sign-in link still works once');
      assert.equal((await fetch(signin.url, { redirect: 'manual' })).status, 410);
    });
  });
}
