/**
 * A mail scanner (or a link preview, or a curious proxy) fetches every link of an invitation with GET
 * and HEAD, follows redirects, and guesses the addresses around them. On both databases: a request is
 * created through the generated client, its invitations arrive at a real SMTP server started here and
 * are parsed with mailparser; every link of every mail (text and HTML parts) and every address a scanner
 * could guess (review, document.pdf, done, the post targets) is fetched; the request, its recipients,
 * its history (signing.ListSigningEvents) and the signing tables' rows are identical before and after.
 * Only the signer's own step (a POST from the page) records anything, and a post from another origin is
 * refused. Dead links (unknown, cancelled) answer 404 and 410 pages, and change nothing either. Bad form
 * input (no name, blanks, over 200 characters, no agreement, an empty or over-long reason) re-renders the
 * page with 400 and records nothing.
 */
import assert from 'node:assert/strict';
import type { ServiceClient } from '../../generated/client.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { linksIn, onService, samplePdf, signerLinkIn, signerServiceConfig, signerSpec, signingSnapshot, uploadPdf } from './signerKit.ts';
import { type Mail, startMailServer } from '../support/smtp.ts';

/** What scanners send: a desktop browser's agent, Microsoft's Safe Links, a preview bot, and none. */
const AGENTS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36',
  'Mozilla/4.0 (compatible; ms-office; MSOffice 16)',
  'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)',
  '',
];

/** The addresses a scanner fetches for one signer's link: the link and what it could guess around it. */
function guessed(link: string): string[] {
  return [
    link,
    `${link}/`,
    `${link}/review`,
    `${link}/document.pdf`,
    `${link}/document.pdf?download=1`,
    `${link}/done`,
    `${link}/open`,
    `${link}/sign`,
    `${link}/decline`,
    `${link}/bankid/start`,
    `${link}/bankid/return`,
  ];
}

