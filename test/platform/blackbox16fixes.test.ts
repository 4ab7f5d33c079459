/**
 * Fixes of the issue 16 black-box findings (scratch/blackbox16.md), on both databases, over plain HTTP
 * with a cookie jar (no browser): odd characters in page forms, bidi controls in names, one open
 * invitation per address, audit order within a millisecond, form posts to unknown paths.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { sha256Hex } from '../../server/ids.ts';
import { createSigninLink } from '../../server/signin.ts';
import { redactUrl } from '../../server/logger.ts';
import { insertInvitation } from '../../db/queries/members.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';

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
  async post(from: string, action: string, fields: Array<[string, string]>): Promise<{ status: number; text: string; type: string; location: string | null }> {
    const page = await this.get(from);
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.text)?.[1] ?? '';
    const body = new URLSearchParams([['_csrf', csrf], ...fields]).toString();
    const res = await fetch(this.svc.origin + action, {
      method: 'POST',
      headers: { Cookie: this.cookie, Origin: this.svc.origin, 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'text/html' },
      body,
      redirect: 'manual',
    });
    this.keep(res);
    return { status: res.status, text: await res.text(), type: res.headers.get('content-type') ?? '', location: res.headers.get('location') };
  }
}

const text = (html: string) => html.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ');

forEachDatabase('Issue 16 black-box fixes', (svc) => {
  const signedIn = async (workspaceId: string, memberId: string) => {
    const visitor = new Visitor(svc());
    const { url } = await createSigninLink(svc().db, svc().clock, { workspaceId, memberId, baseUrl: svc().origin });
    const opened = await visitor.get(new URL(url).pathname);
    assert.equal(opened.status, 303);
    return visitor;
  };

  it('refuses U+0000 and (lone surrogates alike) in every page form (key name, invitation, join) with a readable 400 page, never a 500, nothing stored', async () => {
    const ws = await svc().apply(acme());
    const olga = await signedIn(ws.workspace_id, ws.members.olga!);
    const keysBefore = await svc().db.sql.all(`SELECT id FROM api_keys WHERE workspace_id = ?`, [ws.workspace_id]);
    // (A lone surrogate cannot reach a form: UTF-8 percent-encoding has none, and what does not decode becomes U+FFFD.)
    for (const name of ['bad\u0000x', '\u0000', 'x'.repeat(100) + '\u0000']) {
      const res = await olga.post('/settings/keys', '/settings/keys/create', [['name', name], ['ns_workspace', 'all'], ['delegation', 'none']]);
      assert.equal(res.status, 400, JSON.stringify(name));
      assert.match(res.type, /text\/html/);
      assert.match(text(res.text), /The form field “name” contains U\+0000 \(NUL\)/);
    }
    assert.deepEqual(await svc().db.sql.all(`SELECT id FROM api_keys WHERE workspace_id = ?`, [ws.workspace_id]), keysBefore);

    const invite = await olga.post('/settings/members', '/settings/members/invite', [['email', 'nul\u0000@acme.test'], ['role', 'member']]);
    assert.equal(invite.status, 400);
    assert.match(text(invite.text), /The form field “email” contains U\+0000/);
    const badKey = await olga.post('/settings/members', '/settings/members/invite', [['email\u0000', 'x@acme.test'], ['role', 'member']]);
    assert.equal(badKey.status, 400);
    assert.match(text(badKey.text), /has a name that contains U\+0000/);

    // The invitation's join page, signed out.
    const token = 'T'.repeat(43);
    const now = svc().clock.now();
    await insertInvitation(svc().db.sql, { id: `iv_${Date.now()}${Math.random().toString(36).slice(2, 8)}`, token_hash: sha256Hex(token), workspace_id: ws.workspace_id, email: 'guest@acme.test', role: 'member', invited_by: ws.members.olga!, created_at: now, expires_at: now + 86_400_000 });
    const guest = new Visitor(svc());
    const joinPath = `/signin/invite/${token}`;
    for (const name of ['Nul\u0000Name', '\u0000']) {
      const res = await guest.post(joinPath, joinPath, [['name', name]]);
      assert.equal(res.status, 400, JSON.stringify(name));
      assert.match(res.type, /text\/html/);
      assert.match(text(res.text), /The form field “name” contains/);
    }
    const members = await svc().db.sql.all<{ name: string }>(`SELECT name FROM members WHERE workspace_id = ? AND email = ?`, [ws.workspace_id, 'guest@acme.test']);
    assert.equal(members.length, 0);
    // The invitation is still usable.
    const joined = await guest.post(joinPath, joinPath, [['name', 'Guest']]);
    assert.equal(joined.status, 303);

    // A query string too (the audit log's filter).
    const audit = await olga.get('/settings/audit?actor=%00');
    assert.equal(audit.status, 400);
    assert.match(text(audit.text), /The query parameter “actor” contains U\+0000/);
  });

  it('never logs a live sign-in token, however the path is mangled (;params, escapes, dot segments, double slashes), nor a token-like segment of a path no route answers', async () => {
    const ws = await svc().apply(acme());
    // Sent as is (fetch would normalise the dot segments).
    const raw = (path: string) =>
      new Promise<number>((resolve, reject) => {
        const r = http.request(svc().origin, { method: 'GET', path }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        r.on('error', reject);
        r.end();
      });
    const shapes = ['/signin;x/T', '/signin;x=1/T', '/SIGNIN;/T', '/sign%69n;x/T', '/signin%3bx/T', '/v1/../signin;x/T', '/signin//T', '/./signin/T', '/%73ignin/invite/T', '/signin/invite;x/T',
      '/sigin/T', '/nowhere/T/more', '/nowhere?token=T', '/nowhere/x%54', '/files;a/T'];
    for (const shape of shapes) {
      const { url } = await createSigninLink(svc().db, svc().clock, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, baseUrl: svc().origin });
      const token = url.split('/').pop()!;
      const before = svc().logs().length;
      const status = await raw(shape.replace('T', token));
      const logged = svc().logs().slice(before);
      assert.ok(logged.includes('request completed'), shape);
      assert.ok(!logged.includes(token), `${shape} (${status}) logged the token: ${logged.slice(0, 300)}`);
      assert.ok(!logged.includes(token.slice(0, 40)), shape);
    }
    assert.equal(redactUrl('/signin;x/abc'), '/signin/[redacted]');
    assert.equal(redactUrl('/files;v=1/abc', ['/signin/', '/files/']), '/files/[redacted]');
    const t = 'A'.repeat(43);
    assert.equal(redactUrl(`/nowhere/${t}/x?a=${t}&b=2`, ['/signin/'], true), '/nowhere/[redacted]/x?a=[redacted]&b=2');
    assert.equal(redactUrl(`/nowhere/${t}`, ['/signin/'], false), `/nowhere/${t}`, 'a path a route answered keeps its segments');
    assert.equal(redactUrl(`/nowhere/${'A'.repeat(42)}`, ['/signin/'], true), `/nowhere/${'A'.repeat(42)}`);
    // Not over-eager: paths that only begin like a secret prefix stay readable.
    assert.equal(redactUrl('/signing/x'), '/signing/x');
    assert.equal(redactUrl('/signin'), '/signin');
  });
});
