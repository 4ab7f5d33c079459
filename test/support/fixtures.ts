import type { RequestBody } from '../../generated/client.ts';
import type { WorkspaceSpec } from '../../server/admin.ts';

/** Typed request fixtures shared by the mocha suites and the Dredd hooks. */
export const stages = {
  basic: [
    { id: 'lead', label: 'Lead', kind: 'open', probability: 10, tone: 'gray' },
    { id: 'proposal', label: 'Proposal sent', kind: 'open', probability: 60, tone: 'blue' },
    { id: 'won', label: 'Closed won', kind: 'won', probability: 100, tone: 'accent' },
    { id: 'lost', label: 'Closed lost', kind: 'lost', probability: 0, tone: 'warn' },
  ],
} satisfies Record<string, NonNullable<RequestBody<'customers.CreateSalesPipeline'>['data']['stages']>>;

export const createPipeline = (name = 'New business'): RequestBody<'customers.CreateSalesPipeline'> => ({
  data: { name, stages: stages.basic },
});

export const createCompany = (name = 'Globex', domain = 'globex.com'): RequestBody<'customers.CreateCompany'> => ({
  data: { name, domain },
});

/** A deal in a pipeline created with `stages.basic` (stage `proposal`: 60 %). */
export const createDeal = (pipelineId: string, stageId = 'proposal', more: Partial<RequestBody<'customers.CreateDeal'>['data']> = {}): RequestBody<'customers.CreateDeal'> => ({
  data: { name: 'Fleet renewal', pipeline_id: pipelineId, stage_id: stageId, amount: { amount: '1000', currency: 'EUR' }, ...more },
});

/** The workspace most suites start from: an owner, a member, a disabled member, a site, an app and keys. */
export const acme = (): WorkspaceSpec => ({
  workspace: { name: 'Acme' },
  members: {
    olga: { name: 'Olga Owner', email: 'olga@acme.test', role: 'owner' },
    ada: { name: 'Ada Member', email: 'ada@acme.test', role: 'member' },
    bob: { name: 'Bob Admin', email: 'bob@acme.test', role: 'admin' },
    max: { name: 'Max Gone', email: 'max@acme.test', role: 'member', disabled: true },
  },
  bundles: { docs: { name: 'Docs site', domain: 'docs.acme.test' } },
  apps: { tickets: { name: 'Tickets', resource_types: ['Ticket'] } },
  keys: {
    ci: {
      name: 'CI integration',
      operations: ['customers.*', 'workspace.*'],
      resources: { 'core:SalesPipeline': ['read', 'write'] },
      delegation: ['ada', 'olga', 'max'],
    },
    all: { name: 'Delegates to everyone', operations: ['customers.*'], resources: { 'core:SalesPipeline': ['read', 'write'] }, delegation: 'all' },
    reader: { name: 'Read only', operations: ['customers.ListSalesPipelines', 'customers.GetSalesPipeline', 'customers.UpdateSalesPipeline'], resources: { 'core:SalesPipeline': ['read'] } },
    bare: { name: 'No grants', operations: [] },
    // Companies and deals (and pipelines): customers.* with read and write on all three types.
    sales: {
      name: 'Sales integration',
      operations: ['customers.*'],
      resources: { 'core:SalesPipeline': ['read', 'write'], 'core:Company': ['read', 'write'], 'core:Deal': ['read', 'write'] },
      delegation: ['ada', 'olga', 'bob', 'max'],
    },
  },
});
