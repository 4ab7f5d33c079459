import type { ServiceModule } from '../../server/module.ts';
import { automationAdmin } from './admin.ts';
import { automationsSection } from './authoring.ts';
import { RUNS_WORKER, runsWorker, triggerConsumer } from './engine.ts';
import { automationHandlers } from './handlers.ts';
import { automationRoutes } from './pages.ts';

/**
 * Automation rules: the operations (list, get with runs, pause, delete), the engine (an outbox
 * consumer that queues runs and a worker that performs them), the settings page, the workspace file's
 * `automations:` section and operator commands.
 */
export const automation: ServiceModule<'automation'> = {
  namespace: 'automation',
  handlers: automationHandlers,
  consumers: (deps) => ({ 'automation.trigger': triggerConsumer(deps) }),
  workers: (deps) => ({ [RUNS_WORKER]: runsWorker(deps) }),
  routes: (deps) => automationRoutes(deps),
  workspaceFile: automationsSection,
  admin: automationAdmin,
};
