import type { ServiceModule } from '../../server/module.ts';
import { companyHandlers } from './companies.ts';
import { dealHandlers } from './deals.ts';
import { salesPipelineHandlers } from './salesPipelines.ts';

/** Shared customer records on the record kit (server/recordKit.ts): sales pipelines, companies and deals. */
export const customers: ServiceModule<'customers'> = {
  namespace: 'customers',
  handlers: { ...salesPipelineHandlers, ...companyHandlers, ...dealHandlers },
  migrations: new URL('./migrations/', import.meta.url),
};
