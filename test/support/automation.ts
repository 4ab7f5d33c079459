import { readOutbox } from './outbox.ts';
import type { TestService } from './service.ts';

/**
 * Lets the automation engine finish: reads every committed event (queuing runs) and performs the
 * runs, until nothing is left (runs' own changes are read in turn). `jobs: false`: only queue the
 * runs, perform none.
 */
export async function settleAutomation(svc: TestService, options: { timeoutMs?: number; jobs?: boolean } = {}): Promise<void> {
  for (let round = 0; round < 500; round++) {
    await readOutbox(svc, 'automation.trigger', options.timeoutMs);
    if (options.jobs === false) return;
    if (!(await svc.workers.runOnce('automation.runs'))) return;
  }
  throw new Error('automation did not settle in 500 rounds');
}
