/**
 * Issue 21, finding 1: the development mailbox page (`/mailbox`) must not hand anyone a working link
 * addressed to someone else. An admin who asks `/signin` for the owner's address, or reads an
 * owner-role invitation or an outside signer's `/sign/<token>` mail, gets the mail with its links
 * hidden; only the addressee sees their own links live. In production (`NODE_ENV=production`) the page
 * is off unless `MAILBOX_PAGE=on`, and the start log says whether it is on and what it shows.
 */
import assert from 'node:assert/strict';
import pino from 'pino';
import type { WorkspaceSpec } from '../../server/admin.ts';
import { mailboxSettings, mailboxStartupLine } from '../../handlers/mailbox/index.ts';
import { mailConfigFromEnv, mailStartupLine } from '../../server/mailer.ts';
import { listMailbox, MailboxMailer, readMailbox } from '../../server/mailer/mailbox.ts';
import { createSigninLink } from '../../server/signin.ts';
import { acme } from '../support/fixtures.ts';
import { databases, forEachDatabase, startTestService, type TestService } from '../support/service.ts';

/** A visitor with cookies: GETs pages, posts forms with the page's CSRF token from its own origin. */
class Visitor {
  private readonly cookies = new Map<string, string>();
  constructor(private readonly svc: TestService) {}

  private keep(res: Response): void {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const at = pair!.indexOf('=');
      this.cookies.set(pair!.slice(0, at), pair!.slice(at + 1));
    }
  }

  private get cookie(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  async get(path: string): Promise<{ status: number; text: string; location: string | null }> {
    const res = await fetch(this.svc.origin + path, { headers: { Cookie: this.cookie, Accept: 'text/html' }, redirect: 'manual' });
    this.keep(res);
    return { status: res.status, text: await res.text(), location: res.headers.get('location') };
  }

  /** Posts `fields` (urlencoded as a browser does) with the `_csrf` of the form page `from`. */
  async post(from: string, action: string, fields: Array<[string, string]>): Promise<{ status: number; text: string }> {
    const page = await this.get(from);
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.text)?.[1] ?? '';
    const res = await fetch(this.svc.origin + action, {
      method: 'POST',
      headers: { Cookie: this.cookie, Origin: this.svc.origin, 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'text/html' },
      body: new URLSearchParams([['_csrf', csrf], ...fields]).toString(),
      redirect: 'manual',
    });
    this.keep(res);
    return { status: res.status, text: await res.text() };
  }
}

/** Acme with addresses of its own (the sign-in mail names one workspace only when the address is in one). */
function uniqueAcme(tag: string): WorkspaceSpec {
  const spec = acme();
  for (const m of Object.values(spec.members ?? {})) m.email = m.email.replace('@acme.test', `@${tag}.acme.test`);
  return spec;
}

/** What every page a visitor can reach says about one mail: the list, the mail, its HTML part. */
async function everythingAbout(visitor: Visitor, id: string): Promise<string> {
  const pages = await Promise.all([visitor.get('/mailbox'), visitor.get(`/mailbox/${id}`), visitor.get(`/mailbox/${id}/html`)]);
  return pages.map((p) => p.text).join('\n');
}

async function waitForMail(svc: TestService, workspaceId: string, to: string, tag: string) {
  for (let i = 0; i < 200; i++) {
    const [mail] = await listMailbox(svc.db, { workspaceId, to, tag, limit: 1 });
    if (mail) return (await readMailbox(svc.db, mail.id))!;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`no ${tag} mail to ${to}`);
}

