/** The signing operations: create (with invitations), read, history, remind, deadline, cancel, documents. */
import type { Sql } from '../../db/database.ts';
import { type AuditActor, recordAudit } from '../../server/audit.ts';
import { mayManageSettings } from '../../server/capabilities.ts';
import { DEFAULT_PAGE_LIMIT, decodeCursor, encodeCursor, positionField } from '../../server/cursor.ts';
import { conflict, forbidden, invalidInput, notFound, ServiceError } from '../../server/errors.ts';
import { newId } from '../../server/ids.ts';
import { takeMailQuota, workspaceLimits } from '../../server/limits.ts';
import { isMailAddress } from '../../server/mailer.ts';
import type { NamespaceHandlers } from '../../server/module.ts';
import type { EffectReport } from '../../server/jobs.ts';
import { answeredAfterEffects, type Input, type OperationContext } from '../../server/operation.ts';
import { filesOf } from './files.ts';
import { prepareBankId } from './bankid/provider.ts';
import { checkFieldPages, checkFieldsMethod, fieldsFromTags } from './request/fieldRules.ts';
import { declareRound, INVITE_JOB, type InviteJobPayload, type SigningRuntime, STILL_SENDING } from './request/invitationMail.ts';
import {
  appendEvent,
  type DbSigningEventRow,
  type DbSigningFieldRow,
  endRecipientAccess,
  type DbSigningRecipientRow,
  type DbSigningRequestRow,
  findMember,
  findRequest,
  insertRecipient,
  insertRequest,
  listEvents,
  listRecipients,
  listRequestsPage,
  fieldsOfRequests,
  storedRequired,
  insertField,
  listFields,
  recipientAsOf,
  recipientsOfRequests,
  type RequestReader,
  signersOf,
  updateRecipient,
  updateRequest,
} from './queries.ts';
import { cancelRequest, expireRequest } from './request/lifecycle.ts';
import { verifySignedDocument } from './verify/verifyDocument.ts';
import { templateHandlers } from './request/templates.ts';

const HOUR = 3_600_000;
const DAY = 86_400_000;
/** A deadline is at least this far ahead (creation and changes). */
export const MIN_DEADLINE_MS = HOUR;
/** ... and at most this far. */
export const MAX_DEADLINE_MS = 120 * DAY;
export const DEFAULT_DEADLINE_MS = 30 * DAY;
/** At most one reminder per recipient this often (signing.RemindSigners). */
export const REMIND_INTERVAL_MS = HOUR;

const SEQ_CURSOR = { s: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER } } as const;
const MISMATCH = 'cursor belongs to the history of another signing request; send the same signing_request_id.';
const TIME_CURSOR = { t: positionField.millis, i: { type: 'string', maxLength: 40 } } as const;
const LIST_MISMATCH = 'cursor belongs to a listing with other filters or another caller; send the same filters and Service-Act-As as for the first page.';

const n = (v: number | null) => (v === null ? null : Number(v));
const iso = (ms: number) => new Date(ms).toISOString();

function recipientView(r: DbSigningRecipientRow) {
  return {
    recipient_id: r.id,
    email: r.email,
    name: r.name,
    role: r.role === 'cc' ? ('cc' as const) : ('signer' as const),
    signing_order: Number(r.signing_order ?? 1),
    status: r.status,
    invitation: r.invitation_status,
    invitation_error: r.invitation_error,
    invited_at: n(r.invited_at),
    last_reminded_at: n(r.last_reminded_at),
    opened_at: n(r.opened_at),
    signed_at: n(r.signed_at),
    declined_at: n(r.declined_at),
    decline_reason: r.decline_reason,
  };
}