/** Fetches a URL as a scanner does, with GET and HEAD, once following redirects and once not; answers the statuses. */
async function scan(url: string, agent: string): Promise<number[]> {
  const statuses: number[] = [];
  for (const method of ['GET', 'HEAD'] as const) {
    for (const redirect of ['manual', 'follow'] as const) {
      const res = await fetch(url, { method, redirect, headers: agent ? { 'User-Agent': agent } : {} });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
  }
  return statuses;
}

async function post(svc: TestService, path: string, fields: Record<string, string>, headers: Record<string, string> = { Origin: svc.origin }) {
  const res = await fetch(`${svc.origin}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(fields).toString(),
  });
  return { status: res.status, location: res.headers.get('location') ?? '', text: await res.text() };
}

for (const database of databases) {
  describe(`signer's links fetched by a mail scanner change nothing [${database.name}]`, function () {
    this.timeout(60_000);
    let smtp: Awaited<ReturnType<typeof startMailServer>>;
    let svc: TestService;
    let api: ServiceClient;
    let fileId: string;
    let original: Uint8Array;

    before(async () => {
      smtp = await startMailServer();
      svc = await startTestService(database.url(), signerServiceConfig(smtp.url));
      const ws = await svc.apply(signerSpec());
      api = svc.client(ws.keys.contracts!.secret, ws.members.olga!);
      original = await samplePdf('Supply agreement', 3);
      fileId = await uploadPdf(svc, api, original, 'supply-agreement.pdf');
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    async function createRequest(title: string, signers: Array<{ email: string; name: string }>) {
      const before = smtp.mails.length;
      const res = await api.signing.RequestFileSignatures({ file_id: fileId, title, signers, message: 'Please read the terms on page 2 before you sign.\nThank you!' });
      assert.equal(res.response.status, 200, JSON.stringify(res.error));
      assert.deepEqual(res.data!.invitation_failures, []);
      const arrived: Mail[] = smtp.mails.slice(before);
      assert.equal(arrived.length, signers.length, 'one invitation per signer, sent before the answer');
      // In the signers' order: each invitation is sent by its own job, so they may arrive in any order.
      const mails = signers.map((s) => arrived.find((m) => m.to.includes(s.email)) ?? assert.fail(`no invitation to ${s.email}`));
      return { id: res.data!.signing_request_id, mails };
    }

    it('every link of every invitation, and every address around it, fetched with GET and HEAD: nothing changes', async () => {
      const { id, mails } = await createRequest('Supply agreement 2027', [
        { email: 'carla@client.test', name: 'Carla Client' },
        { email: 'dan@client.test', name: 'Dan Client' },
      ]);
      const before = await signingSnapshot(svc, api, id);
      assert.equal(before.request.status, 'pending');
      assert.deepEqual(before.request.recipients.map((r) => r.status), ['pending', 'pending']);
      assert.deepEqual(before.events.map((e) => (e as { kind: string }).kind).filter((k) => k.startsWith('recipient.')), []);

      const signerLinks: string[] = [];
      let fetched = 0;
      for (const { mail } of mails) {
        const links = linksIn(mail);
        const signer = signerLinkIn(mail);
        assert.ok(links.includes(signer));
        assert.ok(mail.text!.includes(signer), 'the text part carries the link');
        assert.ok(typeof mail.html === 'string' && mail.html.includes(new URL(signer).pathname), 'the HTML part carries the link');
        signerLinks.push(onService(signer, svc.origin));
        for (const link of links) {
          const local = onService(link, svc.origin);
          const targets = link === signer ? guessed(local) : [local];
          for (const url of targets) {
            for (const agent of AGENTS) {
              const statuses = await scan(url, agent);
              fetched += statuses.length;
              assert.ok(statuses.every((s) => s < 500), `${new URL(url).pathname.replace(/[A-Za-z0-9_-]{43}/, '<token>')}: ${statuses.join(', ')}`);
            }
          }
        }
      }
      assert.equal(signerLinks.length, 2);
      assert.notEqual(signerLinks[0], signerLinks[1], 'one link per recipient');
      assert.ok(fetched >= 2 * 11 * AGENTS.length * 4);

      // What each address answered, for the first signer's link (without following redirects).
      const [link] = signerLinks as [string];
      const status = async (path: string, method = 'GET') => (await fetch(`${link}${path}`, { method, redirect: 'manual' })).status;
      assert.equal(await status(''), 200, 'the first page shows who asks and Continue');
      assert.equal(await status('', 'HEAD'), 200);
      assert.equal(await status('/review'), 303, 'before Continue the review sends back to the first page');
      assert.equal(await status('/document.pdf'), 303, 'and so does the document');
      assert.equal(await status('/open'), 405, 'the post targets are not GET pages');
      assert.equal(await status('/sign'), 405);
      assert.equal(await status('/decline'), 405);
      const page = await (await fetch(link, { headers: { 'User-Agent': AGENTS[1]! } })).text();
      assert.match(page, /Supply agreement 2027/);
      assert.match(page, /Olga Owner<\/strong> asks you, Carla Client \(carla@client\.test\), to sign this document/);
      assert.match(page, /Please read the terms on page 2 before you sign\.\nThank you!/);
      assert.match(page, /<form method="post" action="\/sign\/[A-Za-z0-9_-]{43}\/open">/);

      const after = await signingSnapshot(svc, api, id);
      assert.deepEqual(after, before, 'the scanner changed nothing: request, recipients, history and rows are the same');
      assert.ok(!svc.logs().match(/\/sign\/[A-Za-z0-9_-]{43}/), 'the request log never shows a token');
    });

    it('only the signer’s own step records opened (once); afterwards a scanner still changes nothing', async () => {
      const { id, mails } = await createRequest('Supply agreement, annex', [{ email: 'erin@client.test', name: 'Erin Client' }]);
      const link = onService(signerLinkIn(mails[0]!.mail), svc.origin);
      const path = new URL(link).pathname;
      const start = await signingSnapshot(svc, api, id);

      // Another site's form (Origin or, without one, Referer naming another origin) is refused and records nothing.
      assert.equal((await post(svc, `${path}/open`, {}, { Origin: 'https://evil.example' })).status, 403);
      assert.equal((await post(svc, `${path}/open`, {}, { Origin: 'null' })).status, 403);
      assert.equal((await post(svc, `${path}/open`, {}, { Referer: 'https://evil.example/page' })).status, 403);
      assert.equal((await post(svc, `${path}/sign`, { typed_name: 'Erin Client', agree: 'yes' }, { Origin: 'https://evil.example' })).status, 403);
      assert.equal((await post(svc, `${path}/decline`, { reason: 'no' }, { Origin: 'https://evil.example' })).status, 403);
      assert.deepEqual(await signingSnapshot(svc, api, id), start);
      // Signing before Continue is sent back to the first page, and records nothing.
      const early = await post(svc, `${path}/sign`, { typed_name: 'Erin Client', agree: 'yes' });
      assert.equal(early.status, 303);
      assert.equal(early.location, path);
      assert.deepEqual(await signingSnapshot(svc, api, id), start);

      // Continue: a post from the page (same origin) records opened and answers 303 to the review.
      const opened = await post(svc, `${path}/open`, {});
      assert.equal(opened.status, 303);
      assert.equal(opened.location, `${path}/review`);
      const afterOpen = await signingSnapshot(svc, api, id);
      assert.equal(afterOpen.request.recipients[0]!.status, 'opened');
      assert.equal(afterOpen.request.recipients[0]!.opened_at, svc.clock.now());
      assert.deepEqual(afterOpen.events.map((e) => (e as { kind: string }).kind).slice(-1), ['recipient.opened']);
      // A second Continue (reload, Back) records nothing more.
      assert.equal((await post(svc, `${path}/open`, {})).status, 303);
      assert.deepEqual(await signingSnapshot(svc, api, id), afterOpen);

      // Now the review and the document answer; a scanner fetching them again still changes nothing.
      svc.clock.advance(60_000);
      for (const url of guessed(link)) for (const agent of AGENTS) await scan(url, agent);
      assert.deepEqual(await signingSnapshot(svc, api, id), afterOpen);
      const review = await fetch(`${link}/review`);
      assert.equal(review.status, 200);
      assert.match(review.headers.get('content-security-policy')!, /script-src 'self'/);
      const pdf = await fetch(`${link}/document.pdf`);
      assert.equal(pdf.status, 200);
      assert.equal(pdf.headers.get('content-type'), 'application/pdf');
      assert.equal(pdf.headers.get('cache-control'), 'no-store');
      assert.equal(pdf.headers.get('x-robots-tag'), 'noindex, nofollow');
      assert.equal(review.headers.get('x-robots-tag'), 'noindex, nofollow', 'search engines never list a signer\'s page');
      assert.match(pdf.headers.get('content-disposition')!, /^inline; filename="supply-agreement\.pdf"/);
      assert.equal(Buffer.compare(Buffer.from(await pdf.arrayBuffer()), Buffer.from(original)), 0, 'the original, byte-identical');
      const download = await fetch(`${link}/document.pdf?download=1`, { method: 'HEAD' });
      assert.match(download.headers.get('content-disposition')!, /^attachment; filename="supply-agreement\.pdf"/);
      assert.equal(download.headers.get('content-length'), String(original.length));
    });

    it('dead links: an unknown token is a 404 page, a cancelled or overdue request’s link a 410 page saying why; fetching them changes nothing', async () => {
      const { id, mails } = await createRequest('Supply agreement, withdrawn', [{ email: 'frank@client.test', name: 'Frank Client' }]);
      const link = onService(signerLinkIn(mails[0]!.mail), svc.origin);
      const path = new URL(link).pathname;
      const unknown = await fetch(`${svc.origin}/sign/${'A'.repeat(43)}`);
      assert.equal(unknown.status, 404);
      assert.match(await unknown.text(), /This signing link does not exist/);
      assert.equal((await fetch(`${svc.origin}/sign/short`)).status, 404);
      assert.equal((await post(svc, `/sign/${'A'.repeat(43)}/open`, {})).status, 404);

      const cancelled = await api.signing.CancelSigningRequest({ signing_request_id: id, reason: 'The terms changed; a new version follows.' });
      assert.equal(cancelled.response.status, 200, JSON.stringify(cancelled.error));
      const ended = await signingSnapshot(svc, api, id);
      for (const url of guessed(link)) {
        for (const agent of AGENTS) {
          const statuses = await scan(url, agent);
          // 303: the confirmation page of someone who did not act sends back to the link, which is 410.
          assert.ok(statuses.every((s) => s === 410 || s === 405 || s === 303), `${url.slice(url.indexOf('/sign/') + 49) || '/'}: ${statuses.join(', ')}`);
        }
      }
      const page = await fetch(link);
      assert.equal(page.status, 410);
      const text = await page.text();
      assert.match(text, /This request was cancelled/);
      assert.match(text, /Reason given: The terms changed; a new version follows\./);
      const open = await post(svc, `${path}/open`, {});
      assert.equal(open.status, 410);
      assert.deepEqual(await signingSnapshot(svc, api, id), ended);

      // A link whose deadline has passed is dead at once, before the expiry job moves its request.
      const late = await createRequest('Supply agreement, late', [{ email: 'hal@client.test', name: 'Hal Client' }]);
      const lateLink = onService(signerLinkIn(late.mails[0]!.mail), svc.origin);
      assert.equal((await post(svc, `${new URL(lateLink).pathname}/open`, {})).status, 303);
      svc.clock.advance(30 * 86_400_000);
      const expiredBefore = await signingSnapshot(svc, api, late.id);
      // The API reads it expired from its deadline on; the row is still pending (the job has not run).
      assert.equal(expiredBefore.request.status, 'expired');
      const row = await svc.db.sql.one<{ status: string }>(`SELECT status FROM signing_requests WHERE id = ?`, [late.id]);
      assert.equal(row!.status, 'pending', 'the expiry job has not run');
      const expired = await fetch(`${lateLink}/review`);
      assert.equal(expired.status, 410);
      assert.match(await expired.text(), /The deadline has passed/);
      assert.equal((await post(svc, `${new URL(lateLink).pathname}/sign`, { typed_name: 'Hal Client', agree: 'yes' })).status, 410);
      assert.deepEqual(await signingSnapshot(svc, api, late.id), expiredBefore);
    });

    it('form input is checked: a refusal re-renders the page with 400 and the message, and records nothing', async () => {
      const { id, mails } = await createRequest('Supply agreement, checks', [{ email: 'gus@client.test', name: 'Gus Client' }]);
      const path = new URL(signerLinkIn(mails[0]!.mail)).pathname;
      assert.equal((await post(svc, `${path}/open`, {})).status, 303);
      const opened = await signingSnapshot(svc, api, id);
      const refused = async (action: 'sign' | 'decline', fields: string, message: RegExp) => {
        const res = await fetch(`${svc.origin}${path}/${action}`, { method: 'POST', redirect: 'manual', headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: svc.origin }, body: fields });
        assert.equal(res.status, 400, fields);
        const html = await res.text();
        assert.match(html, message, fields);
        assert.match(html, /role="alert"/);
      };
      await refused('sign', 'agree=yes', /<li>Type your full name\.<\/li>/);
      await refused('sign', `typed_name=${encodeURIComponent(' \t\u0007 ')}&agree=yes`, /<li>Type your full name\.<\/li>/);
      await refused('sign', `typed_name=${'x'.repeat(201)}&agree=yes`, /<li>Your name may have at most 200 characters\.<\/li>/);
      await refused('sign', 'typed_name=Gus+Client', /<li>Tick “I agree to sign this document electronically”\.<\/li>/);
      await refused('sign', 'typed_name=Gus+Client&agree=no', /I agree to sign this document electronically/);
      await refused('sign', 'typed_name=Gus&typed_name=Client&agree=yes', /<li>Type your full name\.<\/li>/);
      await refused('decline', 'reason=', /Say why you decline/);
      await refused('decline', `reason=${'y'.repeat(501)}`, /Your reason may have at most 500 characters \(it has 501\)\./);
      // What was typed comes back escaped, never as markup.
      await refused('sign', `typed_name=${encodeURIComponent('<script>x</script>')}`, /value="&lt;script&gt;x&lt;\/script&gt;"/);
      assert.deepEqual(await signingSnapshot(svc, api, id), opened);

      // A name of exactly 200 characters, with its spaces tidied, is accepted.
      const name = `Gus   ${'C'.repeat(196)}`;
      const signed = await post(svc, `${path}/sign`, { typed_name: ` ${name} `, agree: 'yes' }, { Origin: svc.origin, 'User-Agent': 'Form test/1.0' });
      assert.equal(signed.status, 303);
      assert.equal(signed.location, `${path}/done`);
      const row = await svc.db.sql.one<{ typed_name: string; user_agent: string }>(`SELECT typed_name, user_agent FROM signing_recipients WHERE request_id = ?`, [id]);
      assert.equal(row!.typed_name, `Gus ${'C'.repeat(196)}`);
      assert.equal(row!.user_agent, 'Form test/1.0');
      // The link is now dead for changes: a second signature or a decline is a 410 page.
      assert.equal((await post(svc, `${path}/sign`, { typed_name: 'Gus', agree: 'yes' })).status, 410);
      assert.equal((await post(svc, `${path}/decline`, { reason: 'changed my mind' })).status, 410);
      assert.equal((await fetch(`${svc.origin}${path}/done`)).status, 200);
    });
  });
}
