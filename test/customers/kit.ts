/**
 * What customers bring to the shared harness (test/support/kit.ts): the request fixtures their
 * contract scenarios use (the mocha suites' own, test/support/fixtures.ts), and idempotency receipts
 * recorded as still in progress, so that the create operations' 409 happens deterministically.
 */
import crypto from 'node:crypto';
import { lockReceipt, releaseReceipt } from '../../db/queries/idempotency.ts';
import { requestFingerprint } from '../../server/idempotency.ts';
import { createPipeline, stages } from '../support/fixtures.ts';
import type { TestKit } from '../support/kit.ts';

/**
 * Bodies of the create requests recorded as in progress: valid for the request schema (it is checked
 * before the receipt), with the defaults the validator fills in spelled out (the fingerprint is taken
 * after), never run (the receipt answers first).
 */
const IN_PROGRESS_BODIES: Record<string, unknown> = {
  'customers.CreateSalesPipeline': { ...createPipeline('Contract in-progress create'), private: false },
  'customers.CreateDeal': { data: { name: 'Contract in-progress deal', pipeline_id: 'pl_contract_in_progress', stage_id: 'lead' }, private: false },
};

/** What the contract hooks read as `ctx.customers`. */
export interface ContractCustomers {
  stages: typeof stages.basic;
  /** Local runs, by operation id: an Idempotency-Key of the main key recorded as in progress, with the body to send. */
  inProgress?: Record<string, { idempotencyKey: string; body: unknown; scope: string }>;
}

export const kit: TestKit = {
  contract: {
    context: (): ContractCustomers => ({ stages: stages.basic }),
    async seed(seed) {
      // Exactly what the platform stores when such a request with this key starts (server/idempotency.ts):
      // the receipt lock, not yet completed, under the same fingerprint.
      const inProgress: NonNullable<ContractCustomers['inProgress']> = {};
      const scope = `${seed.key.id}:-`; // receipts are scoped to the key and the member acted for (none)
      for (const [operationId, body] of Object.entries(IN_PROGRESS_BODIES)) {
        const idempotencyKey = `contract-in-progress-${crypto.randomUUID()}`;
        const locked = await lockReceipt(seed.db.sql, { scope, key: idempotencyKey }, operationId, requestFingerprint(operationId, body), seed.clock.now());
        if (!locked) throw new Error(`could not record the in-progress idempotency receipt of ${operationId}`);
        inProgress[operationId] = { idempotencyKey, body, scope };
      }
      return { inProgress };
    },
    // The never-finished receipts, so a reused database (PostgreSQL) does not collect them.
    async cleanup(db, seeded) {
      for (const receipt of Object.values((seeded as ContractCustomers | undefined)?.inProgress ?? {})) await releaseReceipt(db.sql, { scope: receipt.scope, key: receipt.idempotencyKey });
    },
  },
};
