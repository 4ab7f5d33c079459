/**
 * What people do with webhooks (the approval and settings pages, the admin CLI): approve or reject a
 * proposal, disable, enable again after a test delivery, rotate the secret, move a legacy subscription
 * to the `v1` signing contract, delete; and the source of legacy `meeting.completed` events.
 *
 * Approvals, rejections, rotations and signing-contract moves are written to the audit log in the
 * transaction that makes them (server/audit.ts), with the member (pages) or the operator (CLI) as actor.
 * No audit entry names a secret or a destination's path (paths can hold tokens): only its host.
 */
import type { Database } from '../../db/database.ts';
import { resourceTypes } from '../../generated/catalogue.ts';
import type { Clock } from '../../server/clock.ts';
import { checkDestination, EgressClient, EgressRefused, type EgressPolicy } from '../../server/egress.ts';
import { type AuditActor, OPERATOR, recordAudit } from '../../server/audit.ts';
import { mayManageSettings } from '../../server/capabilities.ts';
import { emitEvent, eventKind } from '../../server/events.ts';
import { newId } from '../../server/ids.ts';
import { judgeAccess } from './access.ts';
import { ATTEMPT_TIMEOUT_MS, RESPONSE_BODY_BYTES } from './delivery.ts';
import type { Sql } from '../../db/database.ts';
import { decideProposal, type DbWebhookSubscriptionRow, findProposal, findSubscription, insertSubscription, type SigningContract, LISTENER_SCHEME, type WebhookEventName } from './queries.ts';
import { newSigningSecret, signedHeaders } from './signatures.ts';

/** A refusal a person can act on (the page or the CLI shows its message). */
export class WebhookActionError extends Error {
  constructor(
    message: string,
    readonly status = 400,
  ) {
    super(message);
  }
}

/** How long a rotated-out secret still signs deliveries (beside the new one). */
export const ROTATION_GRACE_MS = 24 * 3_600_000;
/** How long a proposal waits for a decision. */
export const PROPOSAL_TTL_MS = 72 * 3_600_000;

export interface Approver {
  readonly workspaceId: string;
  readonly memberId: string;
  readonly role: string;
  /** The member's name for the audit log (read from the members table when absent). */
  readonly name?: string;
}

/** The approver as the audit log's actor. */
async function memberActor(sql: Sql, a: Approver): Promise<AuditActor> {
  const name = a.name ?? (await sql.one<{ name: string }>(`SELECT name FROM members WHERE workspace_id = ? AND id = ?`, [a.workspaceId, a.memberId]))?.name;
  return { type: 'member', id: a.memberId, label: name ?? a.memberId };
}

/** A subscription or proposal as an audit subject: its id, event and destination host (never the path, which can hold a token). */
function auditSubject(id: string, event: string, url: string): { type: 'webhook'; id: string; label: string } {
  return { type: 'webhook', id, label: `${event} to ${hostOf(url)}` };
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '?';
  }
}

/**
 * The contract a new subscription signs by: `meeting.completed` keeps its existing (legacy) signature,
 * as the document promises, until someone moves it; resource events sign by `v1`.
 */
export const initialSigningContract = (event: string): SigningContract => (event === 'meeting.completed' ? 'legacy' : 'v1');

const mayDecide = (a: Approver) => mayManageSettings(a.role);

/** A new subscription, enabled now, with no attempt yet: what an approval (or a listener) stores. */
export function newSubscriptionRow(s: {
  id: string;
  workspaceId: string;
  url: string;
  event: WebhookEventName;
  /** JSON array of record types. */
  resourceTypes: string;
  secret: string;
  /** The proposal approved; '' for a listener (no proposal). */
  proposalId: string;
  /** The approving member's id, or `operator`. */
  approvedBy: string;
  accessKeyId: string | null;
  accessMemberId: string | null;
  now: number;
}): DbWebhookSubscriptionRow {
  return {
    id: s.id,
    workspace_id: s.workspaceId,
    url: s.url,
    event: s.event,
    resource_types: s.resourceTypes,
    enabled: true,
    enabled_since: s.now,
    secret: s.secret,
    previous_secret: null,
    previous_secret_until: null,
    consecutive_failures: 0,
    disabled_at: null,
    disabled_reason: null,
    proposal_id: s.proposalId,
    approved_by: s.approvedBy,
    access_key_id: s.accessKeyId,
    access_member_id: s.accessMemberId,
    access_lost: null,
    last_attempt_at: null,
    last_success_at: null,
    last_failure_at: null,
    created_at: s.now,
    updated_at: s.now,
    signing_contract: initialSigningContract(s.event),
    signing_contract_changed_at: null,
    signing_contract_changed_by: null,
  };
}

