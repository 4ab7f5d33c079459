import { type CatalogueEntry, catalogue } from '../../generated/catalogue.ts';
import { delegableMembers, keyMayCall } from '../../server/access.ts';
import type { ServiceModule } from '../../server/module.ts';
import { referenceRoutes } from './reference.ts';

/**
 * What a credential may do: the operations it may call (`GET /operations`) and the members it may act
 * for; and for people, the API reference page (`/docs`).
 */
export const discovery: ServiceModule<'discovery'> = {
  namespace: 'discovery',
  routes: referenceRoutes,
  // The public page `GET /` sends people who are not signed in to; members find it in the bar too.
  navigation: () => [{ label: 'API reference', path: '/docs', order: 90, landing: true }],
  handlers: {
    'discovery.ListOperations': async (_input, ctx) => ({
      items: (catalogue as readonly CatalogueEntry[])
        .filter((e) => e.listed && keyMayCall(ctx.credential, e))
        .map((e) => ({
          id: e.id,
          kind: e.kind,
          contract_version: e.contractVersion,
          workspace_supported: e.workspaceSupported,
          deprecated: e.deprecated,
          act_as: e.actAs,
          ...(e.resource ? { resource: e.resource, access: [...e.access] } : {}),
        })),
    }),

    'discovery.ListDelegationMembers': async (_input, ctx) => ({
      items: delegableMembers(ctx.credential).map((m) => ({ id: m.id, name: m.name })),
    }),
  },
};
