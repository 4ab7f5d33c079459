/**
 * The composition root: the platform (server/) with every namespace's module (handlers/). This is the
 * only file that knows the modules; adding a namespace is its document, its folder and one line here.
 */
import type { AnyOperationId } from './generated/catalogue.ts';
import { analytics } from './handlers/analytics/index.ts';
import { customers } from './handlers/customers/index.ts';
import { discovery } from './handlers/discovery/index.ts';
import { workspace } from './handlers/workspace/index.ts';
import { buildService, type ServiceDeps } from './server/service.ts';

export const modules = [discovery, workspace, customers, analytics] as const;

// Every operation of the document belongs to a listed module (each module's handlers are complete for its namespace).
type Uncovered = Exclude<AnyOperationId, `${(typeof modules)[number]['namespace']}.${string}`>;
const everyNamespaceListed: [Uncovered] extends [never] ? true : { missing: Uncovered } = true;
void everyNamespaceListed;

export type { ServiceDeps };

/** Builds the HTTP listener and the background jobs of one service process. */
export function createService(deps: ServiceDeps) {
  return buildService(deps, modules);
}
