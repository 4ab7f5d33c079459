import { getOutboxConsumer, peekOutbox } from '../../db/queries/outbox.ts';
import type { TestService } from './service.ts';

/**
 * Runs the outbox until `consumer` has handled every committed event. On PostgreSQL an event is
 * readable only once no older transaction anywhere in the cluster runs, so another client's
 * transaction can hold events back for a moment: that wait is on the database, bounded, not on the
 * service clock.
 */
export async function readOutbox(svc: TestService, consumer: string, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    await svc.outbox.runOnce();
    const c = await getOutboxConsumer(svc.db.sql, consumer);
    const ahead = c ? await peekOutbox(svc.db.sql, { xid: String(c.position_xid), seq: Number(c.position_seq) }) : 'none';
    if (ahead === 'none') return;
    if (ahead === 'held') {
      if (Date.now() > until) throw new Error(`${consumer}: events stay held back by another transaction`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}
