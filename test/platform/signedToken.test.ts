import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { openDatabase } from '../../db/database.ts';
import { readToken, signToken } from '../../handlers/documents/tokens.ts';
import { decodeCursor, encodeCursor, positionField } from '../../server/cursor.ts';
import { type SignedTokens, signedTokens, TokenRefused } from '../../server/signedToken.ts';
import { forEachDatabase } from '../support/service.ts';

const refused = (reason: 'invalid' | 'expired') => (err: unknown) => err instanceof TokenRefused && err.reason === reason;
const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
let n = 0;
const fresh = (expires: boolean, maxLength = 400): SignedTokens => signedTokens(`test.signedToken.${process.pid}.${++n}`, { maxLength, expires });

/** The tag the format defines, made here from the stored secret: what only a holder of the secret can make. */
const tagFor = (secret: string, purpose: string, payload: string) =>
  crypto.createHmac('sha256', Buffer.from(secret, 'base64url')).update(`${purpose}\n${payload}`).digest().subarray(0, 20).toString('base64url');

forEachDatabase('signed tokens (server/signedToken.ts)', (svc) => {
  const NOW = 1_800_000_000_000;

  it('round-trips claims as <base64url JSON>.<27-character tag>, from the service database or a transaction', async () => {
    const s = fresh(false);
    const claims = { a: 'x', b: 2, c: null, d: true, text: 'Ünïcödé 😀' };
    const token = await s.sign(svc().db, 'test.List', claims);
    const [payload, tag, ...rest] = token.split('.');
    assert.equal(rest.length, 0);
    assert.match(payload!, /^[A-Za-z0-9_-]+$/);
    assert.match(tag!, /^[A-Za-z0-9_-]{27}$/);
    assert.deepEqual(JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8')), claims);
    assert.deepEqual(await s.verify(svc().db, 'test.List', token), claims);
    assert.deepEqual(await svc().db.tx((sql) => s.verify(sql, 'test.List', token)), claims);
    const inTx = await svc().db.tx((sql) => s.sign(sql, 'test.List', claims));
    assert.equal(inTx, token, 'the same secret, read through the transaction');
  });

  it('refuses a token made for another purpose, or by another signer (a cursor as a file URL and back)', async () => {
    const s = fresh(false);
    const other = fresh(false);
    const token = await s.sign(svc().db, 'test.ListA', { p: 1 });
    await assert.rejects(s.verify(svc().db, 'test.ListB', token), refused('invalid'));
    await assert.rejects(other.verify(svc().db, 'test.ListA', token), refused('invalid'));

    const scope = { operation: { id: 'documents.ListDocuments' }, db: svc().db };
    const shape = { t: positionField.millis, i: { type: 'string', maxLength: 40 } } as const;
    const cursor = await encodeCursor(scope, shape, { t: NOW, i: 'fl_1' }, {});
    assert.deepEqual(await decodeCursor(scope, cursor, shape, {}, 'other filters'), { t: NOW, i: 'fl_1' });
    assert.deepEqual(await readToken(svc().db, 'download', cursor, NOW), { ok: false, why: 'malformed' });
    assert.deepEqual(await readToken(svc().db, 'part', cursor, NOW), { ok: false, why: 'malformed' });
    const download = await signToken(svc().db, 'download', { w: 'ws_1', f: 'fl_1' }, NOW + 60_000);
    assert.equal((await readToken(svc().db, 'download', download, NOW)).ok, true);
    assert.deepEqual(await readToken(svc().db, 'part', download, NOW), { ok: false, why: 'malformed' });
    await assert.rejects(decodeCursor(scope, download, shape, {}, 'other filters'), (e: Error & { status?: number; code?: string }) => e.status === 400 && /not a cursor this operation returned/.test(e.message));
    await assert.rejects(decodeCursor({ ...scope, operation: { id: 'documents.ListUploads' } }, cursor, shape, {}, 'x'), /not a cursor this operation returned/);
  });

  it('refuses a token with any one character changed, cut, lengthened or with its parts rearranged', async () => {
    const s = fresh(true);
    const token = await s.sign(svc().db, 'download', { w: 'ws_1', f: 'fl_2', n: 'a.pdf' }, NOW + 60_000);
    assert.equal((await s.verify(svc().db, 'download', token, NOW)).f, 'fl_2');
    for (let at = 0; at < token.length; at++) {
      for (const c of [B64URL[(B64URL.indexOf(token[at]!) + 1) % 64]!, '.', '=', '+']) {
        if (c === token[at]) continue;
        const edited = `${token.slice(0, at)}${c}${token.slice(at + 1)}`;
        await assert.rejects(s.verify(svc().db, 'download', edited, NOW), refused('invalid'), `character ${at} as ${c}`);
      }
    }
    const [payload, tag] = token.split('.') as [string, string];
    for (const edited of [token.slice(0, -1), `${token}A`, `${tag}.${payload}`, payload, `.${tag}`, `${payload}.`, `${payload}.${tag}.${tag}`, '', `${payload}==.${tag}`]) {
      await assert.rejects(s.verify(svc().db, 'download', edited, NOW), refused('invalid'), edited);
    }
  });

  it('refuses a well-tagged payload that is not a JSON object, and an expiring token without its expiry', async () => {
    const s = fresh(true);
    await s.sign(svc().db, 'download', { w: 'ws_1' }, NOW + 1);
    const secret = (await svc().db.sql.one<{ secret: string }>(`SELECT secret FROM service_secrets WHERE name = ?`, [s.secret]))!.secret;
    const forged = (text: string) => {
      const payload = Buffer.from(text).toString('base64url');
      return `${payload}.${tagFor(secret, 'download', payload)}`;
    };
    assert.equal((await s.verify(svc().db, 'download', forged(JSON.stringify({ w: 'ws_1', e: NOW + 1 })), NOW)).w, 'ws_1', 'the format is as documented');
    for (const text of ['not json', '[1,2]', 'null', '"e"', '{"w":"ws_1"}', '{"e":"soon"}']) {
      await assert.rejects(s.verify(svc().db, 'download', forged(text), NOW), refused('invalid'), text);
    }
  });

  it('refuses an expiring token from its expiry on, as expired (after its tag is found good)', async () => {
    const s = fresh(true);
    const token = await s.sign(svc().db, 'part', { u: 'up_1' }, NOW + 60_000);
    assert.deepEqual(await s.verify(svc().db, 'part', token, NOW + 59_999), { u: 'up_1', e: NOW + 60_000 });
    await assert.rejects(s.verify(svc().db, 'part', token, NOW + 60_000), refused('expired'));
    await assert.rejects(s.verify(svc().db, 'part', `${token.slice(0, 4)}x${token.slice(5)}`, NOW + 60_000), refused('invalid'));
    const partUrl = await signToken(svc().db, 'part', { u: 'up_1' }, NOW + 60_000);
    assert.deepEqual(await readToken(svc().db, 'part', partUrl, NOW + 59_999), { ok: true, claims: { u: 'up_1', e: NOW + 60_000 } });
    assert.deepEqual(await readToken(svc().db, 'part', partUrl, NOW + 60_000), { ok: false, why: 'expired' });
    // The expiry is the signer's: an expiring signer needs it, never takes it in the claims; another never takes one.
    await assert.rejects(s.sign(svc().db, 'part', { u: 'up_1' }), /expiresAt is required/);
    await assert.rejects(s.sign(svc().db, 'part', { u: 'up_1', e: NOW }, NOW), /the expiry is expiresAt/);
    await assert.rejects(fresh(false).sign(svc().db, 'part', { u: 'up_1' }, NOW), /expiresAt is not taken/);
  });

  it('refuses a token over its maximum length before reading it, and never makes one', async () => {
    const s = fresh(false, 120);
    const token = await s.sign(svc().db, 'p', { x: 'y'.repeat(40) });
    assert.ok(token.length <= 120);
    const compared = spyOnCompare();
    try {
      await assert.rejects(s.verify(svc().db, 'p', `${token}${'A'.repeat(121 - token.length)}`), refused('invalid'));
      await assert.rejects(s.verify(svc().db, 'p', 'A'.repeat(100_000)), refused('invalid'));
      assert.equal(compared.calls, 0);
    } finally {
      compared.restore();
    }
    await assert.rejects(s.sign(svc().db, 'p', { x: 'y'.repeat(100) }), /is over its 120/);
    await assert.rejects(s.sign(svc().db, 'two\nlines', { x: 1 }), /a purpose is one non-empty line/);
  });

  it('compares tags in constant time (crypto.timingSafeEqual over the 20 bytes)', async () => {
    const s = fresh(false);
    const token = await s.sign(svc().db, 'p', { x: 1 });
    const compared = spyOnCompare();
    try {
      await s.verify(svc().db, 'p', token);
      await assert.rejects(s.verify(svc().db, 'p', `${token.slice(0, -2)}${token.endsWith('AA') ? 'BA' : 'AA'}`), refused('invalid'));
      assert.equal(compared.calls, 2);
      assert.deepEqual(compared.lengths, ['20/20', '20/20']);
    } finally {
      compared.restore();
    }
  });

  it('is one secret for every process sharing the database; one first made in a transaction that rolled back is not kept', async () => {
    const s = fresh(false);
    await assert.rejects(
      svc().db.tx(async (sql) => {
        await s.sign(sql, 'p', { x: 1 });
        throw new Error('rolled back');
      }),
      /rolled back/,
    );
    assert.equal(await svc().db.sql.one(`SELECT secret FROM service_secrets WHERE name = ?`, [s.secret]), undefined);
    const token = await s.sign(svc().db, 'p', { x: 1 });
    const other = openDatabase(svc().databaseUrl);
    try {
      // Another process: its own signer object and its own connection.
      const elsewhere = signedTokens(s.secret, { maxLength: s.maxLength, expires: false });
      assert.deepEqual(await elsewhere.verify(other, 'p', token), { x: 1 });
      assert.equal(await elsewhere.sign(other, 'p', { x: 1 }), token);
    } finally {
      await other.close();
    }
  });
});

function spyOnCompare(): { calls: number; lengths: string[]; restore(): void } {
  const original = crypto.timingSafeEqual;
  const spy = {
    calls: 0,
    lengths: [] as string[],
    restore: () => {
      crypto.timingSafeEqual = original;
    },
  };
  crypto.timingSafeEqual = ((a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView) => {
    spy.calls++;
    spy.lengths.push(`${a.byteLength}/${b.byteLength}`);
    return original(a, b);
  }) as typeof crypto.timingSafeEqual;
  return spy;
}
