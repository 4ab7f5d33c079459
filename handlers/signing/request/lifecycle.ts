/**
 * A signing request's state moves, in one place: the signer's page calls `recordOpened`,
 * `recordSigned` and `recordDeclined`; the operations cancel; the expiry job expires. Each runs in
 * the caller's transaction, locks the request's row first (so two last signers, or a signature and a
 * cancel, are serial) and writes the history event and the sender's inbox notice with the change.
 */
import type { Sql } from '../../../db/database.ts';
import { notify, type Notice } from '../../../server/inbox.ts';
import type { JobQueue } from '../../../server/jobs.ts';
import { type EndedReason, endedReason } from '../signer/links.ts';
import { enqueueDeclinedMails } from './declinedMail.ts';
import { declareRound } from './invitationMail.ts';
import {
  appendEvent,
  type DbSigningRecipientRow,
  type DbSigningRequestRow,
  findRecipient,
  findRequestById,
  keyCreator,
  listRecipients,
  setFieldValues,
  signersOf,
  updateRecipient,
  updateRequest,
} from '../queries.ts';

/** The job that builds and seals the archive of a completed request (handlers/signing/archive/archiveJob.ts), keyed by the request id. */
export const ARCHIVE_JOB = 'signing.archive';

/** The payload of a `signing.archive` job. */
export interface ArchiveJobPayload {
  readonly requestId: string;
  readonly workspaceId: string;
}

/** What a signer's action answered: done, or refused because the link has ended (the page says why). */
export type SignerOutcome<T = object> = ({ readonly ok: true } & T) | { readonly ok: false; readonly reason: EndedReason | 'unknown' };

const utc = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace(/:\d\d\.\d+Z$/, ' UTC');

/** The request's page on the Documents pages (handlers/signing/sender/): where a notice's "Open" goes. */
export const requestPagePath = (requestId: string) => `/documents/requests/${requestId}`;

/**
 * Writes a notice to the sender's inbox: the member the request was sent for; else the member who
 * created the key (if still active); else the workspace's owners and admins. A private request's
 * notice goes to its owner only.
 */
export async function noticeSender(sql: Sql, request: DbSigningRequestRow, notice: Notice, now: number): Promise<string[]> {
  const ws = request.workspace_id;
  if (request.owner_member_id) {
    const got = await notify(sql, ws, { members: [request.owner_member_id] }, notice, now);
    if (got.length || request.private) return got;
  }
  if (request.created_by_key_id) {
    const creator = await keyCreator(sql, request.created_by_key_id);
    if (creator) {
      const got = await notify(sql, ws, { members: [creator] }, notice, now);
      if (got.length) return got;
    }
  }
  return notify(sql, ws, { ownersAndAdmins: true }, notice, now);
}

/** The request and this recipient, the request's row locked; null when either is gone. */
async function lockedPair(sql: Sql, recipientId: string): Promise<{ request: DbSigningRequestRow; recipient: DbSigningRecipientRow; all: DbSigningRecipientRow[] } | null> {
  const first = await findRecipient(sql, recipientId);
  if (!first) return null;
  const request = await findRequestById(sql, first.request_id, true);
  if (!request) return null;
  const all = await listRecipients(sql, request.id);
  const recipient = all.find((r) => r.id === recipientId);
  return recipient ? { request, recipient, all } : null;
}

/** Whether the recipient may still act now; the reason when not. */
function refusal(pair: { request: DbSigningRequestRow; recipient: DbSigningRecipientRow; all: DbSigningRecipientRow[] }, now: number): EndedReason | null {
  return endedReason(pair.request, pair.recipient, now, pair.all.some((r) => r.status === 'declined'));
}

/**
 * The recipient pressed "Continue" on the link's first page: records `opened` once (event
 * `recipient.opened`); a second call changes nothing. Refused when the link has ended.
 */
export async function recordOpened(sql: Sql, input: { recipientId: string; now: number }): Promise<SignerOutcome<{ readonly first: boolean }>> {
  const pair = await lockedPair(sql, input.recipientId);
  if (!pair) return { ok: false, reason: 'unknown' };
  const reason = refusal(pair, input.now);
  if (reason) return { ok: false, reason };
  if (pair.recipient.status !== 'pending') return { ok: true, first: false };
  await updateRecipient(sql, pair.recipient.id, { status: 'opened', opened_at: input.now }, ['pending']);
  await appendEvent(sql, { requestId: pair.request.id, workspaceId: pair.request.workspace_id, kind: 'recipient.opened', recipientId: pair.recipient.id, at: input.now });
  return { ok: true, first: true };
}

