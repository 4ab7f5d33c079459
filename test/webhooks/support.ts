import { execFileSync } from 'node:child_process';
import { approveProposal } from '../../handlers/webhooks/subscriptions.ts';
import type { ApplyResult } from '../../server/admin.ts';
import type { ServiceConfig } from '../../server/config.ts';
import { acme } from '../support/fixtures.ts';
import { readOutbox } from '../support/outbox.ts';
import { type Receiver, testCertificates } from '../support/receiver.ts';
import type { TestService } from '../support/service.ts';

/** The service's egress policy with exactly this receiver allowed (and the test CA trusted). */
export const receiverPolicy = (receiver: Receiver): Partial<ServiceConfig> => ({
  egress: { allowedPorts: [receiver.port], allowDestinations: [{ host: '127.0.0.1', port: receiver.port }], testCa: testCertificates().caPem },
});

/** Acme with a key that may propose webhooks and write deals and companies. */
export async function hookWorkspace(svc: TestService) {
  const spec = acme();
  spec.keys!.hooks = {
    name: 'Webhook integration',
    operations: ['webhooks.*', 'customers.*'],
    resources: { 'core:SalesPipeline': ['read', 'write'], 'core:Company': ['read', 'write'], 'core:Deal': ['read', 'write'] },
    delegation: 'all',
  };
  const ws: ApplyResult = await svc.apply(spec);
  return { ws, api: svc.client(ws.keys.hooks!.secret) };
}

/** Proposes and approves (as the owner) a subscription; returns its id and secret. */
export async function subscribe(svc: TestService, ws: ApplyResult, url: string, event: 'resource.created' | 'resource.updated' | 'resource.deleted' | 'meeting.completed', types: string[]) {
  const api = svc.client(ws.keys.hooks!.secret);
  const proposed = await api.webhooks.PrepareWebhook({ url, event, ...(types.length ? { resource_types: types } : {}) });
  if (proposed.response.status !== 200) throw new Error(`PrepareWebhook: ${JSON.stringify(proposed.error)}`);
  const { webhook_id, secret } = await approveProposal(svc.db, svc.clock, proposed.data!.proposal_id, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, role: 'owner' });
  return { id: webhook_id, secret, proposal: proposed.data! };
}

/** Reads every committed event into deliveries. */
export function fanOut(svc: TestService): Promise<void> {
  return readOutbox(svc, 'webhooks.fanout');
}

/** Deliveries leased now (attempts in flight, here or in another process). */
export async function inFlight(svc: TestService): Promise<number> {
  const row = await svc.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'delivering' AND lease_until > ?`, [svc.clock.now()]);
  return Number(row?.n ?? 0);
}

/**
 * Fans out and runs the delivery worker until nothing is due now and no attempt is in flight. The
 * worker never waits for its attempts (real HTTPS to the receiver), so this waits for them on the
 * database, bounded.
 */
export async function deliver(svc: TestService, timeoutMs = 20_000): Promise<void> {
  await fanOut(svc);
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await svc.workers.runOnce('webhooks.deliver')) continue;
    if (!(await inFlight(svc))) return;
    if (Date.now() > until) throw new Error('webhook attempts still in flight');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** HMAC-SHA256 hex by the openssl CLI (an implementation independent of the service's). */
export function opensslHmac(secret: string, data: Buffer): string {
  const out = execFileSync('openssl', ['dgst', '-sha256', '-hmac', secret], { input: data }).toString();
  return out.trim().split(/\s+/).at(-1)!;
}

export async function deliveries(svc: TestService, webhookId: string) {
  return svc.db.sql.all<{ id: string; event_id: string; status: string; attempts: number; next_attempt_at: number | null; first_attempt_at: number | null; replay_of: string | null }>(
    `SELECT id, event_id, status, attempts, next_attempt_at, first_attempt_at, replay_of FROM webhook_deliveries WHERE webhook_id = ? ORDER BY created_at, id`,
    [webhookId],
  );
}
