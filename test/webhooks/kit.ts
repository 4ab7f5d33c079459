/**
 * What webhooks bring to the shared harness (test/support/kit.ts): approved subscriptions with
 * deliveries as the delivery worker leaves them, which the API alone cannot make (an owner approves on
 * a page; attempts need a receiver). Every run makes a new workspace, so a reused database
 * (PostgreSQL) gets fresh ones.
 */
import { resourceTypes, type Access } from '../../generated/catalogue.ts';
import { type DbWebhookDeliveryRow, type DbWebhookProposalRow, type DeliveryStatus, insertAttempt, insertDelivery, insertProposal } from '../../handlers/webhooks/queries.ts';
import { approveProposal, disableSubscription, PROPOSAL_TTL_MS } from '../../handlers/webhooks/subscriptions.ts';
import { newId } from '../../server/ids.ts';
import type { Seed, TestKit } from '../support/kit.ts';

/** The type the contract subscriptions carry: the PrepareWebhook example's. */
const WEBHOOK_TYPE = 'core:Deal';
/** The destination of the fixture subscriptions (the PrepareWebhook example's; nothing is ever sent to it: the harness runs no delivery worker). */
const WEBHOOK_URL = 'https://hooks.acme-receiver.com/workspace-operations';

/** A delivery the kit recorded. */
export interface ContractDelivery {
  delivery_id: string;
  event_id: string;
  /** Attempt ids recorded for it, in order. */
  attempts: string[];
}

/** What the contract hooks read as `ctx.webhooks`. */
export interface ContractWebhooks {
  /** Enabled, resource.updated of `type`: a delivery that failed (8 attempts, the first two recorded) and one still pending. */
  main: { webhook_id: string; failed: ContractDelivery; pending: ContractDelivery };
  /** Enabled, with one delivery that failed: RecoverWebhookEvents replays it (nothing else replays on it). */
  recover: { webhook_id: string; failed: ContractDelivery };
  /** Disabled by an owner after a delivery failed: ReplayWebhookEvent and RecoverWebhookEvents answer 409. */
  disabled: { webhook_id: string; failed: ContractDelivery };
  /** The type the main subscription carries (the document's example) and keys.narrow may not read. */
  type: string;
  /** Every webhook id above, in creation order. */
  all: string[];
}

/** A subscription as production makes it: a proposal as webhooks.PrepareWebhook stores it (by the seed's key), approved by an owner (what the approval page calls). */
async function subscribe(seed: Seed, path: string, event: DbWebhookProposalRow['event'], type: string): Promise<string> {
  const now = seed.clock.now();
  const proposalId = newId('whp');
  await insertProposal(seed.db.sql, {
    id: proposalId,
    workspace_id: seed.ws.workspace_id,
    url: `${WEBHOOK_URL}/${path}`,
    event,
    resource_types: JSON.stringify([type]),
    proposed_by_key: seed.key.id,
    proposed_by_member: null,
    status: 'pending',
    expires_at: now + PROPOSAL_TTL_MS,
    decided_by: null,
    decided_at: null,
    webhook_id: null,
    created_at: now,
  });
  return (await approveProposal(seed.db, seed.clock, proposalId, { workspaceId: seed.ws.workspace_id, memberId: seed.members.owner, role: 'owner' })).webhook_id;
}

