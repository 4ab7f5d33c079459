'use strict';
/**
 * Shared customer records: sales pipelines, companies and deals. Setup creates, with run-unique names
 * and domains, the records each status needs: one to read, one to update, one whose `expected`
 * values will not match, one to delete, and a pipeline and a company that deals refer to (so that
 * deleting them is refused: 409). Everything created is deleted again by the hooks' cleanup.
 */

/** A value that is never the current one, for 409 expected-value mismatches. */
const NOT_CURRENT = 'Not the current value';

/**
 * Local runs: the customers' kit (test/customers/kit.ts) recorded an Idempotency-Key of the main key as in progress for this operation
 * (the same receipt row the server takes when a request starts), so the request with that key and
 * body answers 409 deterministically. Create operations have no other 409.
 */
function inProgress(operationId) {
  return (t, kit) => {
    const receipt = kit.ctx.customers.inProgress && kit.ctx.customers.inProgress[operationId];
    if (!receipt) {
      return kit.skip(
        t,
        `${operationId} answers 409 only while a request with the same Idempotency-Key is still in progress; ` +
          'that cannot be arranged deterministically from outside a deployment (local runs record one in the database).',
      );
    }
    t.request.headers['Idempotency-Key'] = receipt.idempotencyKey;
    kit.setBody(t, receipt.body);
  };
}