/** Approves a pending proposal: the subscription is enabled now and its secret returned, to be shown once. */
export async function approveProposal(db: Database, clock: Clock, proposalId: string, approver: Approver): Promise<{ webhook_id: string; secret: string }> {
  if (!mayDecide(approver)) throw new WebhookActionError('Only owners and admins approve webhooks.', 403);
  const now = clock.now();
  return db.tx(async (sql) => {
    const p = await findProposal(sql, proposalId, true);
    if (!p || p.workspace_id !== approver.workspaceId) throw new WebhookActionError('No such proposal in this workspace.', 404);
    if (p.status !== 'pending') throw new WebhookActionError(`This proposal is already ${p.status}.`, 409);
    if (Number(p.expires_at) <= now) throw new WebhookActionError('This proposal has expired; ask for a new one (webhooks.PrepareWebhook).', 410);
    const types = JSON.parse(p.resource_types) as string[];
    const unknown = types.find((t) => !(resourceTypes as readonly string[]).includes(t));
    if (unknown) throw new WebhookActionError(`The type ${unknown} is no longer published.`, 409);
    const secret = newSigningSecret();
    const id = newId('wh');
    // A proposal made on the dashboard has no key (proposed_by_key ''): it delivers as its member.
    const accessKey = p.proposed_by_key || null;
    const verdict = await judgeAccess(sql, { id, workspace_id: p.workspace_id, resource_types: p.resource_types, access_key_id: accessKey, access_member_id: p.proposed_by_member }, now);
    if (!verdict.ok) throw new WebhookActionError(`This proposal can no longer be approved: ${verdict.reason}. Ask for a new one (webhooks.PrepareWebhook).`, 409);
    const row = newSubscriptionRow({
      id,
      workspaceId: p.workspace_id,
      url: p.url,
      event: p.event,
      resourceTypes: p.resource_types,
      secret,
      proposalId: p.id,
      approvedBy: approver.memberId,
      // A replacement of this key takes over at the first delivery (access.ts).
      accessKeyId: accessKey,
      accessMemberId: p.proposed_by_member,
      now,
    });
    await insertSubscription(sql, row);
    await decideProposal(sql, p.id, 'approved', approver.memberId, now, id);
    await recordAudit(sql, {
      workspaceId: p.workspace_id,
      actor: await memberActor(sql, approver),
      action: 'webhook.approved',
      subject: auditSubject(id, p.event, p.url),
      details: { proposal_id: p.id, event: p.event, resource_types: types, destination_host: hostOf(p.url), proposed_by_key: p.proposed_by_key || null, acting_for_member: p.proposed_by_member, signing_contract: row.signing_contract },
      at: now,
    });
    return { webhook_id: id, secret };
  });
}

export async function rejectProposal(db: Database, clock: Clock, proposalId: string, approver: Approver): Promise<void> {
  if (!mayDecide(approver)) throw new WebhookActionError('Only owners and admins decide on webhooks.', 403);
  await db.tx(async (sql) => {
    const p = await findProposal(sql, proposalId, true);
    if (!p || p.workspace_id !== approver.workspaceId) throw new WebhookActionError('No such proposal in this workspace.', 404);
    if (p.status !== 'pending') throw new WebhookActionError(`This proposal is already ${p.status}.`, 409);
    const now = clock.now();
    await decideProposal(sql, p.id, 'rejected', approver.memberId, now, null);
    // The subject is the proposal (no subscription exists): its whp_ id.
    await recordAudit(sql, {
      workspaceId: p.workspace_id,
      actor: await memberActor(sql, approver),
      action: 'webhook.rejected',
      subject: auditSubject(p.id, p.event, p.url),
      details: { proposal_id: p.id, event: p.event, resource_types: JSON.parse(p.resource_types) as string[], proposed_by_key: p.proposed_by_key || null },
      at: now,
    });
  });
}

async function subscriptionOf(db: Database, workspaceId: string, id: string): Promise<DbWebhookSubscriptionRow> {
  const s = await findSubscription(db.sql, workspaceId, id);
  if (!s) throw new WebhookActionError('No such webhook subscription in this workspace.', 404);
  return s;
}

/** Disables a subscription: no new events are delivered, pending ones fail when their turn comes. */
export async function disableSubscription(db: Database, clock: Clock, workspaceId: string, id: string, by: string): Promise<boolean> {
  await subscriptionOf(db, workspaceId, id);
  const now = clock.now();
  return (await db.sql.run(`UPDATE webhook_subscriptions SET enabled = ?, disabled_at = ?, disabled_reason = ?, updated_at = ? WHERE id = ? AND enabled = ?`, [false, now, `disabled by ${by}`, now, id, true])) > 0;
}

