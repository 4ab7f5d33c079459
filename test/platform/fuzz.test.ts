import assert from 'node:assert/strict';
import { call, createRecords, type Fixture, makeFixture, type RealCursor, realCursors } from '../support/badInput.ts';
import { fuzzOperation } from '../support/fuzz.ts';
import { catalogued, docOperations, withRealIds } from '../support/requestSchema.ts';
import { forEachDatabase } from '../support/service.ts';

/**
 * The spec-driven fuzz test (test/support/fuzz.ts) over every documented operation, with a fixed seed
 * and a modest count, on each database; `npm run fuzz` runs the same property for longer. Then what
 * fuzzing found, replayed as plain cases.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 40);
const SEED = Number(process.env.FUZZ_SEED ?? 20261201);
const operations = [...catalogued, ...docOperations.filter((o) => o.kind === 'collection' && o.method === 'post' && o.body)];
const opById = (id: string) => operations.find((o) => o.id === id)!;

/** Requests fuzzing found mishandled (a 500 on PostgreSQL, or an event accepted that could not be stored), and their answer now. */
const findings: Array<{ op: string; what: string; body: (fx: Fixture) => unknown; status: number }> = [
  { op: 'customers.GetSalesPipeline', what: 'an id with U+0000 (PostgreSQL: 500)', body: (fx) => ({ id: `${fx.ids.get('pl')}\u0000` }), status: 400 },
  { op: 'customers.CreateSalesPipeline', what: 'a name with U+0000 (PostgreSQL: 500)', body: () => ({ data: { name: 'A\u0000B' } }), status: 400 },
  { op: 'customers.UpsertSalesPipeline', what: 'a name with a lone surrogate (PostgreSQL stored U+FFFD: two names became one)', body: () => ({ data: { name: 'A\ud800' } }), status: 400 },
  { op: 'analytics.GetSiteAnalyticsSummary', what: 'a bundle_id with U+0000 (PostgreSQL: 500)', body: (fx) => ({ bundle_id: `${fx.ids.get('bn')}\u0000` }), status: 400 },
  { op: 'collection.Track', what: 'a collect key with U+0000 (PostgreSQL: 500)', body: (fx) => ({ ...trackExample(fx), key: `${fx.ids.get('pk')}\u0000` }), status: 400 },
  { op: 'collection.Track', what: 'utm_source=%00 in the url (U+0000 once decoded: the batch failed on PostgreSQL)', body: (fx) => ({ ...trackExample(fx), url: 'https://docs.acme.test/?utm_source=%00' }), status: 400 },
  { op: 'collection.Track', what: 'a referrer whose host has 2,000 characters (the batch failed on PostgreSQL, blocking the queue)', body: (fx) => ({ ...trackExample(fx), referrer: 'x'.repeat(2000) }), status: 202 },
];
const trackExample = (fx: Fixture) => withRealIds(opById('collection.Track').example, fx.ids) as Record<string, unknown>;

forEachDatabase(
  `fuzz (${RUNS} requests per operation, seed ${SEED})`,
  (svc) => {
    let fx: Fixture;
    let cursors: RealCursor[];
    before(async () => {
      fx = await makeFixture(svc());
      cursors = (await realCursors(svc(), fx)).cursors;
    });

    for (const op of operations) {
      it(`${op.id}: documented statuses only, exact error bodies, refusals store nothing`, async function () {
        this.timeout(120_000);
        await createRecords(svc(), fx, fx.ids); // fresh records (and ids): earlier deletes took some
        const result = await fuzzOperation(svc(), fx, op, cursors, { runs: RUNS, seed: SEED });
        assert.ok(!result.failed, result.report ?? '');
        assert.equal(result.runs, RUNS);
        if (process.env.FUZZ_DEBUG) console.log(`      ${op.id}: ${JSON.stringify(result.statuses)}`);
      });
    }

    for (const f of findings) {
      it(`found by fuzzing: ${f.op} with ${f.what}: ${f.status}`, async () => {
        const res = await call(svc(), fx, opById(f.op), f.body(fx));
        assert.equal(res.status, f.status, res.text.slice(0, 300));
        await svc().flushEndpoints(); // an accepted event is stored (a failed batch would throw here)
      });
    }
  },
  { rateLimitPerSecond: 1_000_000, rateLimitBurst: 1_000_000 },
);
