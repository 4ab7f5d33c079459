import type { ServiceModule } from '../../server/module.ts';
import { webhooksAdmin } from './admin.ts';
import { webhooksAuditWords } from './audit.ts';
import { DELIVER_WORKER, fanoutConsumer, RETENTION_MS } from './delivery.ts';
import { webhookHandlers } from './handlers.ts';
import { webhookNavigation, webhookRoutes, webhookStylesheet } from './pages.ts';
import { expireProposals, pruneWebhooks } from './queries.ts';
import { deliveryWorker } from './worker.ts';

/**
 * Webhooks: the operations, the fan-out consumer and the delivery worker, the approval and settings
 * pages, retention, and operator commands (including the legacy meeting.completed source).
 */
export const webhooks: ServiceModule<'webhooks'> = {
  namespace: 'webhooks',
  handlers: (deps) => webhookHandlers(deps.eventKinds),
  migrations: new URL('./migrations/', import.meta.url),
  consumers: (deps) => ({ 'webhooks.fanout': fanoutConsumer(deps) }),
  workers: (deps) => ({ [DELIVER_WORKER]: deliveryWorker(deps) }),
  jobs: ({ db, clock, logger }) => ({
    'webhooks.prune': {
      everyMs: 60 * 60_000,
      run: async () => {
        const now = clock.now();
        await expireProposals(db.sql, now);
        const { deliveries } = await pruneWebhooks(db.sql, now - RETENTION_MS, now);
        if (deliveries) logger.info({ deliveries }, 'pruned webhook deliveries older than 30 days');
      },
    },
  }),
  routes: (deps) => webhookRoutes(deps),
  navigation: () => webhookNavigation,
  stylesheet: webhookStylesheet,
  admin: webhooksAdmin,
  audit: webhooksAuditWords,
};
