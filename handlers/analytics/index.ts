import type { ServiceModule } from '../../server/module.ts';
import { analyticsAdmin } from './admin.ts';
import { createCollector } from './collect.ts';
import { deleteSaltsCreatedBefore } from './collectQueries.ts';
import { dashboardBundle, dashboardNavigation, dashboardRoutes } from './dashboard.ts';
import { analyticsQueryHandlers } from './handlers.ts';
import { type AnalyticsSettings, analyticsSettings } from './settings.ts';

/** Web analytics: the query operations, collection (`/v1/track`, the tracker), the dashboard, imports. */
export const analytics: ServiceModule<'analytics', AnalyticsSettings> = {
  namespace: 'analytics',
  handlers: { ...analyticsQueryHandlers },
  config: analyticsSettings,
  migrations: new URL('./migrations/', import.meta.url),
  endpoints: (deps) => createCollector(deps),
  routes: (deps) => dashboardRoutes(deps),
  navigation: () => dashboardNavigation,
  browserBundles: [dashboardBundle],
  jobs: ({ db, clock, logger }) => ({
    'analytics.salts.prune': {
      everyMs: 60 * 60_000,
      run: async () => {
        const removed = await deleteSaltsCreatedBefore(db.sql, clock.now() - 48 * 3_600_000);
        if (removed) logger.info({ removed }, 'deleted visitor-hash salts older than 48 h');
      },
    },
  }),
  admin: analyticsAdmin,
};
