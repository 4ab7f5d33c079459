import type { ServiceModule } from '../../server/module.ts';
import { RECORDS_CSS, recordsNavigation, recordsRoutes } from './pages.ts';

/**
 * Record pages, a platform feature: list, read, create, edit (with conflicts shown) and delete every
 * record type the document publishes, through the same operations as the API with the member's own
 * session (pages.ts). No operations, tables or jobs of its own.
 */
export const records: ServiceModule<'records'> = {
  namespace: 'records',
  handlers: {},
  routes: (deps) => recordsRoutes({ pages: deps.pages, operations: deps.operations }),
  navigation: () => recordsNavigation,
  stylesheet: RECORDS_CSS,
};