/** A delivery of `webhookId` in `status` with these attempts recorded, as the worker leaves it (a failed one made all 8). */
async function deliver(seed: Seed, webhookId: string, type: string, status: DeliveryStatus, attempts: Array<{ status: number | null; error: string }>): Promise<ContractDelivery> {
  const now = seed.clock.now();
  const start = now - 10 * 60_000;
  const failed = status === 'failed';
  const eventId = newId('evt');
  const recordId = newId('dl');
  const delivery: DbWebhookDeliveryRow = {
    id: newId('whd'),
    workspace_id: seed.ws.workspace_id,
    webhook_id: webhookId,
    event_id: eventId,
    event_type: 'resource.updated',
    resource_type: type,
    record_id: recordId,
    event_occurred_at: start - 100,
    payload: JSON.stringify({ event: 'resource.updated', event_id: eventId, webhook_id: webhookId, resource_type: type, record_id: recordId, occurred_at: start - 100, changed_fields: ['stage_id'] }),
    status,
    attempts: failed ? 8 : attempts.length,
    first_attempt_at: start,
    next_attempt_at: failed ? null : now + 3_600_000,
    last_attempt_at: failed ? now - 60_000 : start + 30_000 * (attempts.length - 1),
    last_status_code: attempts.at(-1)!.status,
    last_error: attempts.at(-1)!.error,
    leased_by: null,
    lease_until: null,
    replay_of: null,
    created_at: start,
    finished_at: failed ? now - 60_000 : null,
  };
  await insertDelivery(seed.db.sql, delivery);
  const ids: string[] = [];
  for (const [i, a] of attempts.entries()) {
    const id = newId('wha');
    await insertAttempt(seed.db.sql, {
      id,
      delivery_id: delivery.id,
      webhook_id: webhookId,
      workspace_id: seed.ws.workspace_id,
      attempt: i + 1,
      started_at: start + 30_000 * i,
      duration_ms: a.status === null ? 10_000 : 84,
      status_code: a.status,
      error: a.error,
      response_body: a.status === null ? null : 'upstream unavailable',
      next_attempt_at: i === attempts.length - 1 && !failed ? delivery.next_attempt_at : start + 30_000 * (i + 1),
    });
    ids.push(id);
  }
  return { delivery_id: delivery.id, event_id: eventId, attempts: ids };
}

const TRIES = [
  { status: 500, error: 'HTTP 500' },
  { status: null, error: 'timeout after 10000 ms' },
];

export const kit: TestKit = {
  badInput: {
    /** Two subscriptions and a delivery with two attempts (second pages for the listings): real `wh`, `evt` and `whd` ids. */
    async seed(seed) {
      const type = resourceTypes[0];
      const webhookId = await subscribe(seed, 'first', 'resource.created', type);
      await subscribe(seed, 'second', 'resource.created', type);
      const delivery = await deliver(seed, webhookId, type, 'failed', TRIES);
      return { wh: webhookId, evt: delivery.event_id, whd: delivery.delivery_id };
    },
  },
  contract: {
    workspace(spec) {
      // narrow may propose webhooks but not read the webhook type (PrepareWebhook's 403 for a type it may not read).
      const resources = Object.fromEntries(resourceTypes.filter((t) => t !== WEBHOOK_TYPE).map((t) => [t, ['read', 'write'] as Access[]]));
      spec.keys = { ...spec.keys, narrow: { name: `Contract tests: webhooks without read on ${WEBHOOK_TYPE}`, operations: ['webhooks.PrepareWebhook'], resources } };
      return ['narrow'];
    },
    async seed(seed): Promise<ContractWebhooks> {
      if (!(resourceTypes as readonly string[]).includes(WEBHOOK_TYPE)) throw new Error(`${WEBHOOK_TYPE} is no longer a published resource type; pick another WEBHOOK_TYPE`);
      const main = await subscribe(seed, 'main', 'resource.updated', WEBHOOK_TYPE);
      const recover = await subscribe(seed, 'recover', 'resource.updated', WEBHOOK_TYPE);
      const disabled = await subscribe(seed, 'disabled', 'resource.updated', WEBHOOK_TYPE);
      const webhooks: ContractWebhooks = {
        main: { webhook_id: main, failed: await deliver(seed, main, WEBHOOK_TYPE, 'failed', TRIES), pending: await deliver(seed, main, WEBHOOK_TYPE, 'pending', TRIES.slice(0, 1)) },
        recover: { webhook_id: recover, failed: await deliver(seed, recover, WEBHOOK_TYPE, 'failed', TRIES) },
        disabled: { webhook_id: disabled, failed: await deliver(seed, disabled, WEBHOOK_TYPE, 'failed', TRIES) },
        type: WEBHOOK_TYPE,
        all: [main, recover, disabled],
      };
      if (!(await disableSubscription(seed.db, seed.clock, seed.ws.workspace_id, disabled, 'Contract tests'))) throw new Error(`could not disable webhook subscription ${disabled}`);
      return webhooks;
    },
  },
};