/** The answer of the signing operations; `failures` replaces `invitation_failures` (a reminder round's own). */
export function requestView(r: DbSigningRequestRow, recipients: readonly DbSigningRecipientRow[], failures?: readonly string[], fields: readonly DbSigningFieldRow[] = []) {
  return {
    signing_request_id: r.id,
    status: r.status,
    title: r.title,
    message: r.message,
    signature_method: r.signature_method,
    source_file_id: r.source_file_id,
    file_id: r.archive_file_id,
    archive_error: r.archive_error,
    private: Boolean(r.private),
    deadline_at: Number(r.deadline_at),
    reminder_interval_days: n(r.reminder_interval_days),
    created_at: Number(r.created_at),
    completed_at: n(r.completed_at),
    cancelled_at: n(r.cancelled_at),
    cancel_reason: r.cancel_reason,
    expired_at: n(r.expired_at),
    invitation_failures: failures ? [...failures] : recipients.filter((c) => c.invitation_status === 'failed').map((c) => c.email),
    recipients: recipients.map(recipientView),
    sender: { member_id: r.owner_member_id, key_id: r.created_by_key_id?.startsWith('ak_') ? r.created_by_key_id : null },
    fields: fields.map((f) => ({ field_id: f.id, recipient_id: f.recipient_id, kind: f.kind, page: f.page, x: f.x, y: f.y, width: f.width, height: f.height, required: f.required, label: f.label, value: f.value, tag: f.tag ?? null })),
  };
}

function eventView(e: DbSigningEventRow, byId: ReadonlyMap<string, DbSigningRecipientRow>) {
  const r = e.recipient_id ? byId.get(e.recipient_id) : undefined;
  return {
    event_id: e.id,
    kind: e.kind,
    occurred_at: Number(e.occurred_at),
    recipient: r ? { recipient_id: r.id, email: r.email, name: r.name } : null,
    data: JSON.parse(e.data) as Record<string, unknown>,
  };
}

/**
 * What the caller may do with a request: read it, and manage it (remind, deadline, cancel).
 * `memberEmail`: the acted-for member's address when the caller already has it (a listing reads it once).
 */
export async function accessTo(
  ctx: OperationContext,
  request: DbSigningRequestRow,
  recipients: readonly DbSigningRecipientRow[],
  memberEmail?: () => Promise<string | undefined>,
): Promise<{ read: boolean; manage: boolean }> {
  const isPrivate = Boolean(request.private);
  if (!ctx.member) {
    const own = ctx.credential.kind !== 'system' && request.created_by_key_id === ctx.credential.keyId && !isPrivate;
    return { read: own, manage: own };
  }
  const owner = request.owner_member_id === ctx.member.id;
  const admin = !isPrivate && mayManageSettings(ctx.member.role);
  let recipient = false;
  if (!owner && !admin) {
    const email = (await (memberEmail ? memberEmail() : memberAddress(ctx)))?.toLowerCase();
    recipient = email !== undefined && recipients.some((r) => r.email.toLowerCase() === email);
  }
  return { read: owner || admin || recipient, manage: owner || admin };
}

/** The acted-for member's e-mail address (active or not), or undefined. */
async function memberAddress(ctx: OperationContext): Promise<string | undefined> {
  return ctx.member ? (await findMember(ctx.sql, ctx.workspaceId, ctx.member.id))?.email : undefined;
}

/** Who made a change, for the audit log: the member acted for, else the key (or connection) itself. */
function auditActorOf(ctx: OperationContext): AuditActor {
  if (ctx.member) return { type: 'member', id: ctx.member.id, label: ctx.member.name };
  return { type: 'key', id: ctx.credential.keyId, label: ctx.credential.name };
}

/** The request when the caller may read it (and manage it, with `manage`); else 404 (or 403 for a reader who may not manage). */
async function visibleRequest(ctx: OperationContext, id: string, options: { manage?: boolean; lock?: boolean } = {}) {
  const request = await findRequest(ctx.sql, ctx.workspaceId, id, options.lock);
  const recipients = request ? await listRecipients(ctx.sql, request.id) : [];
  const access = request ? await accessTo(ctx, request, recipients) : { read: false, manage: false };
  if (!request || !access.read) throw notFound(`No signing request ${id} is visible to this credential.`);
  if (options.manage && !access.manage) {
    throw forbidden(`Only the sender of signing request ${id} (or an owner or admin of the workspace) may change it; you can read it as a recipient.`);
  }
  // A request expires at its deadline, not when the expiry job comes by: a command on it expires it first
  // (so it answers as for an expired request), a read shows it expired.
  if (options.lock && request.status === 'pending' && Number(request.deadline_at) <= ctx.now) {
    await expireRequest(ctx.sql, request.id, ctx.now);
    return { request: (await findRequest(ctx.sql, ctx.workspaceId, id, true))!, recipients, fields: await listFields(ctx.sql, request.id) };
  }
  return { request: asOf(request, ctx.now), recipients, fields: await listFields(ctx.sql, request.id) };
}

