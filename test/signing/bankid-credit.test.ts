/**
 * bankid signing on both databases: the BANKID_PROVIDER setting and the test personal number, refused
 * without a provider (nothing charged; the settings page says so in Chromium), the workspace's credit
 * charged once per request (short credit 409 with nothing created; racing requests; idempotent retries
 * never charge twice), and the admin commands that show, set and add credit. Split from one suite; the
 * shared setup is bankidKit.ts.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { bankIdSettings, BANKID_UNAVAILABLE, prepareBankId } from '../../handlers/signing/bankid/provider.ts';
import { parsePersonalNumber, testPersonalNumber } from '../../handlers/signing/bankid/personalNumber.ts';
import { getCredit, listCharges, setCredit } from '../../handlers/signing/credit/credit.ts';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { admin } from '../support/cli.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';
import { OUT, spec, samplePdf, workspaceFile, idemKey, requestSignatures, count, testProviderSuite } from './bankidKit.ts';

announceBrowser('the signing settings page test');

describe('bankid settings (BANKID_PROVIDER)', () => {
  it('unset or empty is no provider; test is the test provider; production refuses it; unknown values stop the start', () => {
    assert.equal(bankIdSettings({}).bankidProvider, null);
    assert.equal(bankIdSettings({ BANKID_PROVIDER: ' ' }).bankidProvider, null);
    assert.equal(bankIdSettings({ BANKID_PROVIDER: 'test' }).bankidProvider, 'test');
    assert.throws(() => bankIdSettings({ BANKID_PROVIDER: 'test', NODE_ENV: 'production' }), /test provider .* refused when NODE_ENV=production/);
    assert.throws(() => bankIdSettings({ BANKID_PROVIDER: 'signicat' }), /BANKID_PROVIDER must be empty \(no bankid\) or one of: test \(got "signicat"\)/);
  });

  it('the test personal number: 12 digits, a real date, the check digit', () => {
    const now = Date.UTC(2026, 10, 24);
    assert.equal(testPersonalNumber('19900101'), '199001011239');
    assert.equal(parsePersonalNumber('19900101-1239', now), '199001011239');
    assert.throws(() => parsePersonalNumber('199001011238', now), /check digit/);
    assert.throws(() => parsePersonalNumber('19901301' + '1234', now), /date of birth/);
    assert.throws(() => parsePersonalNumber('abc', now), /12 digits/);
    assert.throws(() => parsePersonalNumber(testPersonalNumber('20991231'), now), /date of birth/);
  });
});

forEachDatabase('bankid without a provider', (svc) => {
  let ws: Awaited<ReturnType<TestService['apply']>>;
  let fileId: string;
  before(async () => {
    ws = await svc().apply(spec());
    fileId = await workspaceFile(svc(), ws.workspace_id, await samplePdf());
    await setCredit(svc().db.sql, ws.workspace_id, 5, svc().clock.now());
  });

  it('refuses bankid with 400 invalid_input and charges nothing; standard works and costs nothing', async () => {
    const refused = await requestSignatures(svc(), ws.keys.ci!.secret, { file_id: fileId, signers: [{ email: 'sara@example.com', name: 'Sara' }], signature_method: 'bankid' });
    assert.equal(refused.status, 400, JSON.stringify(refused.body));
    assert.equal(refused.body.error, 'invalid_input');
    assert.match(refused.body.message, /bankid is not available/);
    assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 5);
    assert.equal(await count(svc(), `SELECT COUNT(*) AS n FROM signing_charges WHERE workspace_id = ?`, [ws.workspace_id]), 0);
    assert.equal(await count(svc(), `SELECT COUNT(*) AS n FROM signing_requests WHERE workspace_id = ?`, [ws.workspace_id]), 0);

    const standard = await requestSignatures(svc(), ws.keys.ci!.secret, { file_id: fileId, signers: [{ email: 'sara@example.com', name: 'Sara' }] });
    assert.equal(standard.status, 200, JSON.stringify(standard.body));
    assert.equal(standard.body.signature_method, 'standard');
    assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 5);
    assert.equal(await count(svc(), `SELECT COUNT(*) AS n FROM signing_charges WHERE workspace_id = ?`, [ws.workspace_id]), 0);
  });

  it('the settings page says bankid is not available', async function () {
    const browser = await launchBrowser(this);
    try {
      const { page, problems, context } = await signedInPage(browser, svc(), { workspaceId: ws.workspace_id, memberId: ws.members.olga! }, '/settings/signing');
      assert.match(await page.locator('.signing-provider').innerText(), /Not available[\s\S]*BANKID_PROVIDER/);
      assert.equal(await page.locator('[data-balance]').getAttribute('data-balance'), '5');
      assert.match(await page.locator('.signing-charges').innerText(), /No bankid request has been charged yet/);
      await fs.mkdir(OUT, { recursive: true });
      await page.screenshot({ path: path.join(OUT, `signing-settings-no-provider-${svc().db.dialect}.png`), fullPage: true });
      assert.deepEqual(problems, []);
      await context.close();
    } finally {
      await browser.close();
    }
  });

  it('prepareBankId throws the same 400 before touching the credit', async () => {
    await assert.rejects(
      svc().db.tx((sql) => prepareBankId(sql, { bankidProvider: null }, { workspaceId: ws.workspace_id, requestId: 'sr_none', now: svc().clock.now() })),
      (err: { status: number; code: string; message: string }) => err.status === 400 && err.code === 'invalid_input' && err.message === BANKID_UNAVAILABLE,
    );
    assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 5);
  });
});

forEachDatabase(
  'bankid with the test provider',
  (svc) => {
    const suite = testProviderSuite(svc);
    const { bankid, charges, requests, mails } = suite;
    let ws: Awaited<ReturnType<TestService['apply']>>;
    before(() => ({ ws } = suite.state()));

    it('credit 0: 409 conflict naming the balance; nothing is created, charged or sent', async () => {
      const [r0, m0] = [await requests(), await mails()];
      const res = await requestSignatures(svc(), ws.keys.ci!.secret, bankid());
      assert.equal(res.status, 409, JSON.stringify(res.body));
      assert.equal(res.body.error, 'conflict');
      assert.match(res.body.message, /^insufficient signing credit: balance 0, needed 1/);
      assert.equal(await requests(), r0);
      assert.equal(await charges(), 0);
      assert.equal(await mails(), m0);
    });

    it('credit 2: two requests charge 2 (one each, keyed by the request), a third is refused', async () => {
      await setCredit(svc().db.sql, ws.workspace_id, 2, svc().clock.now());
      const a = await requestSignatures(svc(), ws.keys.ci!.secret, bankid());
      const b = await requestSignatures(svc(), ws.keys.other!.secret, bankid());
      assert.equal(a.status, 200, JSON.stringify(a.body));
      assert.equal(b.status, 200, JSON.stringify(b.body));
      assert.equal(a.body.signature_method, 'bankid');
      assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 0);
      const list = await listCharges(svc().db.sql, ws.workspace_id, 10);
      assert.deepEqual(list.map((c) => c.requestId).sort(), [a.body.signing_request_id, b.body.signing_request_id].sort());
      assert.ok(list.every((c) => c.amount === 1));
      const c = await requestSignatures(svc(), ws.keys.ci!.secret, bankid());
      assert.equal(c.status, 409);
      assert.match(c.body.message, /balance 0, needed 1/);
      assert.equal(await charges(), 2);
    });

    it('two requests racing for the last credit: one is charged, the other refused with 409', async () => {
      await setCredit(svc().db.sql, ws.workspace_id, 1, svc().clock.now());
      const [r0, c0] = [await requests(), await charges()];
      const answers = await Promise.all([ws.keys.ci!.secret, ws.keys.other!.secret].map((secret) => requestSignatures(svc(), secret, bankid())));
      assert.deepEqual(answers.map((a) => a.status).sort(), [200, 409], JSON.stringify(answers.map((a) => a.body)));
      assert.equal(await requests(), r0 + 1);
      assert.equal(await charges(), c0 + 1);
      assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 0);
    });

    it('the same Idempotency-Key retried: one request, charged once; a new key is a new charge', async () => {
      await setCredit(svc().db.sql, ws.workspace_id, 3, svc().clock.now());
      const before = await charges();
      const key = idemKey();
      const first = await requestSignatures(svc(), ws.keys.ci!.secret, bankid(), key);
      const again = await requestSignatures(svc(), ws.keys.ci!.secret, bankid(), key);
      assert.equal(first.status, 200);
      assert.equal(again.status, 200);
      assert.equal(again.body.signing_request_id, first.body.signing_request_id);
      assert.equal(again.headers.get('idempotency-replayed'), 'true');
      assert.equal(await charges(), before + 1);
      assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 2);
      const fresh = await requestSignatures(svc(), ws.keys.ci!.secret, bankid());
      assert.equal(fresh.status, 200);
      assert.notEqual(fresh.body.signing_request_id, first.body.signing_request_id);
      assert.equal(await charges(), before + 2);
      assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 1);
    });


    it('the admin commands show, set and add credit (and refuse what they must)', async function () {
      this.timeout(120_000); // seven CLI processes, each starting tsx
      const url = svc().databaseUrl;
      const set = await admin(url, 'signing', 'credit', 'set', '--workspace', ws.workspace_id, '--balance', '7');
      assert.equal(set.code, 0, `${set.stderr}\n${set.stdout}`);
      assert.equal(JSON.parse(set.stdout).balance, 7);
      const add = await admin(url, 'signing', 'credit', 'add', '--workspace', ws.workspace_id, '--amount', '3');
      assert.equal(add.code, 0, add.stderr);
      assert.equal(JSON.parse(add.stdout).previous_balance, 7);
      assert.equal(JSON.parse(add.stdout).balance, 10);
      const take = await admin(url, 'signing', 'credit', 'add', '--workspace', ws.workspace_id, '--amount=-4');
      assert.equal(take.code, 0, take.stderr);
      assert.equal(JSON.parse(take.stdout).balance, 6);
      const show = await admin(url, 'signing', 'credit', 'show', '--workspace', ws.workspace_id);
      assert.equal(show.code, 0, show.stderr);
      const shown = JSON.parse(show.stdout);
      assert.equal(shown.balance, 6);
      assert.equal(shown.price_per_bankid_request, 1);
      assert.deepEqual(
        shown.recent_charges.map((c: { signing_request_id: string }) => c.signing_request_id),
        (await listCharges(svc().db.sql, ws.workspace_id, 20)).map((c) => c.requestId),
      );
      assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 6);

      const below = await admin(url, 'signing', 'credit', 'add', '--workspace', ws.workspace_id, '--amount=-7');
      assert.equal(below.code, 1);
      assert.match(below.stderr, /below 0/);
      const bad = await admin(url, 'signing', 'credit', 'set', '--workspace', ws.workspace_id, '--balance', 'lots');
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /whole number/);
      const nobody = await admin(url, 'signing', 'credit', 'show', '--workspace', 'ws_doesnotexist');
      assert.equal(nobody.code, 1);
      assert.match(nobody.stderr, /no workspace ws_doesnotexist/);
      assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 6);
    });

  },
  { env: { BANKID_PROVIDER: 'test' } },
);
