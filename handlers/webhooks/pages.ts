/**
 * The webhook pages of a signed-in member (those who manage the workspace's settings act; other
 * members read what their role reads, by the API's own rule): proposals and their approval
 * (pages/proposals.ts), the one view of a signing secret (pages/secret.ts), subscriptions with their
 * deliveries and actions (pages/subscriptions.ts).
 *
 * Secrets: only the secret page shows one, once (held for one view, never in a URL or log). Errors
 * thrown here never carry a secret. Destinations can hold tokens in their path, so members who do not
 * manage settings see only their origin.
 */
import type express from 'express';
import type { ModuleDeps } from '../../server/module.ts';
import type { NavEntry } from '../../server/pages.ts';
import { webhookPageContext } from './pages/context.ts';
import { addRoutes } from './pages/add.ts';
import { proposalRoutes } from './pages/proposals.ts';
import { secretRoutes } from './pages/secret.ts';
import { subscriptionActions, subscriptionPages } from './pages/subscriptions.ts';

export { DELIVERIES_PER_PAGE } from './pages/subscriptions.ts';
export { typeInfo } from './pages/fields.ts';

export function webhookRoutes(deps: ModuleDeps): express.Router {
  const router = deps.pages.router();
  const ctx = webhookPageContext(deps);
  // Before the subscription pages: `/settings/webhooks/new` is not a webhook id.
  addRoutes(router, ctx);
  proposalRoutes(router, ctx);
  secretRoutes(router, ctx);
  subscriptionPages(router, ctx);
  subscriptionActions(router, ctx);
  return router;
}

/** The module's entry in the navigation bar. */
export const webhookNavigation: NavEntry[] = [{ label: 'Webhooks', path: '/settings/webhooks', order: 30 }];
export const webhookStylesheet = new URL('./pages/webhooks.css', import.meta.url);