module.exports = {
  async setup(kit) {
    const { call, name, domain, ctx } = kit;
    const pipeline = async (what) => (await call('customers.CreateSalesPipeline', { data: { name: name(what), stages: ctx.customers.stages } })).item;
    const company = async (what, more = {}) =>
      (await call('customers.CreateCompany', { data: { name: name(what), domain: domain(what), lifecycle_stage: 'prospect', employee_count: 40, ...more } })).item;
    kit.seed.pipelines = { read: await pipeline('read'), update: await pipeline('update'), conflict: await pipeline('conflict'), remove: await pipeline('delete') };
    kit.seed.companies = {
      read: await company('company-read', { annual_revenue: { amount: '2500000', currency: 'EUR' } }),
      update: await company('company-update', { industry: 'Software' }),
      conflict: await company('company-conflict'),
      remove: await company('company-delete'),
    };
    // Deals refer to these two, so deleting them is refused.
    kit.seed.dealPipeline = await pipeline('deals');
    kit.seed.dealCompany = await company('deals-company');
    const deal = async (what) =>
      (
        await call('customers.CreateDeal', {
          data: { name: name(what), amount: { amount: '48000', currency: 'EUR' }, pipeline_id: kit.seed.dealPipeline.id, stage_id: 'proposal', company_id: kit.seed.dealCompany.id, close_date: '2027-03-31' },
        })
      ).item;
    kit.seed.deals = { read: await deal('deal-read'), update: await deal('deal-update'), conflict: await deal('deal-conflict'), remove: await deal('deal-delete') };
  },

  200: {
    // The examples' updated_since is a fixed date that may be in the future: list this run's records
    // instead, two to a page, so has_more and a non-null next_cursor are checked too.
    'customers.ListSalesPipelines': (t, kit) => kit.setBody(t, { limit: 2, updated_since: kit.seed.pipelines.read.created_at }),
    'customers.GetSalesPipeline': (t, kit) => kit.setBody(t, { id: kit.seed.pipelines.read.id }),
    'customers.CreateSalesPipeline': (t, kit) => {
      const body = kit.bodyOf(t);
      body.data.name = kit.name('created');
      kit.setBody(t, body);
    },
    'customers.UpsertSalesPipeline': (t, kit) => {
      const body = kit.bodyOf(t);
      body.data.name = kit.name('upserted'); // the example's "Renewals" could match a real pipeline
      kit.setBody(t, body);
    },
    'customers.UpdateSalesPipeline': (t, kit) => {
      const p = kit.seed.pipelines.update;
      kit.setBody(t, { id: p.id, data: { name: kit.name('updated') }, unset: ['is_default'], expected: { name: p.data.name, is_default: { $absent: true } } });
    },
    'customers.DeleteSalesPipeline': (t, kit) => kit.setBody(t, { id: kit.seed.pipelines.remove.id, expected: { name: kit.seed.pipelines.remove.data.name } }),

    'customers.ListCompanies': (t, kit) => kit.setBody(t, { limit: 2, updated_since: kit.seed.companies.read.created_at }),
    'customers.GetCompany': (t, kit) => kit.setBody(t, { id: kit.seed.companies.read.id }),
    'customers.CreateCompany': (t, kit) => {
      const body = kit.bodyOf(t); // the example, with a name and domain of this run (its domain in an unnormalised form)
      body.data.name = kit.name('company-created');
      body.data.domain = `https://www.${kit.domain('company-created').toUpperCase()}/about`;
      kit.setBody(t, body);
    },
    'customers.UpsertCompany': (t, kit) => {
      const body = kit.bodyOf(t);
      body.data.name = kit.name('company-upserted');
      body.data.domain = kit.domain('company-upserted');
      kit.setBody(t, body);
    },
    'customers.UpdateCompany': (t, kit) => {
      const c = kit.seed.companies.update;
      kit.setBody(t, { id: c.id, data: { lifecycle_stage: 'customer', employee_count: null }, unset: ['industry'], expected: { lifecycle_stage: 'prospect', phone: { $absent: true } } });
    },
    'customers.DeleteCompany': (t, kit) => kit.setBody(t, { id: kit.seed.companies.remove.id, expected: { domain: kit.seed.companies.remove.data.domain } }),

    // Four deals in the seed pipeline, two to a page.
    'customers.ListDeals': (t, kit) => kit.setBody(t, { limit: 2, pipeline_id: kit.seed.dealPipeline.id }),
    'customers.GetDeal': (t, kit) => kit.setBody(t, { id: kit.seed.deals.read.id }),
    'customers.CreateDeal': (t, kit) => {
      const body = kit.bodyOf(t); // the example, in this run's pipeline and company
      body.data.name = kit.name('deal-created');
      body.data.pipeline_id = kit.seed.dealPipeline.id;
      body.data.company_id = kit.seed.dealCompany.id;
      kit.setBody(t, body);
    },
    'customers.UpdateDeal': (t, kit) => kit.setBody(t, { id: kit.seed.deals.update.id, data: { stage_id: 'won' }, expected: { stage_id: 'proposal' } }),
    'customers.DeleteDeal': (t, kit) => kit.setBody(t, { id: kit.seed.deals.remove.id, expected: { stage_id: 'proposal' } }),
  },

  // An id no record has.
  404: {
    'customers.GetSalesPipeline': (t, kit) => kit.setBody(t, { id: kit.missingId('pl') }),
    'customers.UpdateSalesPipeline': (t, kit) => kit.setBody(t, { id: kit.missingId('pl'), data: { name: kit.name('never') } }),
    'customers.GetCompany': (t, kit) => kit.setBody(t, { id: kit.missingId('co') }),
    'customers.UpdateCompany': (t, kit) => kit.setBody(t, { id: kit.missingId('co'), data: { industry: 'Never' } }),
    'customers.GetDeal': (t, kit) => kit.setBody(t, { id: kit.missingId('dl') }),
    'customers.UpdateDeal': (t, kit) => kit.setBody(t, { id: kit.missingId('dl'), data: { name: kit.name('never') } }),
  },

  // An `expected` value that does not hold, a record still in use, a taken domain, or a request in progress.
  409: {
    'customers.CreateSalesPipeline': inProgress('customers.CreateSalesPipeline'),
    'customers.UpdateSalesPipeline': (t, kit) => kit.setBody(t, { id: kit.seed.pipelines.conflict.id, data: { name: kit.name('never') }, expected: { name: NOT_CURRENT } }),
    'customers.UpsertSalesPipeline': (t, kit) => kit.setBody(t, { data: { name: kit.seed.pipelines.conflict.data.name }, expected: { name: NOT_CURRENT } }),
    'customers.DeleteSalesPipeline': (t, kit) => kit.setBody(t, { id: kit.seed.dealPipeline.id }), // deals are in it

    'customers.CreateCompany': (t, kit) => kit.setBody(t, { data: { name: kit.name('duplicate'), domain: kit.seed.companies.read.data.domain } }),
    'customers.UpsertCompany': (t, kit) => kit.setBody(t, { data: { domain: kit.seed.companies.conflict.data.domain }, expected: { name: NOT_CURRENT } }),
    'customers.UpdateCompany': (t, kit) => kit.setBody(t, { id: kit.seed.companies.conflict.id, data: { industry: 'Never' }, expected: { industry: NOT_CURRENT } }),
    'customers.DeleteCompany': (t, kit) => kit.setBody(t, { id: kit.seed.dealCompany.id }), // deals refer to it

    'customers.CreateDeal': inProgress('customers.CreateDeal'),
    'customers.UpdateDeal': (t, kit) => kit.setBody(t, { id: kit.seed.deals.conflict.id, data: { stage_id: 'won' }, expected: { stage_id: 'lead' } }),
    'customers.DeleteDeal': (t, kit) => kit.setBody(t, { id: kit.seed.deals.conflict.id, expected: { name: NOT_CURRENT } }),
  },
};
