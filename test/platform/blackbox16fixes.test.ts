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
import { describeAction, isolateLabel, readAudit, recordAudit } from '../../server/audit.ts';
import { insertInvitation } from '../../handlers/members/queries.ts';
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

  it('isolates user-provided labels in audit sentences (bidi controls shown as [U+…], right-to-left names in FSI…PDI) on the page too, and refuses bidi overrides in names typed on the pages', async () => {
    const FSI = '\u2068';
    const PDI = '\u2069';
    assert.equal(isolateLabel('Olga Owner'), 'Olga Owner');
    assert.equal(isolateLabel('Sync \u202Egnp.exe'), 'Sync [U+202E]gnp.exe');
    assert.equal(isolateLabel('سارة'), `${FSI}سارة${PDI}`);
    assert.equal(isolateLabel('x\u2069\u202Eسارة'), `${FSI}x[U+2069][U+202E]سارة${PDI}`, 'a label cannot close its own isolate');
    const what = describeAction({ action: 'key.created', subject_type: 'key', subject_id: 'ak_1', subject_label: 'Sync \u202Egnp.exe 🔑 Åsa', details: JSON.stringify({ operations: ['a', 'b'], delegation: 'none' }) });
    assert.equal(what, 'created the API key “Sync [U+202E]gnp.exe 🔑 Åsa” (ak_1) with 2 operations, acting for nobody');
    assert.equal(describeAction({ action: 'member.disabled', subject_type: 'member', subject_id: 'mb_1', subject_label: 'נינה', details: '{}' }), `disabled ${FSI}נינה${PDI}`);
    assert.equal(
      describeAction({ action: 'key.delegation_changed', subject_type: 'key', subject_id: 'ak_1', subject_label: 'k', details: JSON.stringify({ before: 'none', after: ['mb_x'] }) }, new Map([['mb_x', 'ليلى']])),
      `changed whom the API key “k” (ak_1) may act for from nobody to ${FSI}ليلى${PDI}`,
    );

    const ws = await svc().apply(acme());
    // Labels made outside the pages (the CLI, an older row) are isolated on the audit page.
    await recordAudit(svc().db.sql, { workspaceId: ws.workspace_id, actor: { type: 'member', id: ws.members.olga!, label: '\u202Eevil' }, action: 'key.revoked', subject: { type: 'key', id: 'ak_rtl', label: 'مفتاح' }, at: svc().clock.now() });
    const olga = await signedIn(ws.workspace_id, ws.members.olga!);
    const page = await olga.get('/settings/audit');
    assert.equal(page.status, 200);
    const row = /<tr data-entry="[^"]+" data-action="key.revoked">([\s\S]*?)<\/tr>/.exec(page.text)?.[1] ?? '';
    assert.match(row, new RegExp(`<td data-who>\\[U\\+202E\\]evil \\(member\\)</td>`));
    assert.ok(row.includes(`revoked the API key “${FSI}مفتاح${PDI}” (ak_rtl): it no longer works`), row);
    assert.ok(!page.text.includes('\u202E'), 'no override reaches the page');

    // Typed on the pages: refused, readably, nothing stored.
    const keysBefore = (await svc().db.sql.all(`SELECT id FROM api_keys WHERE workspace_id = ?`, [ws.workspace_id])).length;
    const key = await olga.post('/settings/keys', '/settings/keys/create', [['name', 'Sync \u202Egnp.exe'], ['ns_workspace', 'all'], ['delegation', 'none']]);
    assert.equal(key.status, 303);
    assert.match(text((await olga.get('/settings/keys')).text), /The name contains U\+202E, a character that changes the direction of the text around it/);
    assert.equal((await svc().db.sql.all(`SELECT id FROM api_keys WHERE workspace_id = ?`, [ws.workspace_id])).length, keysBefore);
    const inv = await olga.post('/settings/members', '/settings/members/invite', [['email', 'a\u2066b@acme.test'], ['role', 'member']]);
    assert.equal(inv.status, 303);
    assert.match(text((await olga.get('/settings/members')).text), /The e-mail address contains U\+2066/);
    assert.equal((await svc().db.sql.all(`SELECT id FROM member_invitations WHERE workspace_id = ?`, [ws.workspace_id])).length, 0);

    const token = 'R'.repeat(43);
    const now = svc().clock.now();
    await insertInvitation(svc().db.sql, { id: `iv_${Date.now()}r`, token_hash: sha256Hex(token), workspace_id: ws.workspace_id, email: 'rtl@acme.test', role: 'member', invited_by: ws.members.olga!, created_at: now, expires_at: now + 86_400_000 });
    const guest = new Visitor(svc());
    const joinPath = `/signin/invite/${token}`;
    const join = await guest.post(joinPath, joinPath, [['name', '\u202Eevil']]);
    assert.equal(join.status, 400);
    assert.match(text(join.text), /The name contains U\+202E/);
    assert.equal((await svc().db.sql.all(`SELECT id FROM members WHERE email = ?`, ['rtl@acme.test'])).length, 0);
    // A right-to-left name is a name: accepted.
    assert.equal((await guest.post(joinPath, joinPath, [['name', 'سارة']])).status, 303);
  });

  it('inviting an address with an open invitation (any case, any role) replaces it in the same transaction: one open invitation, the old ones revoked, said in the flash and the audit entry', async () => {
    const ws = await svc().apply(acme());
    const olga = await signedIn(ws.workspace_id, ws.members.olga!);
    const open = () => svc().db.sql.all<{ id: string; email: string; role: string }>(
      `SELECT id, email, role FROM member_invitations WHERE workspace_id = ? AND used_at IS NULL AND revoked_at IS NULL ORDER BY created_at, id`, [ws.workspace_id]);
    const flash = async () => text((await olga.get('/settings/members')).text);
    assert.equal((await olga.post('/settings/members', '/settings/members/invite', [['email', 'new@acme.test'], ['role', 'member']])).status, 303);
    assert.doesNotMatch(await flash(), /replaces/);
    const first = await open();
    assert.equal(first.length, 1);
    svc().clock.advance(1000);
    await olga.post('/settings/members', '/settings/members/invite', [['email', 'new@acme.test'], ['role', 'member']]);
    assert.match(await flash(), /Invited new@acme\.test as member: the link works once, for 7 days\. It replaces the earlier open invitation of this address \(new@acme\.test as member\): its link no longer works\./);
    svc().clock.advance(1000);
    await olga.post('/settings/members', '/settings/members/invite', [['email', 'NEW@ACME.TEST'], ['role', 'admin']]);
    const now = await open();
    assert.equal(now.length, 1, JSON.stringify(now));
    assert.deepEqual([now[0]!.email, now[0]!.role], ['NEW@ACME.TEST', 'admin']);
    const revoked = await svc().db.sql.all<{ revoked_by: string }>(`SELECT revoked_by FROM member_invitations WHERE workspace_id = ? AND revoked_at IS NOT NULL`, [ws.workspace_id]);
    assert.deepEqual(revoked.map((r) => r.revoked_by), [ws.members.olga, ws.members.olga]);
    const entries = await svc().db.sql.all<{ action: string; details: string }>(`SELECT action, details FROM audit_log WHERE workspace_id = ? AND action LIKE 'invitation.%' OR (workspace_id = ? AND action = 'member.invited') ORDER BY at, id`, [ws.workspace_id, ws.workspace_id]);
    assert.deepEqual(entries.map((e) => e.action), ['member.invited', 'member.invited', 'member.invited'], 'no invitation.revoked entry: the replacing entry says it');
    assert.deepEqual(JSON.parse(entries[2]!.details).replaces, [(await svc().db.sql.all<{ id: string }>(`SELECT id FROM member_invitations WHERE workspace_id = ? ORDER BY created_at, id`, [ws.workspace_id]))[1]!.id]);
    const audit = text((await olga.get('/settings/audit?family=members')).text);
    assert.match(audit, /invited NEW@ACME\.TEST as admin, which replaces the earlier open invitation of the address \(iv_[0-9a-z]+\)/);

    // An admin may not replace an invitation as owner.
    svc().clock.advance(1000);
    await olga.post('/settings/members', '/settings/members/invite', [['email', 'boss@acme.test'], ['role', 'owner']]);
    const ben = await signedIn(ws.workspace_id, ws.members.bob!);
    await ben.post('/settings/members', '/settings/members/invite', [['email', 'Boss@acme.test'], ['role', 'member']]);
    assert.match(text((await ben.get('/settings/members')).text), /Boss@acme\.test has an open invitation as owner: only an owner may replace it\./);
    assert.deepEqual((await open()).map((i) => [i.email, i.role]), [['NEW@ACME.TEST', 'admin'], ['boss@acme.test', 'owner']]);
  });

  it('audit entries of one millisecond read in the order they were written, and the (time, id) cursor pages through them without repeats or gaps', async () => {
    const ws = await svc().apply(acme());
    svc().clock.advance(1000);
    const at = svc().clock.now();
    const labels = Array.from({ length: 25 }, (_, i) => `step ${String(i).padStart(2, '0')}`);
    for (const label of labels) {
      await svc().db.tx((sql) => recordAudit(sql, { workspaceId: ws.workspace_id, actor: { type: 'operator' }, action: 'member.disabled', subject: { type: 'member', id: 'mb_x', label }, at }));
    }
    const seen: string[] = [];
    let before: { at: number; id: string } | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const { entries, older } = await readAudit(svc().db.sql, ws.workspace_id, { limit: 10, actions: ['member.disabled'], ...(before ? { before } : {}) });
      seen.push(...entries.map((e) => e.what.replace('disabled ', '')));
      if (!older) break;
      const last = entries.at(-1)!;
      before = { at: last.at, id: last.id };
    }
    assert.deepEqual(seen, [...labels].reverse(), 'newest first, in write order');
    const ids = await svc().db.sql.all<{ id: string }>(`SELECT id FROM audit_log WHERE workspace_id = ? AND action = 'member.disabled' ORDER BY at, id`, [ws.workspace_id]);
    assert.ok(ids.every((r) => /^au_[0-9]{23}[0-9a-z]{12}$/.test(r.id)), ids[0]!.id);
  });

  it('a form post to a path no page answers gets the HTML 404 page (no /v1 hint), whatever it accepts; API-like calls keep the JSON 404', async () => {
    const ws = await svc().apply(acme());
    const olga = await signedIn(ws.workspace_id, ws.members.olga!);
    const browserPost = await olga.post('/settings/members', '/settings/members/revoke', [['invitation', 'iv_x']]);
    assert.equal(browserPost.status, 404);
    assert.match(browserPost.type, /text\/html/);
    assert.doesNotMatch(browserPost.text, /\/v1/);
    for (const [type, accept] of [['application/x-www-form-urlencoded', '*/*'], ['application/x-www-form-urlencoded; charset=UTF-8', ''], ['multipart/form-data; boundary=x', '*/*']] as const) {
      const res = await fetch(`${svc().origin}/settings/members/revoke`, { method: 'POST', headers: { 'Content-Type': type, ...(accept ? { Accept: accept } : {}) }, body: type.startsWith('multipart') ? '--x--\r\n' : 'a=1' });
      assert.equal(res.status, 404, type);
      assert.match(res.headers.get('content-type') ?? '', /text\/html/, type);
      assert.match(await res.text(), /There is no page at this address/);
    }
    // API-like: a key, or JSON asked for or sent.
    for (const headers of [{ Authorization: 'Bearer x', 'Content-Type': 'application/x-www-form-urlencoded' }, { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' }, { 'Content-Type': 'application/json' }] as Array<Record<string, string>>) {
      const res = await fetch(`${svc().origin}/sales-pipelines`, { method: 'POST', headers, body: headers['Content-Type']!.includes('json') ? '{}' : 'a=1' });
      assert.equal(res.status, 404, JSON.stringify(headers));
      const body = (await res.json()) as { error: string; message: string };
      assert.equal(body.error, 'not_found');
      assert.match(body.message, /the API is under \/v1/);
    }
  });
});