export interface SignInput {
  readonly recipientId: string;
  /** The name the signer typed (standard), or the name the provider vouched for (bankid). */
  readonly typedName: string;
  /** The signer's address (req.ip, TRUST_PROXY aware) and user agent: kept as evidence, never in the history. */
  readonly ip: string | null;
  readonly userAgent: string | null;
  /** bankid: the provider's evidence as JSON. */
  readonly providerEvidence?: string | null;
  /** What the signer gave in their text and check box fields, by field id. */
  readonly fieldValues?: ReadonlyMap<string, string>;
  /** The signature the signer drew (signer/drawnSignature.ts, checked), or null. */
  readonly drawnSignature?: string | null;
  readonly now: number;
}

/**
 * The recipient signed: records it (`recipient.signed`); when every recipient has signed, the request
 * is `completed` (`request.completed`), the archive job `signing.archive` is enqueued with key = the
 * request id in the same transaction, and the sender gets an inbox notice. Refused when the link has
 * ended (already signed, declined, cancelled, expired, completed). The caller commits and then calls
 * `jobs.committed(sql)` so the archive starts at once.
 */
export async function recordSigned(sql: Sql, deps: { readonly jobs: JobQueue }, input: SignInput): Promise<SignerOutcome<{ readonly completed: boolean; readonly request: DbSigningRequestRow }>> {
  const pair = await lockedPair(sql, input.recipientId);
  if (!pair) return { ok: false, reason: 'unknown' };
  const reason = refusal(pair, input.now);
  if (reason) return { ok: false, reason };
  const { request, recipient } = pair;
  await updateRecipient(
    sql,
    recipient.id,
    {
      status: 'signed',
      signed_at: input.now,
      opened_at: recipient.opened_at ?? input.now,
      typed_name: input.typedName.slice(0, 200),
      ip: input.ip ? input.ip.slice(0, 64) : null,
      user_agent: input.userAgent ? input.userAgent.slice(0, 1000) : null,
      provider_evidence: input.providerEvidence ?? null,
      drawn_signature: input.drawnSignature ?? null,
    },
    ['pending', 'opened'],
  );
  if (input.fieldValues?.size) await setFieldValues(sql, input.fieldValues);
  await appendEvent(sql, { requestId: request.id, workspaceId: request.workspace_id, kind: 'recipient.signed', recipientId: recipient.id, data: { signature_method: request.signature_method }, at: input.now });
  const signers = signersOf(pair.all);
  const unsigned = signers.filter((r) => r.id !== recipient.id && r.status !== 'signed');
  if (unsigned.length > 0) {
    // Signing order: once no one of an earlier step is left, the next step's recipients are invited (mailed after commit).
    const step = Math.min(...unsigned.map((r) => Number(r.signing_order ?? 1)));
    const next = unsigned.filter((r) => Number(r.signing_order ?? 1) === step && r.invitation_status === 'waiting');
    if (next.length) await declareRound(sql, deps.jobs, next, { reminder: false, automatic: false, message: request.message }, input.now);
    return { ok: true, completed: false, request };
  }
  await updateRequest(sql, request.id, { status: 'completed', completed_at: input.now }, input.now);
  await appendEvent(sql, { requestId: request.id, workspaceId: request.workspace_id, kind: 'request.completed', data: { signers: signers.length }, at: input.now });
  const payload: ArchiveJobPayload = { requestId: request.id, workspaceId: request.workspace_id };
  await deps.jobs.enqueue(sql, ARCHIVE_JOB, payload, { key: request.id });
  await noticeSender(
    sql,
    request,
    {
      kind: 'signing.completed',
      title: `Signed by everyone: ${request.title}`,
      body: `All ${signers.length} signer${signers.length === 1 ? '' : 's'} signed "${request.title}" (${request.id}). The signed archive is being prepared: the request's page offers it for download once it is ready (signing.GetSigningDocument with version "signed" returns it once file_id is set).`,
      link: requestPagePath(request.id),
      sourceId: request.id,
    },
    input.now,
  );
  return { ok: true, completed: true, request: { ...request, status: 'completed', completed_at: input.now, updated_at: input.now } };
}