/** The request as it stands at `now`: a pending request past its deadline is expired (since the deadline) even before the expiry job has written it. */
export function asOf(r: DbSigningRequestRow, now: number): DbSigningRequestRow {
  return r.status === 'pending' && Number(r.deadline_at) <= now ? { ...r, status: 'expired', expired_at: Number(r.deadline_at) } : r;
}

function checkDeadline(deadline: number, now: number, field = 'deadline_at'): void {
  if (deadline < now + MIN_DEADLINE_MS) throw invalidInput(`${field} must be at least 1 hour from now (at or after ${iso(now + MIN_DEADLINE_MS)}).`);
  if (deadline > now + MAX_DEADLINE_MS) throw invalidInput(`${field} must be at most 120 days from now (at or before ${iso(now + MAX_DEADLINE_MS)}).`);
}

const blank = (s: string) => s.trim() === '';

/**
 * Takes `n` mails of the workspace's hourly and daily mail budgets (server/limits.ts) before any is
 * sent; past either, 429 with Retry-After and nothing done (the command's transaction rolls back).
 */
async function spendMail(ctx: OperationContext, n: number): Promise<void> {
  const over = await takeMailQuota(ctx.sql, ctx.workspaceId, n, ctx.now);
  if (over) throw new ServiceError(429, 'rate_limited', `${over.message} Nothing was sent or changed.`, { 'Retry-After': String(over.retryAfterS) });
}

/** The recipients whose mail of this command was declared, and of those the ones still in flight when the command stopped waiting. */
function roundOf(effects: readonly EffectReport[]): { mailed: Set<string>; inFlight: Set<string> } {
  const mailed = new Set<string>();
  const inFlight = new Set<string>();
  for (const e of effects) {
    if (e.kind !== INVITE_JOB) continue;
    const id = (e.payload as InviteJobPayload).recipientId;
    mailed.add(id);
    if (!e.settled) inFlight.add(id);
  }
  return { mailed, inFlight };
}

/** The request as it stands after a mail round: a recipient whose mail is still in flight says so. */
async function afterRound(ctx: OperationContext, id: string, effects: readonly EffectReport[]) {
  const { request, recipients, fields } = await reread(ctx.sql, ctx.workspaceId, id);
  const { mailed, inFlight } = roundOf(effects);
  const shown = recipients.map((r) => (inFlight.has(r.id) && r.invitation_status === 'queued' && r.invitation_error === null ? { ...r, invitation_error: STILL_SENDING } : r));
  return { request, recipients: shown, mailed, fields };
}

async function reread(sql: Sql, workspaceId: string, id: string) {
  const request = (await findRequest(sql, workspaceId, id))!;
  return { request, recipients: await listRecipients(sql, id), fields: await listFields(sql, id) };
}

/**
 * Makes a signing request (signing.RequestFileSignatures, and signing.SendTemplate with the template's
 * file and roles filled in): checks, the request and its recipients, the first step's invitations
 * declared for after the commit.
 */
