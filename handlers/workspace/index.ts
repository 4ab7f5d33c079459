import { listApps, listBundles } from '../../db/queries/workspaces.ts';
import type { ServiceModule } from '../../server/module.ts';

/** The workspace's sites (bundles) and apps. */
export const workspace: ServiceModule<'workspace'> = {
  namespace: 'workspace',
  handlers: {
    'workspace.ListBundles': async (_input, ctx) => {
      const rows = await listBundles(ctx.sql, ctx.workspaceId);
      return { items: rows.map((b) => ({ content_id: b.id, name: b.name, domain: b.domain, created_at: b.created_at })) };
    },

    'workspace.ListApps': async (_input, ctx) => {
      const rows = await listApps(ctx.sql, ctx.workspaceId);
      return {
        items: rows.map((a) => {
          const resourceTypes: string[] = JSON.parse(a.resource_types);
          return { app_id: a.id, name: a.name, resource_types: resourceTypes, created_at: a.created_at };
        }),
      };
    },
  },
};
