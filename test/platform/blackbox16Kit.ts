/**
 * The shared setup of the issue 16 black-box browser suites (test/platform/blackbox16-*.browser.test.ts):
 * per database a service with a real SMTP server, Acme and another team's workspace (Globex), Chromium,
 * and the helpers a person's browser uses (sign-in by the mailed link, page forms with their CSRF token).
 * `blackbox16Service(database)` registers the before/after hooks in the calling describe (after: no 5xx in
 * the log) and answers the helpers; `state()` gives the service, workspaces and mail once `before` ran.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { ApplyResult, WorkspaceSpec } from '../../server/admin.ts';
import { loadConfig } from '../../server/config.ts';
import { mailConfigFromEnv } from '../../server/mailer.ts';
import { announceBrowser, launchBrowser } from '../support/browser.ts';
import { acme } from '../support/fixtures.ts';
import { startTestService, type TestDatabase, type TestService } from '../support/service.ts';
import { type MailServer, startMailServer } from '../support/smtp.ts';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const shots = path.join(root, 'test-output');
export const PUBLIC = 'https://ops.acme.example';
export const run = promisify(execFile);

announceBrowser('the issue 16 black-box browser test');

/** Another team's workspace: the same shape as acme, its own addresses. */
export function globex(): WorkspaceSpec {
  const spec = acme();
  spec.workspace = { name: 'Globex' };
  for (const m of Object.values(spec.members ?? {})) (m as { email: string }).email = (m as { email: string }).email.replace('@acme.test', '@globex.test');
  return spec;
}

export async function mailsFor(mail: MailServer, address: string, count: number) {
  const got = () => mail.mails.filter((m) => m.to.some((a) => a.toLowerCase() === address.toLowerCase()));
  for (let i = 0; i < 200 && got().length < count; i++) await new Promise((r) => setTimeout(r, 25));
  assert.equal(got().length, count, `${address} received ${got().length} mails, expected ${count}`);
  return got();
}

/** Every text value of every table of the database, as one string (to look for a secret). */
export async function everyStoredText(svc: TestService): Promise<Map<string, string>> {
  const tables =
    svc.db.dialect === 'pg'
      ? (await svc.db.sql.all<{ name: string }>(`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)).map((t) => t.name)
      : (await svc.db.sql.all<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table'`)).map((t) => t.name);
  const all = new Map<string, string>();
  for (const t of tables) {
    let text = '';
    const rows = await svc.db.sql.all<Record<string, unknown>>(`SELECT * FROM "${t}"`);
    for (const r of rows) for (const v of Object.values(r)) if (typeof v === 'string') text += `${v}\n`;
      else if (v instanceof Uint8Array) text += `${Buffer.from(v).toString('latin1')}\n`;
    all.set(t, text);
  }
  return all;
}

/** Registers the suite's service, mail server and browser (before/after in the calling describe) and answers its helpers. */
export function blackbox16Service(database: TestDatabase) {
  let mail: MailServer;
  let svc: TestService;
  let ws: ApplyResult;
  let other: ApplyResult;
  let browser: Browser;
  const contexts: BrowserContext[] = [];
  const secretsShown: string[] = [];
  const tokensSeen: string[] = [];

  const newPage = async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 }, deviceScaleFactor: 1 });
    contexts.push(context);
    const page = await context.newPage();
    return { context, page };
  };
  /** Signs in by e-mail in a fresh browser context, as a person does: the form, the mail, the link. */
  const signInByMail = async (email: string, next = '/') => {
    const { context, page } = await newPage();
    const before = mail.mails.filter((m) => m.to.includes(email)).length;
    await page.goto(`${svc.origin}/signin?next=${encodeURIComponent(next)}`);
    await page.fill('#signin-email', email);
    await Promise.all([page.waitForNavigation(), page.click('button:has-text("Send me a sign-in link")')]);
    assert.match((await page.textContent('main'))!, /If that address belongs to a member, a sign-in link is on its way/);
    const received = (await mailsFor(mail, email, before + 1)).at(-1)!;
    const m = /(\S+?)\/signin\/([A-Za-z0-9_-]{20,})/.exec(received.mail.text!);
    assert.ok(m, 'no sign-in link in the mail');
    assert.equal(m[1], PUBLIC);
    tokensSeen.push(m[2]!);
    const res = await page.goto(`${svc.origin}/signin/${m[2]}`);
    assert.equal(res!.status(), 200);
    const cookie = `wso_session=${(await context.cookies()).find((c) => c.name === 'wso_session')!.value}`;
    return { context, page, cookie };
  };
  const csrfOf = async (page: Page, url: string) => {
    await page.goto(`${svc.origin}${url}`);
    return (await page.locator('input[name="_csrf"]').first().getAttribute('value'))!;
  };
  /** A form post as the page makes it, with chosen fields (status, location, body). */
  const postForm = async (page: Page, from: string, action: string, fields: Record<string, string>, headers: Record<string, string> = { Origin: svc.origin }) => {
    const csrf = await csrfOf(page, from);
    // A connection of its own: a kept-alive one that the server closes as idle just as the post is sent ends in ECONNRESET (seen under load).
    const res = await page.request.post(`${svc.origin}${action}`, { form: { _csrf: csrf, ...fields }, headers: { Connection: 'close', ...headers }, maxRedirects: 0 });
    return { status: res.status(), location: res.headers()['location'], body: await res.text() };
  };
  const callWith = (secret: string, op: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${svc.baseUrl}/operations/${op}`, { method: 'POST', headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const keyRow = (id: string) => svc.db.sql.one<{ id: string; name: string; revoked_at: number | null }>(`SELECT id, name, revoked_at FROM api_keys WHERE id = ?`, [id]);
  const countKeys = async (workspaceId: string) => (await svc.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM api_keys WHERE workspace_id = ?`, [workspaceId]))!.n;

  before(async function () {
    fs.mkdirSync(shots, { recursive: true });
    browser = await launchBrowser(this);
    mail = await startMailServer();
    const { databaseUrl: _unused, port: _port, ...egress } = loadConfig({ EGRESS_ALLOW_DESTINATIONS: '127.0.0.1:9443', EGRESS_ALLOWED_PORTS: '9443' });
    svc = await startTestService(database.url(), { ...egress, mail: mailConfigFromEnv({ SMTP_URL: mail.url, MAIL_FROM: 'Acme Operations <ops@acme.example>' }), publicUrl: PUBLIC });
    const spec = acme();
    spec.keys!.hooks = { name: 'Hooks', operations: ['webhooks.*'] };
    ws = await svc.apply(spec);
    other = await svc.apply(globex());
    for (const k of [...Object.values(ws.keys), ...Object.values(other.keys)]) secretsShown.push(k.secret);
  });
  after(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await svc?.close();
    await mail?.close();
    assert.doesNotMatch(svc.logs(), /"statusCode":5\d\d/, 'the service answered a 5xx');
  });

  const state = () => ({ mail, svc, ws, other, browser });
  return { state, secretsShown, tokensSeen, newPage, signInByMail, csrfOf, postForm, callWith, keyRow, countKeys };
}
