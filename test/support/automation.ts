import { getOutboxConsumer, peekOutbox } from '../../db/queries/outbox.ts';
import type { TestService } from './service.ts';

/**
 * Lets the automation engine finish: reads the outbox (queues runs) and performs the due runs until
 * every committed event is handled and no run is due. On PostgreSQL an event is readable only once no
 * older transaction anywhere in the cluster is still running, so a transaction of another client can
 * hold events back for a moment: that wait is on the database, bounded, not on the service clock.
 */
/** `jobs: false`: only queue the runs (read every committed event), perform none. */
export async function settleAutomation(svc: TestService, options: { timeoutMs?: number; jobs?: boolean } = {}): Promise<void> {
  const until = Date.now() + (options.timeoutMs ?? 15_000);
  const runJobs = options.jobs ?? true;
  for (;;) {
    const events = await svc.outbox.runOnce();
    const jobs = runJobs ? await svc.workers.runOnce('automation.runs') : 0;
    if (!events && !jobs) {
      const consumer = await getOutboxConsumer(svc.db.sql, 'automation.trigger');
      const ahead = consumer ? await peekOutbox(svc.db.sql, { xid: String(consumer.position_xid), seq: Number(consumer.position_seq) }) : 'none';
      const due = await svc.db.sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM automation_runs WHERE status = 'queued' OR (status = 'running' AND lease_until < ?)`, [svc.clock.now()]);
      if (ahead === 'none' && (!runJobs || Number(due?.n ?? 0) === 0)) return;
      if (ahead === 'ready') continue;
    }
    if (Date.now() > until) throw new Error('automation did not settle: events stay held back by another transaction, or runs stay due');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
