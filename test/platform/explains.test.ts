/**
 * An API that explains itself: a call that left out `/v1` is told where the API is (JSON for an API
 * caller, the HTML 404 page with the same hint for a browser), and a value outside a long enum is
 * told what the values look like instead of a list of a dozen.
 */
import assert from 'node:assert/strict';
import { acme, createDeal, createPipeline } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

forEachDatabase('errors that explain', (svc) => {
  it('tells a call without the /v1 prefix where the API is: JSON for API callers, the HTML page for a browser', async () => {
    const ws = await svc().apply(acme());
    const auth = { Authorization: `Bearer ${ws.keys.ci!.secret}` };
    const json = async (res: Response) => ({ status: res.status, type: res.headers.get('content-type') ?? '', body: (await res.json()) as { error: string; message: string; request_id: string } });

    // A real operation, called as the document says but without /v1.
    const op = await json(await fetch(`${svc().origin}/operations/workspace.ListBundles`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json', 'Idempotency-Key': 'x' }, body: '{}' }));
    assert.equal(op.status, 404);
    assert.match(op.type, /^application\/json/);
    assert.equal(op.body.error, 'not_found');
    assert.equal(op.body.message, 'No endpoint POST /operations/workspace.ListBundles: the API is under /v1: did you mean /v1/operations/workspace.ListBundles?');
    assert.ok(op.body.request_id);

    // A guessed path with a JSON accept, with a key, or with any method other than GET: the same hint.
    for (const init of [{ headers: { Accept: 'application/json' } }, { headers: auth }, { method: 'DELETE' }] as RequestInit[]) {
      const guessed = await json(await fetch(`${svc().origin}/sales-pipelines`, init));
      assert.equal(guessed.status, 404, JSON.stringify(init));
      assert.match(guessed.body.message, /^No endpoint (GET|DELETE) \/sales-pipelines: the API is under \/v1: did you mean \/v1\/sales-pipelines\? \(GET \/v1\/operations lists the operations a key may call\)$/);
    }
    const list = await json(await fetch(`${svc().origin}/operations`, { headers: auth }));
    assert.match(list.body.message, /did you mean \/v1\/operations\?$/);

    // A browser gets the HTML 404 page, with the hint when the address is the API's.
    const page = await fetch(`${svc().origin}/operations/customers.ListDeals`, { headers: { Accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
    assert.equal(page.status, 404);
    assert.match(page.headers.get('content-type')!, /^text\/html/);
    const html = await page.text();
    assert.match(html, /<h1>Not found<\/h1>/);
    assert.match(html, /the API is under \/v1: did you mean \/v1\/operations\/customers\.ListDeals\?/);
    // Any other unknown page stays a plain 404 page.
    const other = await (await fetch(`${svc().origin}/no/such/page`, { headers: { Accept: 'text/html' } })).text();
    assert.match(other, /There is no page at this address\./);
    assert.doesNotMatch(other, /\/v1/);
  });

  it('says what the values of a long enum look like (currency), suggests the one meant, and keeps listing short enums', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const pipeline = (await api.customers.CreateSalesPipeline(createPipeline())).data!.item;
    const lower = await api.customers.CreateDeal(createDeal(pipeline.id, 'proposal', { amount: { amount: '10', currency: 'eur' as 'EUR' } }));
    assert.equal(lower.response.status, 400);
    assert.equal(lower.error!.error, 'invalid_input');
    assert.match(
      lower.error!.message,
      /^body\.data\.amount\.currency must be an ISO 4217 code of a circulating currency, upper case, such as "EUR" or "USD" \(\d{3} accepted values, listed in the document\); did you mean "EUR"\?$/,
    );
    const unknown = await api.customers.CreateDeal(createDeal(pipeline.id, 'proposal', { amount: { amount: '10', currency: 'QQQ' as 'EUR' } }));
    assert.equal(unknown.response.status, 400);
    assert.doesNotMatch(unknown.error!.message, /did you mean|"AED", "AFN"/);
    assert.match(unknown.error!.message, /such as "EUR" or "USD"/);

    // A short enum is still listed in full.
    const short = await svc().post('analytics.GetSiteAnalyticsBreakdown', { bundle_id: ws.bundles.docs!, dimension: 'pages' }, { Authorization: `Bearer ${ws.keys.ci!.secret}` });
    assert.match(short.body.message, /body\.dimension must be one of "page", "entry_page", "source", "referrer", "campaign", "country", "device", "browser", "os"$/);
  });
});