forEachDatabase('Issue 21: the development mailbox shows no one a live link addressed to someone else', (svc) => {
  const signedIn = async (workspaceId: string, memberId: string) => {
    const visitor = new Visitor(svc());
    const { url } = await createSigninLink(svc().db, svc().clock, { workspaceId, memberId, baseUrl: svc().origin });
    assert.equal((await visitor.get(new URL(url).pathname)).status, 303);
    return visitor;
  };

  it('an admin who asks /signin for the owner’s address cannot take the owner’s link from /mailbox; the owner reads it live', async () => {
    const spec = uniqueAcme('t1');
    const ws = await svc().apply(spec);
    const owner = spec.members!.olga!.email;
    const bob = await signedIn(ws.workspace_id, ws.members.bob!);
    // Anyone may ask for a sign-in link for any address.
    const asked = await new Visitor(svc()).post('/signin', '/signin', [['email', owner]]);
    assert.equal(asked.status, 200);
    const mail = await waitForMail(svc(), ws.workspace_id, owner, 'platform.signin');
    const link = /https?:\/\/\S+\/signin\/([A-Za-z0-9_-]{43})/.exec(mail.text)!;
    const token = link[1]!;

    // The admin sees that a mail left (to whom, its subject), never the link.
    const list = await bob.get('/mailbox');
    assert.equal(list.status, 200);
    assert.match(list.text, new RegExp(owner.replace(/\./g, '\\.')));
    const seen = await everythingAbout(bob, mail.id);
    assert.ok(!seen.includes(token), 'the admin read the owner’s sign-in token on the mailbox pages');
    assert.ok(!seen.includes('/signin/' + token.slice(0, 20)));
    const shown = await bob.get(`/mailbox/${mail.id}`);
    assert.equal(shown.status, 200);
    assert.match(shown.text, /link hidden/i);
    assert.ok(!/href="[^"]*\/signin\/[A-Za-z0-9_-]{20,}/.test(shown.text));
    const html = await bob.get(`/mailbox/${mail.id}/html`);
    assert.equal(html.status, 403);
    // The token still works (nothing used it), and only for its addressee.
    const olga = await signedIn(ws.workspace_id, ws.members.olga!);
    const own = await olga.get(`/mailbox/${mail.id}`);
    assert.equal(own.status, 200);
    assert.ok(own.text.includes(`href="${link[0]}"`), 'the owner reads her own link live');
    assert.equal((await olga.get(`/mailbox/${mail.id}/html`)).status, 200);
    // The request log names the pages without the mail's id (nor, of course, the token).
    for (let i = 0; i < 50 && !svc().logs().includes('/mailbox/[redacted]'); i++) await new Promise((r) => setTimeout(r, 20));
    assert.match(svc().logs(), /"url":"\/mailbox\/\[redacted\]"/);
    // (The mailer's own line names the mail for operators, who read it whole with the CLI anyway.)
    const requestLines = svc().logs().split('\n').filter((l) => l.includes('"request completed"'));
    assert.ok(!requestLines.some((l) => l.includes(mail.id)), 'a mail id reached the request log');
    assert.ok(!svc().logs().includes(token), 'a sign-in token reached the log');
  });

  it('hides the links of an owner-role invitation and of an outside signer’s /sign/ mail from every member, the sender included', async () => {
    const spec = uniqueAcme('t2');
    const ws = await svc().apply(spec);
    const olga = await signedIn(ws.workspace_id, ws.members.olga!);
    const bob = await signedIn(ws.workspace_id, ws.members.bob!);
    const invited = await olga.post('/settings/members', '/settings/members/invite', [['email', 'new.owner@t2.example.test'], ['role', 'owner']]);
    assert.ok(invited.status === 303 || invited.status === 200, `the invitation is made (${invited.status})`);
    const invite = await waitForMail(svc(), ws.workspace_id, 'new.owner@t2.example.test', 'platform.invite');
    const inviteToken = /\/signin\/invite\/([A-Za-z0-9_-]{43})/.exec(invite.text)![1]!;

    // A signing request's invitation, as the signing module mails it: a live /sign/<token> link for an outside signer.
    const mailer = new MailboxMailer('Workspace Operations <ops@example.test>', { db: svc().db, clock: svc().clock, logger: pino({ level: 'silent' }) });
    const signToken = 'S'.repeat(20) + 'x9_-'.repeat(6);
    const signLink = `${svc().origin}/sign/${signToken}`;
    const sent = await mailer.send({
      to: 'rita@outside.example.test',
      subject: 'Olga Owner asks you to sign "NDA"',
      text: `Hello Rita,\n\nOlga Owner asks you to sign "NDA".\n\nOpen the document:\n${signLink}\n`,
      html: `<p><a href="${signLink}">Open the document</a></p>`,
      tag: 'signing.invitation',
      workspaceId: ws.workspace_id,
      headers: { 'X-Signing-Request': 'sr_test' },
    });
    const signId = sent.messageId.slice(1, sent.messageId.indexOf('@'));

    for (const [who, visitor] of [['admin', bob], ['owner (the inviter and the sender)', olga]] as const) {
      const aboutInvite = await everythingAbout(visitor, invite.id);
      assert.ok(!aboutInvite.includes(inviteToken), `the ${who} read the invitation token`);
      const aboutSign = await everythingAbout(visitor, signId);
      assert.ok(!aboutSign.includes(signToken), `the ${who} read the signer’s token`);
      assert.ok(!aboutSign.includes(signToken.slice(0, 20)), `the ${who} read part of the signer’s token`);
      // The mail itself is there, with its wording, so a developer sees what left.
      const page = await visitor.get(`/mailbox/${signId}`);
      assert.equal(page.status, 200);
      assert.match(page.text, /Olga Owner asks you to sign/);
      assert.match(page.text, /link hidden/i);
    }
  });

  it('keeps the rules of the page: plain members refused, other workspaces’ mail absent', async () => {
    const spec = uniqueAcme('t3');
    const ws = await svc().apply(spec);
    const other = await svc().apply(uniqueAcme('t3other'));
    const mailer = new MailboxMailer('Workspace Operations <ops@example.test>', { db: svc().db, clock: svc().clock, logger: pino({ level: 'silent' }) });
    const sent = await mailer.send({ to: spec.members!.ada!.email, subject: 'For Ada', text: `x ${svc().origin}/inbox`, html: '<p>x</p>', workspaceId: ws.workspace_id });
    const id = sent.messageId.slice(1, sent.messageId.indexOf('@'));
    const ada = await signedIn(ws.workspace_id, ws.members.ada!);
    assert.equal((await ada.get('/mailbox')).status, 403);
    assert.equal((await ada.get(`/mailbox/${id}`)).status, 403);
    const stranger = await signedIn(other.workspace_id, other.members.olga!);
    assert.equal((await stranger.get(`/mailbox/${id}`)).status, 404);
    assert.ok(!(await stranger.get('/mailbox')).text.includes('For Ada'));
  });
});

