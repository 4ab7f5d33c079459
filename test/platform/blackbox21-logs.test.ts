/**
 * Issue 21, finding 16 (seed 5.4: keys never in URLs or logs): a key sent in the query string
 * (`?api_key=wso_…`) is refused, and the request log must not write it either. Every request line cuts
 * the value of a query parameter whose name says it is a credential (api_key, key, token,
 * access_token, secret, password, code, …) or whose value looks like a key (`wso_…`) or a token, and
 * keeps the rest of the URL readable; `/mailbox/<id>` paths are cut like sign-in links.
 */
import assert from 'node:assert/strict';
import { prettyLine } from '../../server/logFormat.ts';
import { redactUrl } from '../../server/logger.ts';
import { acme } from '../support/fixtures.ts';
import { serviceSecretUrls } from '../support/secretUrls.ts';
import { forEachDatabase } from '../support/service.ts';

const requestLines = (logs: string) =>
  logs
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { msg?: string; request_id?: string; req?: { url?: string }; res?: { statusCode?: number } })
    .filter((l) => l.msg === 'request completed');

forEachDatabase('Issue 21: credentials in query strings never reach the request log', (svc) => {
  it('refuses a key sent as ?api_key=wso_… and logs the URL with the key cut, the other parameters readable', async () => {
    const ws = await svc().apply(acme());
    const secret = ws.keys.ci!.secret;
    const secretPart = secret.slice(secret.indexOf('_', 4) + 1);
    const url = `${svc().origin}/v1/operations/workspace.ListBundles?api_key=${secret}&page=2`;
    const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    assert.ok(res.status >= 400 && res.status < 500, `a key in the query string is refused (got ${res.status})`);
    // Other spellings and credential-like names, each on an answered and an unanswered path.
    const asked: Array<{ path: string; id: string | null }> = [];
    for (const path of [
      `/v1/operations/workspace.ListBundles?token=${secret}`,
      `/v1/operations/workspace.ListBundles?Access_Token=abc123&x=1`,
      `/signin?next=%2Fdashboard&password=hunter2`,
      `/nowhere?q=${encodeURIComponent(secret)}&page=3`,
      `/settings/audit?client_secret=s3cr3t&actor=olga`,
      `/oauth-callback?code=AUTHCODE42`,
      `/v1/operations/workspace.ListBundles?apikey=${secret}`,
      `/v1/operations/workspace.ListBundles?key=${secret}`,
      `/v1/operations/workspace.ListBundles?${secret}`,
    ]) {
      const r = await fetch(`${svc().origin}${path}`, { method: path.startsWith('/v1/') ? 'POST' : 'GET', redirect: 'manual', headers: { 'Content-Type': 'application/json' }, body: path.startsWith('/v1/') ? '{}' : undefined });
      await r.arrayBuffer();
      asked.push({ path, id: r.headers.get('request-id') });
    }
    // The request line is written when the response finishes, which may be just after the client has it.
    for (let i = 0; i < 50 && requestLines(svc().logs()).length < asked.length + 1; i++) await new Promise((r) => setTimeout(r, 20));
    const logs = svc().logs();
    assert.ok(!logs.includes(secretPart), 'a key secret reached the logs');
    assert.ok(!logs.includes(secret.slice(0, 28)), 'a key (its wso_ id part) reached the logs');
    for (const leaked of ['hunter2', 's3cr3t', 'AUTHCODE42', 'abc123']) assert.ok(!logs.includes(leaked), `${leaked} reached the logs`);
    const lines = requestLines(logs);
    const urlOf = (id: string | null) => lines.find((l) => l.request_id === id)?.req?.url;
    assert.equal(urlOf(res.headers.get('request-id')), '/v1/operations/workspace.ListBundles?api_key=[redacted]&page=2');
    assert.equal(urlOf(asked[1]!.id), '/v1/operations/workspace.ListBundles?Access_Token=[redacted]&x=1');
    assert.equal(urlOf(asked[2]!.id), '/signin?next=%2Fdashboard&password=[redacted]');
    assert.equal(urlOf(asked[3]!.id), '/nowhere?q=[redacted]&page=3');
    assert.equal(urlOf(asked[4]!.id), '/settings/audit?client_secret=[redacted]&actor=olga');
    // The readable line of a terminal shows the same cut URL.
    const line = logs.trim().split('\n').find((l) => l.includes(res.headers.get('request-id')!))!;
    assert.match(prettyLine(line, false), /POST \/v1\/operations\/workspace\.ListBundles\?api_key=\[redacted\]&page=2/);
  });

  it('cuts credential query parameters from every URL it logs, keeps ordinary ones, and cuts /mailbox/<id> like a sign-in link', () => {
    const redact = (url: string, unmatched = false) => redactUrl(url, serviceSecretUrls, unmatched);
    const key = `wso_${'a'.repeat(24)}_${'B'.repeat(43)}`;
    assert.equal(redact(`/v1/operations/x?api_key=${key}`), '/v1/operations/x?api_key=[redacted]');
    assert.equal(redact(`/v1/operations/x?API-KEY=short`), '/v1/operations/x?API-KEY=[redacted]');
    for (const name of ['key', 'token', 'access_token', 'refresh_token', 'id_token', 'secret', 'client_secret', 'password', 'passwd', 'code', 'auth', 'authorization', 'session', 'sig', 'signature', 'credential', 'jwt', 'otp', 'x-api-key', 'apiKey', 'sessionToken']) {
      assert.equal(redact(`/page?${name}=v1&page=2`), `/page?${name}=[redacted]&page=2`, name);
    }
    // Whatever its name, a value that is a key or a token.
    assert.equal(redact(`/page?q=${key}`), '/page?q=[redacted]');
    assert.equal(redact(`/page?q=${encodeURIComponent(`Bearer ${key}`)}`), '/page?q=[redacted]');
    assert.equal(redact(`/page?q=${'x'.repeat(43)}`), '/page?q=[redacted]');
    assert.equal(redact(`/page?${key}`), '/page?[redacted]');
    assert.equal(redact(`/page?a=1&a=${key}#frag`), '/page?a=1&a=[redacted]#frag');
    // A key in a path segment, on any path.
    assert.equal(redact(`/v1/operations/${key}`), '/v1/operations/[redacted]');
    // Ordinary parameters stay readable.
    assert.equal(redact('/signin?next=%2Fdashboard'), '/signin?next=%2Fdashboard');
    assert.equal(redact('/settings/audit?actor=olga&page=2&kind=key.created'), '/settings/audit?actor=olga&page=2&kind=key.created');
    assert.equal(redact('/dashboard?site=bn_0123456789abcdefghijklmn'), '/dashboard?site=bn_0123456789abcdefghijklmn');
    assert.equal(redact('/page?monkey=1&keyboard=2'), '/page?monkey=1&keyboard=2');
    // The development mailbox's pages: the mail id is cut, however spelled.
    assert.equal(redact('/mailbox/ml_0123456789abcdefghijklmn'), '/mailbox/[redacted]');
    assert.equal(redact('/MailBox/ml_0123456789abcdefghijklmn/html'), '/mailbox/[redacted]');
    assert.equal(redact('/mail%62ox/ml_x'), '/mailbox/[redacted]');
    assert.equal(redact('/mailbox'), '/mailbox');
  });
});