/**
 * The recipient declined, with a reason: records it (`recipient.declined`), and the request ends
 * `cancelled` with cancel reason `declined by <name>` (`request.cancelled`): every link dies and the
 * sender gets an inbox notice; the other recipients and the sender get a mail (declinedMail.ts, jobs
 * declared in this transaction). Refused when the link has ended.
 */
export async function recordDeclined(sql: Sql, input: { recipientId: string; reason: string; now: number }, jobs: Pick<JobQueue, 'enqueue'>): Promise<SignerOutcome> {
  const pair = await lockedPair(sql, input.recipientId);
  if (!pair) return { ok: false, reason: 'unknown' };
  const ended = refusal(pair, input.now);
  if (ended) return { ok: false, reason: ended };
  const { request, recipient } = pair;
  const reason = input.reason.trim().slice(0, 1000);
  await updateRecipient(sql, recipient.id, { status: 'declined', declined_at: input.now, decline_reason: reason || null, opened_at: recipient.opened_at ?? input.now }, ['pending', 'opened']);
  await appendEvent(sql, { requestId: request.id, workspaceId: request.workspace_id, kind: 'recipient.declined', recipientId: recipient.id, data: { reason: reason || null }, at: input.now });
  const cancelReason = `declined by ${recipient.name}`.slice(0, 500);
  await updateRequest(sql, request.id, { status: 'cancelled', cancelled_at: input.now, cancel_reason: cancelReason }, input.now);
  await appendEvent(sql, { requestId: request.id, workspaceId: request.workspace_id, kind: 'request.cancelled', data: { reason: cancelReason, declined: true }, at: input.now });
  await noticeSender(
    sql,
    request,
    {
      kind: 'signing.declined',
      title: `Declined: ${request.title}`,
      body: `${recipient.name} (${recipient.email}) declined to sign "${request.title}" (${request.id})${reason ? `: "${reason}"` : ' without giving a reason'}. The request is cancelled and its links no longer work; to ask again, create a new request.`,
      link: requestPagePath(request.id),
      sourceId: request.id,
    },
    input.now,
  );
  // The other parties are told by mail, after commit (request/declinedMail.ts).
  await enqueueDeclinedMails(sql, jobs, request, recipient);
  return { ok: true };
}

/** Cancels a pending request (the caller checked it is pending and locked it): links die at once. */
export async function cancelRequest(sql: Sql, request: DbSigningRequestRow, reason: string | null, now: number): Promise<void> {
  await updateRequest(sql, request.id, { status: 'cancelled', cancelled_at: now, cancel_reason: reason }, now);
  await appendEvent(sql, { requestId: request.id, workspaceId: request.workspace_id, kind: 'request.cancelled', data: { reason, declined: false }, at: now });
}

/** Expires a pending request past its deadline (the expiry job): links die, the sender is told. Returns false when it was no longer due. */
export async function expireRequest(sql: Sql, requestId: string, now: number): Promise<boolean> {
  const request = await findRequestById(sql, requestId, true);
  if (!request || request.status !== 'pending' || Number(request.deadline_at) > now) return false;
  const recipients = signersOf(await listRecipients(sql, request.id));
  const signed = recipients.filter((r) => r.status === 'signed').length;
  // It expired at its deadline, whenever this runs (the job, or a command that found it past due).
  const at = Number(request.deadline_at);
  await updateRequest(sql, request.id, { status: 'expired', expired_at: at }, now);
  await appendEvent(sql, { requestId: request.id, workspaceId: request.workspace_id, kind: 'request.expired', data: { deadline_at: at, signed, signers: recipients.length }, at });
  await noticeSender(
    sql,
    request,
    {
      kind: 'signing.expired',
      title: `Expired: ${request.title}`,
      body: `The deadline of "${request.title}" (${request.id}) passed at ${utc(Number(request.deadline_at))} with ${signed} of ${recipients.length} signed. Its links no longer work; to ask again, create a new request.`,
      link: requestPagePath(request.id),
      sourceId: request.id,
    },
    now,
  );
  return true;
}