describe('Issue 21: the mailbox page in production', () => {
  it('is off with NODE_ENV=production unless MAILBOX_PAGE=on, on in development unless MAILBOX_PAGE=off; never with SMTP; a bad value is a readable error', () => {
    assert.equal(mailboxSettings({}).page, true);
    assert.equal(mailboxSettings({ NODE_ENV: 'development' }).page, true);
    assert.equal(mailboxSettings({ NODE_ENV: 'production' }).page, false);
    assert.equal(mailboxSettings({ NODE_ENV: 'production', MAILBOX_PAGE: 'on' }).page, true);
    assert.equal(mailboxSettings({ MAILBOX_PAGE: 'off' }).page, false);
    assert.equal(mailboxStartupLine(mailboxSettings({ NODE_ENV: 'production', MAILBOX_PAGE: 'on' }), true).fields.mailbox_page, 'off', 'never with SMTP');
    assert.throws(() => mailboxSettings({ MAILBOX_PAGE: 'yes please' }), /MAILBOX_PAGE must be on or off \(got "yes please"\)/);
  });

  it('says at start whether the page is on and what it shows', () => {
    assert.match(mailStartupLine(mailConfigFromEnv({ NODE_ENV: 'production' })).message, /mail is NOT delivered: it goes to the development mailbox/);
    const off = mailboxStartupLine(mailboxSettings({ NODE_ENV: 'production' }), false);
    assert.equal(off.fields.mailbox_page, 'off');
    assert.match(off.message, /npm run admin -- mail list/);
    assert.match(off.message, /the page \/mailbox is off \(NODE_ENV=production\); MAILBOX_PAGE=on turns it on/);
    const on = mailboxStartupLine(mailboxSettings({ NODE_ENV: 'production', MAILBOX_PAGE: 'on' }), false);
    assert.equal(on.fields.mailbox_page, 'on');
    assert.equal(on.level, 'warn', 'a development page turned on in production is said loudly');
    assert.equal(mailboxStartupLine(mailboxSettings({}), false).level, 'info');
    assert.match(on.message, /the page \/mailbox is on \(MAILBOX_PAGE=on with NODE_ENV=production\): owners and admins see their workspace’s mail \(recipients, subjects, text\) with links hidden, except mail addressed to themselves/);
  });

  for (const database of databases) {
    it(`has no /mailbox page and no navigation entry in production without MAILBOX_PAGE [${database.name}]`, async function () {
      this.timeout(30_000);
      const svc = await startTestService(database.url(), { env: { NODE_ENV: 'production' } });
      try {
        const ws = await svc.apply(uniqueAcme('prod'));
        const olga = new Visitor(svc);
        const { url } = await createSigninLink(svc.db, svc.clock, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, baseUrl: svc.origin });
        assert.equal((await olga.get(new URL(url).pathname)).status, 303);
        assert.equal((await olga.get('/mailbox')).status, 404);
        const settings = await olga.get('/settings');
        assert.equal(settings.status, 200);
        assert.ok(!settings.text.includes('href="/mailbox"'), 'no Mailbox entry in production');
        assert.match(svc.logs(), /the page \/mailbox is off/);
      } finally {
        await svc.close();
      }
    });
  }
});
