/** Subscriptions, proposals and deliveries as the webhook pages show them (plain values for the templates). */
import type { Sql } from '../../../db/database.ts';
import { timeInWords, untilInWords } from '../../../server/pages/format.ts';
import {
  type DbWebhookAttemptRow,
  type DbWebhookDeliveryRow,
  type DbWebhookProposalRow,
  type DbWebhookSubscriptionRow,
  keyNameOf,
  type WebhookEventName,
} from '../queries.ts';
import { typeInfo } from './fields.ts';

const RESPONSE_SHOWN = 300;

export const EVENT_WORDS: Record<WebhookEventName, string> = {
  'resource.created': 'when a record of these types is created',
  'resource.updated': 'when a record of these types is changed (each delivery names the changed fields)',
  'resource.deleted': 'when a record of these types is deleted',
  'meeting.completed': 'when a meeting is completed (legacy event: the meeting id only)',
  'signing.request.created': 'when a signing request is created (ids, status, title and signer counts; never addresses, links or contents)',
  'signing.request.sent': 'when an invitation to a signer goes out (ids, status, title and signer counts)',
  'signing.request.opened': 'when a signer first opens the document (ids, status, title and signer counts)',
  'signing.request.signed': 'when a signer signs (ids, status, title and signer counts)',
  'signing.request.declined': 'when a signer declines (ids, status, title and signer counts)',
  'signing.request.completed': 'when every signer has signed a request (ids, status, title and signer counts)',
  'signing.request.cancelled': 'when a signing request is cancelled (ids, status, title and signer counts)',
  'signing.request.expired': 'when a signing request passes its deadline unsigned (ids, status, title and signer counts)',
  'signing.archive.ready': 'when the signed archive of a request is ready (its file id)',
  'documents.upload.completed': 'when an upload is completed and scanned (upload and file ids, size, pages; never the name or contents)',
};

const n = (v: number | string | null) => (v === null ? null : Number(v));
const at = (v: number | string | null) => (v === null ? '' : timeInWords(Number(v)));

export const subscriptionHref = (id: string) => `/settings/webhooks/${encodeURIComponent(id)}`;
export const proposalHref = (id: string) => `/settings/webhooks/proposals/${encodeURIComponent(id)}`;
/** The page that shows a signing secret once, after approval or rotation. */
export const secretHref = (id: string) => `${subscriptionHref(id)}/secret`;
export const typesOf = (row: { resource_types: string }) => JSON.parse(row.resource_types) as string[];

/** Names members by id ('' for none). */
export type MemberNamer = (id: string | null) => string;

/** What a person may see of a destination: all of it for those who manage settings, else its origin (paths can hold tokens). */
export function destinationFor(url: string, manage: boolean): { text: string; hidden: boolean } {
  if (manage) return { text: url, hidden: false };
  try {
    return { text: `${new URL(url).origin}/…`, hidden: true };
  } catch {
    return { text: '…', hidden: true };
  }
}

const reasonInWords = (reason: string | null, name: MemberNamer) => (reason ?? '').replace(/\bmember (\S+)/g, (_m, id: string) => name(id));

export function subscriptionSummary(s: DbWebhookSubscriptionRow, manage: boolean, name: MemberNamer, now: number) {
  const previousUntil = n(s.previous_secret_until);
  return {
    id: s.id,
    href: subscriptionHref(s.id),
    destination: destinationFor(s.url, manage),
    event: s.event,
    eventWords: EVENT_WORDS[s.event] ?? s.event,
    types: typesOf(s),
    enabled: Boolean(s.enabled),
    disabledAt: at(s.disabled_at),
    disabledReason: reasonInWords(s.disabled_reason, name),
    failures: Number(s.consecutive_failures),
    lastSuccess: at(s.last_success_at),
    lastFailure: at(s.last_failure_at),
    lastAttempt: at(s.last_attempt_at),
    created: timeInWords(Number(s.created_at)),
    approvedBy: name(s.approved_by),
    // A `webhooks listen` subscription has no proposal: the operator's CLI added it.
    proposalHref: s.proposal_id ? proposalHref(s.proposal_id) : '',
    rotationUntil: previousUntil !== null && previousUntil > now ? timeInWords(previousUntil) : '',
    signingContract: s.signing_contract,
    signingMovedAt: at(s.signing_contract_changed_at),
    signingMovedBy: s.signing_contract_changed_by === null ? '' : s.signing_contract_changed_by === 'operator' ? 'the operator (admin CLI)' : name(s.signing_contract_changed_by),
  };
}

export async function proposalSummary(sql: Sql, p: DbWebhookProposalRow, manage: boolean, name: MemberNamer, now: number) {
  const key = p.proposed_by_key ? await keyNameOf(sql, p.workspace_id, p.proposed_by_key) : undefined;
  const expired = p.status === 'expired' || (p.status === 'pending' && Number(p.expires_at) <= now);
  const state = expired ? 'expired' : p.status;
  return {
    id: p.id,
    href: proposalHref(p.id),
    state,
    destination: destinationFor(p.url, manage),
    event: p.event,
    eventWords: EVENT_WORDS[p.event] ?? p.event,
    types: typesOf(p).map(typeInfo),
    keyName: key?.name ?? '(a deleted key)',
    /** Added on the dashboard by a member (no key). */
    onDashboard: !p.proposed_by_key,
    keyId: p.proposed_by_key,
    keyRevoked: Boolean(key && key.revoked_at !== null),
    actingFor: p.proposed_by_member ? name(p.proposed_by_member) : '',
    proposed: timeInWords(Number(p.created_at)),
    expires: timeInWords(Number(p.expires_at)),
    expiresIn: state === 'pending' ? untilInWords(Number(p.expires_at) - now) : '',
    decidedBy: name(p.decided_by),
    decided: at(p.decided_at),
    webhookId: p.webhook_id ?? '',
  };
}

/** A delivery with its attempts; the status code is shown already, so an error only when it says more. */
export function deliverySummary(d: DbWebhookDeliveryRow, attempts: readonly DbWebhookAttemptRow[]) {
  return {
    id: d.id,
    status: d.status,
    eventId: d.event_id,
    event: d.event_type,
    resourceType: d.resource_type ?? '',
    recordId: d.record_id ?? '',
    created: timeInWords(Number(d.created_at)),
    attempts: Number(d.attempts),
    lastStatus: n(d.last_status_code),
    lastError: d.last_error && d.last_error !== `HTTP ${d.last_status_code}` ? d.last_error : '',
    next: d.status === 'pending' && d.next_attempt_at !== null ? timeInWords(Number(d.next_attempt_at)) : '',
    replayOf: d.replay_of ?? '',
    tries: attempts.map((a) => ({
      attempt: Number(a.attempt),
      started: timeInWords(Number(a.started_at)),
      durationMs: Number(a.duration_ms),
      statusCode: n(a.status_code),
      error: a.error && a.error !== `HTTP ${a.status_code}` ? a.error : '',
      response: a.response_body ? (a.response_body.length > RESPONSE_SHOWN ? `${a.response_body.slice(0, RESPONSE_SHOWN)}…` : a.response_body) : '',
      next: at(a.next_attempt_at),
    })),
  };
}