export async function makeRequest(deps: SigningRuntime, input: Input<'signing.RequestFileSignatures'>, ctx: OperationContext) {
  const seen = new Map<string, number>();
  input.signers.forEach((s, i) => {
    if (!isMailAddress(s.email)) throw invalidInput(`signers[${i}].email is not an e-mail address (one address such as ana@example.com, no display name).`);
    if (blank(s.name)) throw invalidInput(`signers[${i}].name is blank.`);
    const key = s.email.toLowerCase();
    const first = seen.get(key);
    if (first !== undefined) throw invalidInput(`signers[${i}].email repeats signers[${first}].email (addresses are compared without case); list each signer once.`);
    seen.set(key, i);
  });
  const cc = input.cc ?? [];
  cc.forEach((c, i) => {
    if (!isMailAddress(c.email)) throw invalidInput(`cc[${i}].email is not an e-mail address (one address such as ana@example.com, no display name).`);
    if (c.name !== undefined && blank(c.name)) throw invalidInput(`cc[${i}].name is blank.`);
    const key = c.email.toLowerCase();
    const first = seen.get(key);
    if (first !== undefined) throw invalidInput(`cc[${i}].email repeats ${first < input.signers.length ? `signers[${first}]` : `cc[${first - input.signers.length}]`}.email (addresses are compared without case); list each person once.`);
    seen.set(key, input.signers.length + i);
  });
  if (input.title !== undefined && blank(input.title)) throw invalidInput('title is blank.');
  const deadline = input.deadline_at ?? ctx.now + DEFAULT_DEADLINE_MS;
  if (input.deadline_at !== undefined) checkDeadline(input.deadline_at, ctx.now);
  const explicit = input.fields ?? [];
  explicit.forEach((f, i) => {
    if (f.signer >= input.signers.length) throw invalidInput(`fields[${i}].signer is ${f.signer}, but there ${input.signers.length === 1 ? 'is 1 signer' : `are ${input.signers.length} signers`} (counted from 0).`);
    if (f.label !== undefined && blank(f.label)) throw invalidInput(`fields[${i}].label is blank.`);
  });
  checkFieldsMethod(explicit.length, input.signature_method);
  const limits = await workspaceLimits(ctx.sql, ctx.workspaceId);
  if (input.signers.length + cc.length > limits.recipients_per_request) {
    throw invalidInput(`signers and cc: ${input.signers.length + cc.length} recipients; this workspace allows at most ${limits.recipients_per_request} per request.`);
  }
  const memberId = ctx.member?.id ?? null;
  const file = await filesOf(deps).find(ctx.sql, ctx.workspaceId, input.file_id);
  const missing = () => notFound(`No file ${input.file_id} is visible to this credential (a workspace file, or your own private file when acting for its owner).`);
  if (!file || !filesOf(deps).visibleTo(file, memberId)) throw missing();
  // No `fields` given: the document's own text tags place them.
  const tagged = fieldsFromTags(file.textTags, input.fields !== undefined, input.signature_method, input.signers.length, { owner: 'request', slot: 'signer' });
  const placed: Array<(typeof explicit)[number] & { tag?: string }> = input.fields ?? tagged;
  checkFieldPages(placed, file.pageCount);
  // Every signer's invitation and every CC's completed copy, taken up front.
  await spendMail(ctx, input.signers.length + cc.length);
  // The original stays as long as the request: the documents retention never removes a kept file.
  if (!(await filesOf(deps).keep(ctx.sql, ctx.workspaceId, file.id))) throw missing();

  const id = newId('sr');
  const method = input.signature_method ?? 'standard';
  const request: DbSigningRequestRow = {
    id,
    workspace_id: ctx.workspaceId,
    title: (input.title ?? (file.filename.replace(/\.pdf$/i, '') || file.filename)).slice(0, 200),
    message: input.message ? input.message : null,
    signature_method: method,
    status: 'pending',
    source_file_id: file.id,
    source_sha256: file.sha256,
    private: file.ownerMemberId !== null,
    owner_member_id: memberId,
    // A member's own session (the Documents pages) ends in hours: the request is the member's alone, judged by the member later on.
    created_by_key_id: ctx.credential.kind === 'system' || ctx.credential.kind === 'session' ? null : ctx.credential.keyId,
    deadline_at: deadline,
    reminder_interval_days: input.reminder_interval_days ?? null,
    created_at: ctx.now,
    updated_at: ctx.now,
    completed_at: null,
    cancelled_at: null,
    cancel_reason: null,
    expired_at: null,
    archive_file_id: null,
    archive_sha256: null,
    archive_error: null,
  };
  await insertRequest(ctx.sql, request);
  if (method === 'bankid') {
    await prepareBankId(ctx.sql, deps.settings, { workspaceId: ctx.workspaceId, requestId: id, now: ctx.now });
  }
  // Signing order: the lowest number is invited now, each next one once everyone before it has signed.
  const first = Math.min(...input.signers.map((s) => s.order ?? 1));
  const recipients: DbSigningRecipientRow[] = input.signers.map((s, position) => ({
    id: newId('rcp'),
    request_id: id,
    position,
    signing_order: s.order ?? 1,
    email: s.email,
    name: s.name,
    role: 'signer' as const,
    status: 'pending',
    invitation_status: (s.order ?? 1) === first ? 'queued' : 'waiting',
    invitation_error: null,
    invitation_attempts: 0,
    invited_at: null,
    last_reminded_at: null,
    auto_reminders: 0,
    opened_at: null,
    signed_at: null,
    declined_at: null,
    decline_reason: null,
    typed_name: null,
    ip: null,
    user_agent: null,
    provider_evidence: null,
  }));
  // CC recipients after the signers: never invited to sign, mailed the completed copy.
  const ccRows: DbSigningRecipientRow[] = cc.map((c, i) => ({
    ...recipients[0]!,
    id: newId('rcp'),
    position: recipients.length + i,
    signing_order: 1,
    role: 'cc' as const,
    email: c.email,
    name: c.name ?? c.email,
    status: 'pending' as const,
    invitation_status: 'none' as const,
  }));
  for (const r of [...recipients, ...ccRows]) await insertRecipient(ctx.sql, r);
  for (const [position, f] of placed.entries()) {
    await insertField(ctx.sql, {
      id: newId('fld'), request_id: id, recipient_id: recipients[f.signer]!.id, kind: f.kind, page: f.page, x: f.x, y: f.y, width: f.width, height: f.height, position,
      required: storedRequired(f.kind, f.required),
      label: f.label?.trim() || null,
      value: null,
      tag: f.tag ?? null,
    });
  }
  await appendEvent(ctx.sql, {
    requestId: id,
    workspaceId: ctx.workspaceId,
    kind: 'request.created',
    data: { title: request.title, signature_method: method, signers: recipients.length, deadline_at: deadline, private: Boolean(request.private), ...(first !== Math.max(...recipients.map((r) => r.signing_order)) ? { in_order: true } : {}), ...(ccRows.length ? { cc: ccRows.length } : {}) },
    at: ctx.now,
  });
  await declareRound(ctx.sql, ctx.jobs, recipients.filter((r) => r.invitation_status === 'queued'), { reminder: false, automatic: false, message: request.message }, ctx.now);
  const after = await reread(ctx.sql, ctx.workspaceId, id);
  return requestView(after.request, after.recipients, undefined, after.fields);
}