/** The outcome of a test delivery (a `webhook.test` event signed like the subscription's events). */
export interface TestDelivery {
  ok: boolean;
  status: number | null;
  error: string | null;
  durationMs: number;
  /** The first KiB of the receiver's answer (as the deliveries list shows an attempt's). */
  response?: string;
}

/** Test events a subscription may be sent from its page: at most 10 an hour (each is a request to the receiver). */
export const TEST_EVENT_BUDGET = { cap: 10, perMs: 3_600_000 } as const;

/** The service's egress client, or (a command line, a page not given one) a client for this policy, closed after. */
async function withEgress<T>(egress: EgressClient | EgressPolicy, use: (client: EgressClient) => Promise<T>): Promise<T> {
  if (egress instanceof EgressClient) return use(egress);
  const client = new EgressClient(egress);
  try {
    return await use(client);
  } finally {
    await client.close();
  }
}

export async function testDelivery(s: DbWebhookSubscriptionRow, now: number, egress: EgressClient | EgressPolicy): Promise<TestDelivery> {
  const eventId = newId('evt');
  const body = JSON.stringify({ event: 'webhook.test', event_id: eventId, webhook_id: s.id, occurred_at: now });
  const headers = {
    'Content-Type': 'application/json',
    'User-Agent': 'WorkspaceOperations-Webhooks/1',
    ...signedHeaders({ legacy: s.signing_contract === 'legacy', eventId, attemptId: newId('wha'), body, nowMs: now, secrets: [s.secret] }),
  };
  try {
    const r = await withEgress(egress, (client) => client.post(s.url, { headers, body, timeoutMs: ATTEMPT_TIMEOUT_MS, maxResponseBytes: RESPONSE_BODY_BYTES }));
    if (r.kind === 'error') return { ok: false, status: null, error: r.error, durationMs: r.durationMs };
    const ok = r.status >= 200 && r.status < 300;
    return { ok, status: r.status, error: ok ? null : r.status < 400 && r.status >= 300 ? `redirect (not followed): ${r.status}` : `HTTP ${r.status}`, durationMs: r.durationMs, response: r.body.slice(0, 1024) };
  } catch (err) {
    if (err instanceof EgressRefused) return { ok: false, status: null, error: `destination refused: ${err.message}`, durationMs: 0 };
    throw err;
  }
}

/**
 * Enables a disabled subscription after a successful test delivery: the failure count is cleared and
 * events from now on are delivered (events of the disabled period can be recovered).
 */
export async function enableSubscription(db: Database, clock: Clock, workspaceId: string, id: string, egress: EgressClient | EgressPolicy): Promise<TestDelivery> {
  const s = await subscriptionOf(db, workspaceId, id);
  if (s.enabled) return { ok: true, status: null, error: null, durationMs: 0 };
  const verdict = await judgeAccess(db.sql, s, clock.now());
  if (!verdict.ok) return { ok: false, status: null, error: `access lost: ${verdict.reason}; propose it again with a key that may read its types`, durationMs: 0 };
  // A `webhooks listen` subscription has no address to test: its listener verifies what it receives.
  const test = s.url.startsWith(LISTENER_SCHEME) ? { ok: true as const, status: null, error: null, durationMs: 0 } : await testDelivery(s, clock.now(), egress);
  if (!test.ok) return test;
  const now = clock.now();
  await db.sql.run(
    `UPDATE webhook_subscriptions SET enabled = ?, enabled_since = ?, consecutive_failures = 0, disabled_at = NULL, disabled_reason = NULL, access_lost = NULL, last_success_at = ?, updated_at = ? WHERE id = ? AND enabled = ?`,
    [true, now, now, now, id, false],
  );
  return test;
}

/** A new signing secret, returned once; the old one still signs (beside it) for ROTATION_GRACE_MS. */
export async function rotateSecret(db: Database, clock: Clock, workspaceId: string, id: string, actor: AuditActor = OPERATOR): Promise<{ secret: string; previous_valid_until: number }> {
  const s = await subscriptionOf(db, workspaceId, id);
  const now = clock.now();
  const secret = newSigningSecret();
  const until = now + ROTATION_GRACE_MS;
  await db.tx(async (sql) => {
    // One statement: two rotations at once cannot both keep the same old secret.
    const changed = await sql.run(`UPDATE webhook_subscriptions SET previous_secret = secret, secret = ?, previous_secret_until = ?, updated_at = ? WHERE id = ?`, [secret, until, now, id]);
    if (!changed) throw new WebhookActionError('No such webhook subscription in this workspace.', 404);
    await recordAudit(sql, { workspaceId, actor, action: 'webhook.secret_rotated', subject: auditSubject(id, s.event, s.url), details: { previous_secret_valid_until: until }, at: now });
  });
  return { secret, previous_valid_until: until };
}

