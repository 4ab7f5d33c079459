import type { ServiceModule } from '../../server/module.ts';
import { automationAdmin } from './admin.ts';
import { automationsSection } from './authoring.ts';
import { RUN_RETENTION_MS, RUNS_WORKER, runsWorker, triggerConsumer } from './engine.ts';
import { automationHandlers } from './handlers.ts';
import { pruneRuns } from './queries.ts';
import { automationNavigation, automationRoutes } from './pages.ts';

/**
 * Automation rules: the operations (list, get with runs, pause, delete), the engine (an outbox
 * consumer that queues runs and a worker that performs them), the settings pages (rules authored on a page too), the workspace file's
 * `automations:` section and operator commands.
 */
export const automation: ServiceModule<'automation'> = {
  namespace: 'automation',
  handlers: automationHandlers,
  consumers: (deps) => ({ 'automation.trigger': triggerConsumer(deps) }),
  workers: (deps) => ({ [RUNS_WORKER]: runsWorker(deps) }),
  jobs: ({ db, clock, logger }) => ({
    // Run history is kept 30 days (GetRule and the settings page show recent runs), deleted in batches.
    'automation.runs.prune': {
      everyMs: 60 * 60_000,
      run: async () => {
        let removed = 0;
        for (let batch = 0; batch < 100; batch++) {
          const n = await pruneRuns(db.sql, clock.now() - RUN_RETENTION_MS, 5000);
          removed += n;
          if (n < 5000) break;
        }
        if (removed) logger.info({ removed }, 'pruned automation runs older than 30 days');
      },
    },
  }),
  routes: (deps) => automationRoutes(deps),
  navigation: () => automationNavigation,
  stylesheet: new URL('./automation.css', import.meta.url),
  workspaceFile: automationsSection,
  admin: automationAdmin,
};