/** The operations, made once per process from the module's dependencies (the mailer, the bankid settings). */
export const signingHandlers = (deps: SigningRuntime): NamespaceHandlers<'signing'> => {
  const templates = templateHandlers(deps, (input, ctx) => makeRequest(deps, input, ctx));
  return {
    'signing.CreateTemplate': templates.create,
    'signing.ListTemplates': templates.list,
    'signing.DeleteTemplate': templates.remove,
    'signing.SendTemplate': answeredAfterEffects<'signing.SendTemplate'>({
      answer: async (_input, ctx, stored, effects) => {
        const after = await afterRound(ctx, stored.signing_request_id, effects);
        return requestView(after.request, after.recipients, undefined, after.fields);
      },
      run: async (input, ctx) => makeRequest(deps, await templates.requestOf(input, ctx), ctx),
    }),

    'signing.VerifySignedDocument': verifySignedDocument(filesOf(deps)),
    'signing.RequestFileSignatures': answeredAfterEffects<'signing.RequestFileSignatures'>({
      // The invitations are declared in the transaction and sent right after it commits; the answer reports their first attempt.
      answer: async (_input, ctx, stored, effects) => {
        const after = await afterRound(ctx, stored.signing_request_id, effects);
        return requestView(after.request, after.recipients, undefined, after.fields);
      },
      run: (input, ctx) => makeRequest(deps, input, ctx),
    }),

    'signing.ListSigningRequests': async (input, ctx) => {
      const limit = input.limit ?? DEFAULT_PAGE_LIMIT;
      const status = input.status ?? null;
      const search = input.search?.trim() || null;
      const narrow = { search, sentBy: input.sent_by ?? null, recipient: input.recipient ?? null, createdFrom: input.created_from ?? null, createdTo: input.created_to ?? null };
      const filters = [ctx.workspaceId, status, ctx.credential.keyId, ctx.member?.id ?? null, narrow.search, narrow.sentBy, narrow.recipient, narrow.createdFrom, narrow.createdTo];
      let after = input.cursor ? await decodeCursor(ctx, input.cursor, TIME_CURSOR, filters, LIST_MISMATCH) : null;
      if (ctx.credential.kind === 'system') return { items: [], has_more: false, next_cursor: null };
      const email = ctx.member ? await memberAddress(ctx) : undefined;
      const reader: RequestReader = ctx.member
        ? { kind: 'member', memberId: ctx.member.id, admin: mayManageSettings(ctx.member.role), email: email ?? null }
        : { kind: 'key', keyId: ctx.credential.keyId };
      // SQL narrows to the requests the caller may see; accessTo (the rule every other operation uses) decides each one.
      const visible: Array<ReturnType<typeof requestView>> = [];
      const positions: Array<{ t: number; i: string }> = [];
      for (;;) {
        const batch = limit + 1 - visible.length;
        const rows = await listRequestsPage(ctx.sql, ctx.workspaceId, reader, { status, after, now: ctx.now, ...narrow }, batch);
        const recipients = await recipientsOfRequests(ctx.sql, rows.map((r) => r.id));
        const fields = await fieldsOfRequests(ctx.sql, rows.map((r) => r.id));
        for (const row of rows) {
          const rs = recipients.get(row.id) ?? [];
          if ((await accessTo(ctx, row, rs, async () => email)).read) {
            visible.push(requestView(asOf(row, ctx.now), rs, undefined, fields.get(row.id) ?? []));
            positions.push({ t: Number(row.created_at), i: row.id });
          }
        }
        const last = rows.at(-1);
        if (rows.length < batch || !last || visible.length > limit) break;
        after = { t: Number(last.created_at), i: last.id };
      }
      const more = visible.length > limit;
      return {
        items: visible.slice(0, limit),
        has_more: more,
        next_cursor: more ? await encodeCursor(ctx, TIME_CURSOR, positions[limit - 1]!, filters) : null,
      };
    },

    'signing.GetSigningRequest': async (input, ctx) => {
      const { request, recipients, fields } = await visibleRequest(ctx, input.signing_request_id);
      return requestView(request, recipients, undefined, fields);
    },

    'signing.ListSigningEvents': async (input, ctx) => {
      const { request, recipients } = await visibleRequest(ctx, input.signing_request_id);
      const limit = input.limit ?? DEFAULT_PAGE_LIMIT;
      const filters = [ctx.workspaceId, request.id];
      const after = input.cursor ? (await decodeCursor(ctx, input.cursor, SEQ_CURSOR, filters, MISMATCH)).s : 0;
      const rows = await listEvents(ctx.sql, request.id, after, limit + 1);
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      const more = rows.length > limit && last !== undefined;
      const byId = new Map(recipients.map((r) => [r.id, r]));
      // An event before a replacement names the recipient as they were then (recipient.replaced keeps it).
      const asOf = recipientAsOf(await ctx.sql.all<{ seq: number; kind: string; recipient_id: string | null; data: string }>(`SELECT seq, kind, recipient_id, data FROM signing_events WHERE request_id = ? AND kind = 'recipient.replaced' ORDER BY seq`, [request.id]));
      return {
        items: page.map((e) => {
          const who = e.recipient_id ? byId.get(e.recipient_id) : undefined;
          return eventView(e, who ? new Map([[who.id, asOf(who.id, Number(e.seq), who)]]) : byId);
        }),
        has_more: more,
        next_cursor: more ? await encodeCursor(ctx, SEQ_CURSOR, { s: last.seq }, filters) : null,
      };
    },

    'signing.RemindSigners': answeredAfterEffects<'signing.RemindSigners'>({
      // invitation_failures: this round's recipients whose reminder the mail server refused for good.
      answer: async (_input, ctx, stored, effects) => {
        const after = await afterRound(ctx, stored.signing_request_id, effects);
        const failures = after.recipients.filter((r) => after.mailed.has(r.id) && r.invitation_status === 'failed').map((r) => r.email);
        return requestView(after.request, after.recipients, failures, after.fields);
      },
      run: async (input, ctx) => {
        const { request, recipients } = await visibleRequest(ctx, input.signing_request_id, { manage: true, lock: true });
        if (request.status !== 'pending') throw conflict(`Signing request ${request.id} is ${request.status}; only a pending request can be reminded.`);
        if (ctx.now >= Number(request.deadline_at)) throw conflict(`The deadline of signing request ${request.id} has passed (${iso(Number(request.deadline_at))}); extend it first.`);
        const left = signersOf(recipients).filter((r) => r.status === 'pending' || r.status === 'opened');
        if (!left.length) throw conflict(`No recipient of signing request ${request.id} is left to sign.`);
        // Recipients of a later step of the signing order are not invited yet: nothing to remind them of.
        const open = left.filter((r) => r.invitation_status !== 'waiting');
        const lastMail = (r: DbSigningRecipientRow) => (r.invitation_status === 'sent' ? Math.max(Number(r.invited_at ?? 0), Number(r.last_reminded_at ?? 0)) : null);
        // A mail declared and not tried yet (queued, no attempt) is going out right now: not mailed twice.
        const sending = (r: DbSigningRecipientRow) => r.invitation_status === 'queued' && Number(r.invitation_attempts) === 0;
        const due = open.filter((r) => {
          const at = lastMail(r);
          return !sending(r) && (at === null || at <= ctx.now - REMIND_INTERVAL_MS);
        });
        if (!due.length) {
          const mailed = open.map(lastMail).filter((at): at is number => at !== null);
          if (!mailed.length) throw conflict(`The mails to the recipients left to sign of ${request.id} are being sent right now; ask again in a moment.`);
          const next = Math.min(...mailed.map((at) => at + REMIND_INTERVAL_MS));
          throw conflict(`Every recipient left to sign of ${request.id} was mailed less than an hour ago or is being mailed now; the next reminder is possible at ${iso(next)}.`);
        }
        const message = input.message ? input.message : request.message;
        await spendMail(ctx, due.length);
        await declareRound(ctx.sql, ctx.jobs, due, { reminder: true, automatic: false, message }, ctx.now);
        const after = await reread(ctx.sql, ctx.workspaceId, request.id);
        return requestView(after.request, after.recipients, [], after.fields);
      },
    }),

    'signing.ReplaceRecipient': answeredAfterEffects<'signing.ReplaceRecipient'>({
      answer: async (_input, ctx, stored, effects) => {
        const after = await afterRound(ctx, stored.signing_request_id, effects);
        const failures = after.recipients.filter((r) => after.mailed.has(r.id) && r.invitation_status === 'failed').map((r) => r.email);
        return requestView(after.request, after.recipients, failures, after.fields);
      },
      run: async (input, ctx) => {
        const { request, recipients, fields } = await visibleRequest(ctx, input.signing_request_id, { manage: true, lock: true });
        if (request.status !== 'pending') throw conflict(`Signing request ${request.id} is ${request.status}; only a pending request's recipients can be replaced.`);
        const recipient = recipients.find((r) => r.id === input.recipient_id);
        if (!recipient) throw notFound(`Signing request ${request.id} has no recipient ${input.recipient_id}.`);
        if (recipient.status === 'signed' || recipient.status === 'declined') throw conflict(`${recipient.name} already ${recipient.status} signing request ${request.id}; only a recipient who has not signed or declined can be replaced.`);
        if (!isMailAddress(input.email)) throw invalidInput('email is not an e-mail address (one address such as ana@example.com, no display name).');
        if (input.name !== undefined && blank(input.name)) throw invalidInput('name is blank.');
        const taken = recipients.find((r) => r.id !== recipient.id && r.email.toLowerCase() === input.email.toLowerCase());
        if (taken) throw invalidInput(`email is already the address of another recipient of this request (${taken.id}); list each signer once.`);
        const name = input.name ?? recipient.name;
        if (input.email === recipient.email && name === recipient.name) return requestView(request, recipients, [], fields);
        const invited = recipient.invitation_status !== 'waiting' && recipient.invitation_status !== 'none';
        if (invited) await spendMail(ctx, 1);
        await endRecipientAccess(ctx.sql, recipient.id);
        await updateRecipient(ctx.sql, recipient.id, {
          email: input.email,
          name,
          status: 'pending',
          opened_at: null,
          invited_at: invited ? null : recipient.invited_at,
          last_reminded_at: null,
          auto_reminders: 0,
        });
        await appendEvent(ctx.sql, {
          requestId: request.id,
          workspaceId: ctx.workspaceId,
          kind: 'recipient.replaced',
          recipientId: recipient.id,
          data: { previous_email: recipient.email, previous_name: recipient.name },
          at: ctx.now,
        });
        await recordAudit(ctx.sql, {
          workspaceId: ctx.workspaceId,
          actor: auditActorOf(ctx),
          action: 'signing.recipient_replaced',
          subject: { type: 'signing_request', id: request.id, label: request.title },
          details: { recipient_id: recipient.id, previous_email: recipient.email, email: input.email, ...(name !== recipient.name ? { previous_name: recipient.name, name } : {}) },
          at: ctx.now,
        });
        if (invited) {
          const fresh = (await listRecipients(ctx.sql, request.id)).find((r) => r.id === recipient.id)!;
          await declareRound(ctx.sql, ctx.jobs, [fresh], { reminder: false, automatic: false, message: request.message }, ctx.now);
        }
        const after = await reread(ctx.sql, ctx.workspaceId, request.id);
        return requestView(after.request, after.recipients, [], after.fields);
      },
    }),

    'signing.UpdateSigningDeadline': async (input, ctx) => {
      const { request } = await visibleRequest(ctx, input.signing_request_id, { manage: true, lock: true });
      if (request.status !== 'pending') throw conflict(`Signing request ${request.id} is ${request.status}; only a pending request's deadline can change.`);
      checkDeadline(input.deadline_at, ctx.now);
      if (input.deadline_at !== Number(request.deadline_at)) {
        await updateRequest(ctx.sql, request.id, { deadline_at: input.deadline_at }, ctx.now);
        await appendEvent(ctx.sql, {
          requestId: request.id,
          workspaceId: request.workspace_id,
          kind: 'deadline.changed',
          data: { previous_deadline_at: Number(request.deadline_at), deadline_at: input.deadline_at },
          at: ctx.now,
        });
      }
      const after = await reread(ctx.sql, ctx.workspaceId, request.id);
      return requestView(after.request, after.recipients, undefined, after.fields);
    },

    'signing.CancelSigningRequest': async (input, ctx) => {
      const { request } = await visibleRequest(ctx, input.signing_request_id, { manage: true, lock: true });
      if (request.status === 'completed') throw conflict(`A completed request cannot be cancelled: every recipient of ${request.id} has signed, and it stays completed.`);
      if (request.status !== 'pending') throw conflict(`Signing request ${request.id} is already ${request.status}.`);
      await cancelRequest(ctx.sql, request, input.reason ? input.reason : null, ctx.now);
      const after = await reread(ctx.sql, ctx.workspaceId, request.id);
      return requestView(after.request, after.recipients, undefined, after.fields);
    },

    'signing.GetSigningDocument': async (input, ctx) => {
      const { request } = await visibleRequest(ctx, input.signing_request_id);
      const fileId = input.version === 'original' ? request.source_file_id : request.archive_file_id;
      if (!fileId) {
        throw conflict(
          request.status === 'completed'
            ? `The signed archive of ${request.id} is still being prepared; ask again in a moment.`
            : `Signing request ${request.id} is ${request.status}: there is a signed document only once every recipient has signed.`,
        );
      }
      const file = await filesOf(deps).find(ctx.sql, ctx.workspaceId, fileId);
      if (!file) throw notFound(`The ${input.version} document of signing request ${request.id} is not available.`);
      // The URL works only while this caller still may ask for it (checked at use by the /files/ route).
      const grant = { operation: 'signing.GetSigningDocument', credentialId: ctx.credential.kind === 'system' ? null : ctx.credential.keyId, memberId: ctx.member?.id ?? null, role: ctx.member?.role ?? null };
      const filename = filesOf(deps).downloadName(file.filename);
      const link = await filesOf(deps).downloadUrl(ctx.sql, ctx.config.publicUrl, file, ctx.now, { filename, grant });
      return { signing_request_id: request.id, version: input.version, url: link.url, filename, expires_at: link.expiresAt, sha256: file.sha256, size: file.size };
    },
  };
};