/** The outcome of a signing-contract move. */
export interface SigningContractMove {
  webhook_id: string;
  before: SigningContract;
  after: SigningContract;
  changed_at: number;
}

/**
 * Moves a subscription to another signing contract; only `legacy` to `v1` exists, and it is one-way
 * (no move back). From the next attempt on, every delivery (retries of earlier events too) and every
 * test delivery carries `X-Webhook-Timestamp` and `X-Webhook-Signature: v1=<hex HMAC over
 * "<timestamp>.<body>">`; the body stays the same. `by` is what the subscription keeps (a member id,
 * or `operator`); the audit entry names the actor.
 */
export async function changeSigningContract(db: Database, clock: Clock, workspaceId: string | null, id: string, to: string, actor: AuditActor): Promise<SigningContractMove> {
  if (to === 'legacy') throw new WebhookActionError('The move is one-way: a subscription on the timestamped v1 signature never goes back to the bare legacy signature.');
  if (to !== 'v1') throw new WebhookActionError(`Unknown signing contract "${to}": the only move is --to v1 (legacy bare HMAC to the timestamped v1= signature).`);
  const now = clock.now();
  return db.tx(async (sql) => {
    const s = await sql.one<DbWebhookSubscriptionRow>(`SELECT * FROM webhook_subscriptions WHERE id = ?${sql.dialect === 'pg' ? ' FOR UPDATE' : ''}`, [id]);
    if (!s || (workspaceId !== null && s.workspace_id !== workspaceId)) throw new WebhookActionError(`No webhook subscription ${id}${workspaceId ? ' in this workspace' : ''}.`, 404);
    if (s.signing_contract === 'v1') {
      const since = s.signing_contract_changed_at === null ? 'since its approval' : `since ${new Date(Number(s.signing_contract_changed_at)).toISOString()}`;
      throw new WebhookActionError(`The webhook ${id} already signs with the timestamped v1 signature (${since}); nothing to move.`, 409);
    }
    const by = actor.type === 'member' || actor.type === 'key' ? actor.id : actor.type;
    await sql.run(
      `UPDATE webhook_subscriptions SET signing_contract = ?, signing_contract_changed_at = ?, signing_contract_changed_by = ?, updated_at = ? WHERE id = ? AND signing_contract = ?`,
      ['v1', now, by, now, id, s.signing_contract],
    );
    await recordAudit(sql, {
      workspaceId: s.workspace_id,
      actor,
      action: 'webhook.signing_contract_changed',
      subject: auditSubject(s.id, s.event, s.url),
      details: { before: s.signing_contract, after: 'v1' },
      at: now,
    });
    return { webhook_id: s.id, before: s.signing_contract, after: 'v1', changed_at: now };
  });
}

/** Deletes a subscription with its delivery history. */
export async function deleteSubscription(db: Database, workspaceId: string, id: string): Promise<boolean> {
  await subscriptionOf(db, workspaceId, id);
  return db.tx(async (sql) => {
    await sql.run(`DELETE FROM webhook_attempts WHERE webhook_id = ?`, [id]);
    await sql.run(`DELETE FROM webhook_deliveries WHERE webhook_id = ?`, [id]);
    return (await sql.run(`DELETE FROM webhook_subscriptions WHERE id = ?`, [id])) > 0;
  });
}

/** The legacy event kind this module declares (its payload and bare-hex signature are webhooks' own). */
export const MEETING_COMPLETED = eventKind('meeting.completed');

/**
 * Records a completed meeting (the meetings integration is outside this service): a `meeting.completed`
 * change event in the outbox, delivered to the workspace's `meeting.completed` subscriptions.
 */
export async function recordMeetingCompleted(db: Database, clock: Clock, workspaceId: string, meetingId: string): Promise<{ event_id: string }> {
  if (!/^[A-Za-z0-9_-]{1,40}$/.test(meetingId)) throw new WebhookActionError('A meeting id is 1 to 40 letters, digits, _ or -.');
  const exists = await db.sql.one(`SELECT 1 AS ok FROM workspaces WHERE id = ?`, [workspaceId]);
  if (!exists) throw new WebhookActionError(`No workspace ${workspaceId}.`, 404);
  const id = await db.tx((sql) =>
    emitEvent(sql, { kind: MEETING_COMPLETED, workspaceId, subjectType: 'meeting', subjectId: meetingId, occurredAt: clock.now() }),
  );
  return { event_id: id };
}

/** Checks a destination for a proposal (syntax and policy; names are resolved at every attempt). */
export function checkProposedUrl(url: string, policy: EgressPolicy): string {
  try {
    return checkDestination(url, policy).toString();
  } catch (err) {
    if (err instanceof EgressRefused) throw new WebhookActionError(err.message);
    throw err;
  }
}
