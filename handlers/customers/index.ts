import type { ServiceModule } from '../../server/module.ts';
import { salesPipelineHandlers } from './salesPipelines.ts';

/** Shared customer records: sales pipelines. */
export const customers: ServiceModule<'customers'> = {
  namespace: 'customers',
  handlers: { ...salesPipelineHandlers },
};
