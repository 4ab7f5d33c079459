/**
 * The sender's pages (the Documents entry of the bar): a member uploads a PDF, sends it for signing,
 * follows each request and acts on it, in the browser, on the same operations as the API.
 *
 * - `GET /documents`: the requests the member may read (seed 4.8: what they sent or must sign; owners
 *   and admins also every request of the workspace that is not private), newest first, with status
 *   chips, filters (state, who, dates) and search by title or signer: `signing.ListSigningRequests`
 *   with exactly the filters the API takes. Paged by its cursor.
 * - `GET /documents/new`: drag and drop (or choose) a PDF; the browser uploads it in parts through
 *   the documents operations with the member's session (send.js: resumable, with progress), then the
 *   form sends it (`POST /documents/send`: `signing.RequestFileSignatures`).
 * - `GET /documents/requests/<id>`: the request, each recipient's timeline, its history
 *   (`signing.ListSigningEvents`), downloads of the original and the signed archive, the verification
 *   page; for its sender (or an owner or admin, when it is not private): remind, change the deadline,
 *   cancel after a confirmation page.
 *
 * Every read and change goes through `callAsMember` (server/pages/calls.ts): the one execution path,
 * with the member's own access, so a page can do nothing the API refuses. Forms are CSRF-protected
 * (`pages.protectForm`) and carry an idempotency key, so a double click acts once; each post answers
 * 303 back to a page (post/redirect/get) with its outcome held for one view.
 */
import fs from 'node:fs';
import express, { type Request, type Response } from 'express';
import { listWorkspaceMembers } from '../../../db/queries/credentials.ts';
import type { ModuleDeps } from '../../../server/module.ts';
import type { MemberPage } from '../../../server/pages.ts';
import type { NavEntry } from '../../../server/pages.ts';
import { callAsMember, formKey, IDEMPOTENCY_FIELD, newFormKey, type PageCallResult } from '../../../server/pages/calls.ts';
import { timeInWords, untilInWords } from '../../../server/pages/format.ts';
import type { components } from '../../../generated/openapi.ts';
import { providerOf } from '../bankid/provider.ts';
import { filesOf } from '../files.ts';
import type { SigningSettings } from '../settings.ts';
import { FIELD_KIND_WORDS, keyNames } from '../queries.ts';
import { DEFAULT_DEADLINE_MS, MAX_DEADLINE_MS, MIN_DEADLINE_MS } from '../handlers.ts';
import { dayMs, field, type Held, minuteMs, sentence, toMinute } from './pageParts.ts';
import { templateRoutes } from './templatePages.ts';

type SigningRequest = components['schemas']['SigningRequest'];
type SigningEvent = components['schemas']['SigningEvent'];

export const DOCUMENTS_PATH = '/documents';
const NEW_PATH = '/documents/new';
const SEND_JS_PATH = '/documents/assets/send.js';
const SEND_JS = fs.readFileSync(new URL('./send.js', import.meta.url));
const FIELDS_JS_PATH = '/documents/assets/fields.js';
const FIELDS_JS = fs.readFileSync(new URL('./fields.js', import.meta.url));
/** The fields the send form carries (the field editor's JSON), at most this long. */
const FIELDS_MAX_CHARS = 64_000;
const REQUEST_ID = /^sr_[0-9a-z]{1,37}$/;
const MEMBER_ID = /^mb_[0-9a-z]{1,37}$/;
/** Signer rows the form offers (the operation takes up to 10). */
const MAX_SIGNERS = 10;
/** History events shown on a request's page (one page of the listing). */
const HISTORY_LIMIT = 100;

export const senderNavigation: NavEntry[] = [{ label: 'Documents', path: DOCUMENTS_PATH, order: 15 }];
export const SENDER_CSS = new URL('./sender.css', import.meta.url);

const signerCount = (r: SigningRequest) => r.recipients.filter((c) => c.role !== 'cc').length;


/** A request's page. */
export const requestPath = (id: string) => `${DOCUMENTS_PATH}/requests/${id}`;

const STATUS_WORDS: Record<string, string> = { pending: 'Waiting for signatures', completed: 'Completed', cancelled: 'Cancelled', expired: 'Expired' };
const RECIPIENT_WORDS: Record<string, string> = { pending: 'Not opened yet', opened: 'Opened', signed: 'Signed', declined: 'Declined' };
const EVENT_WORDS: Record<string, string> = {
  'request.created': 'Request created',
  'invitation.sent': 'Invitation sent',
  'invitation.failed': 'Invitation failed',
  'reminder.sent': 'Reminder sent',
  'reminders.stopped': 'Automatic reminders stopped',
  'recipient.opened': 'Opened',
  'recipient.signed': 'Signed',
  'recipient.declined': 'Declined',
  'recipient.replaced': 'Signer given another address',
  'deadline.changed': 'Deadline changed',
  'request.cancelled': 'Cancelled',
  'request.expired': 'Expired',
  'request.completed': 'Signed by everyone',
  'archive.completed': 'Signed archive ready',
  'archive.failed': 'Signed archive failed',
};

export function senderRoutes(deps: ModuleDeps<SigningSettings>): express.Router {
  const { db, clock, pages, logger } = deps;
  const execute = deps.operations.execute;
  const router = pages.router();
  const views = pages.views(new URL('./pages', import.meta.url));
  const bankid = providerOf(deps.settings) !== null;
  const call = <T>(page: MemberPage, id: string, input: unknown, key?: string): Promise<PageCallResult<T>> => callAsMember<T>(execute, page, id, input, key);

  /** Member and key names of the workspace, for "sent by". */
  async function names(workspaceId: string) {
    const [members, keys] = await Promise.all([listWorkspaceMembers(db.sql, workspaceId), keyNames(db.sql, workspaceId)]);
    const member = new Map(members.map((m) => [m.id, m.name]));
    const key = new Map(keys.map((k) => [k.id, k]));
    return {
      members: members.filter((m) => m.disabled_at === null),
      sender(r: SigningRequest): string {
        const viaKey = r.sender.key_id ? key.get(r.sender.key_id) : undefined;
        if (r.sender.member_id) return (member.get(r.sender.member_id) ?? r.sender.member_id) + (viaKey ? ` (through the key ${viaKey.name})` : '');
        if (viaKey) return `the key ${viaKey.name}` + (viaKey.created_by ? `, created by ${member.get(viaKey.created_by) ?? viaKey.created_by}` : ', made by the operator');
        return 'the service';
      },
    };
  }

  /** Whether the member may change the request (the operations decide; this only hides forms that would be refused). */
  const mayManage = (page: MemberPage, r: SigningRequest) => r.sender.member_id === page.member.id || (page.manage && !r.private);

  /** The request's fields as its page lists them: what, for whom, where, and what the signer gave. */
  function fieldRows(r: SigningRequest) {
    const byId = new Map(r.recipients.map((c) => [c.recipient_id, c]));
    return r.fields.map((f) => {
      const c = byId.get(f.recipient_id);
      const signed = c?.status === 'signed';
      const given =
        f.kind === 'checkbox' ? (f.value === null ? '' : f.value === 'true' ? 'Ticked' : 'Not ticked')
        : f.kind === 'text' ? (f.value === null ? '' : f.value || '(left empty)')
        : signed ? 'Filled by the signature' : '';
      return {
        what: f.label ? `${FIELD_KIND_WORDS[f.kind]}: ${f.label}` : FIELD_KIND_WORDS[f.kind],
        who: c?.name ?? '',
        page: f.page,
        optional: !f.required,
        tag: f.tag ?? '',
        value: given || (r.status === 'pending' ? 'Not filled yet' : '—'),
        filled: given !== '',
      };
    });
  }

  /** A recipient's state in words: CC recipients get a copy, later steps wait for their turn. */
  const recipientState = (c: SigningRequest['recipients'][number]) =>
    c.role === 'cc' ? { status: 'cc', words: 'Gets a copy' } : c.invitation === 'waiting' ? { status: 'waiting', words: 'Waiting for their turn' } : { status: c.status, words: RECIPIENT_WORDS[c.status] ?? c.status };

  function summary(r: SigningRequest, now: number) {
    const signers = r.recipients.filter((c) => c.role !== 'cc');
    const signed = signers.filter((c) => c.status === 'signed').length;
    return {
      id: r.signing_request_id,
      title: r.title,
      status: r.status,
      statusWords: STATUS_WORDS[r.status] ?? r.status,
      signed,
      total: signers.length,
      recipients: r.recipients.map((c) => ({ name: c.name, email: c.email, ...recipientState(c) })),
      created: timeInWords(r.created_at),
      due: r.status === 'pending' ? `due ${untilInWords(r.deadline_at - now)} (${timeInWords(r.deadline_at)})` : '',
      failures: r.invitation_failures,
      private: r.private,
    };
  }

  router.get(SEND_JS_PATH, (_req: Request, res: Response) => {
    res.setHeader('Cache-Control', 'no-cache');
    res.type('text/javascript; charset=utf-8').send(SEND_JS);
  });
  router.get(FIELDS_JS_PATH, (_req: Request, res: Response) => {
    res.setHeader('Cache-Control', 'no-cache');
    res.type('text/javascript; charset=utf-8').send(FIELDS_JS);
  });

  router.get(DOCUMENTS_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const q = req.query as Record<string, unknown>;
    const one = (name: string) => (typeof q[name] === 'string' ? (q[name] as string) : '');
    const status = ['pending', 'completed', 'cancelled', 'expired'].includes(one('status')) ? one('status') : '';
    const search = one('q').trim().slice(0, 200);
    const who = one('who');
    const from = one('from');
    const to = one('to');
    const input: Record<string, unknown> = { limit: 25 };
    if (status) input.status = status;
    if (search) input.search = search;
    if (who === 'mine') input.sent_by = page.member.id;
    else if (who === 'tome') input.recipient = (await db.sql.one<{ email: string }>(`SELECT email FROM members WHERE id = ?`, [page.member.id]))?.email;
    else if (MEMBER_ID.test(who)) input.sent_by = who;
    const fromMs = dayMs(from, false);
    const toMs = dayMs(to, true);
    if (fromMs !== null) input.created_from = fromMs;
    if (toMs !== null) input.created_to = toMs;
    if (one('cursor')) input.cursor = one('cursor');
    const listed = await call<{ items: SigningRequest[]; has_more: boolean; next_cursor: string | null }>(page, 'signing.ListSigningRequests', input);
    const who_ = await names(page.workspaceId);
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries({ status, q: search, who, from, to })) if (v) params.set(k, v);
    const filtered = params.size > 0;
    const next = listed.ok && listed.body.next_cursor ? `${DOCUMENTS_PATH}?${new URLSearchParams([...params, ['cursor', listed.body.next_cursor]])}` : '';
    const held = ((await page.take()) ?? {}) as Held;
    await page.send(listed.ok ? 200 : listed.status === 400 ? 400 : listed.status, {
      title: 'Documents',
      html: views.render('documents', {
        flash: held.flash ?? '',
        problem: listed.ok ? (held.problem ?? '') : sentence(listed.message),
        items: listed.ok ? listed.body.items.map((r) => ({ ...summary(r, clock.now()), sender: who_.sender(r) })) : [],
        filters: { status, q: search, who, from, to },
        filtered,
        firstPage: !one('cursor'),
        next,
        members: page.manage ? who_.members.map((m) => ({ id: m.id, name: m.name })) : [],
        statuses: Object.entries(STATUS_WORDS).map(([value, label]) => ({ value, label })),
      }),
    });
  });

  /** The send page, with what a refused post kept. */
  async function sendPage(page: MemberPage, status: number, kept: { problem?: string; fileId?: string; filename?: string; title?: string; message?: string; signers?: Array<{ name: string; email: string }>; deadline?: string; method?: string; private?: boolean; inOrder?: boolean; cc?: string; fields?: string } = {}) {
    const signers = kept.signers?.length ? kept.signers : [{ name: '', email: '' }];
    await page.send(status, {
      title: 'Send a document for signing',
      scripts: [SEND_JS_PATH, FIELDS_JS_PATH],
      html: views.render('new', {
        csrf: page.csrf,
        idem: newFormKey(),
        idemField: IDEMPOTENCY_FIELD,
        problem: kept.problem ?? '',
        fileId: kept.fileId ?? '',
        filename: kept.filename ?? '',
        title: kept.title ?? '',
        message: kept.message ?? '',
        signers,
        maxSigners: MAX_SIGNERS,
        deadline: kept.deadline ?? toMinute(clock.now() + DEFAULT_DEADLINE_MS),
        deadlineMin: toMinute(clock.now() + MIN_DEADLINE_MS + 60_000),
        deadlineMax: toMinute(clock.now() + MAX_DEADLINE_MS),
        bankid,
        method: kept.method ?? 'standard',
        private: kept.private ?? false,
        inOrder: kept.inOrder ?? false,
        cc: kept.cc ?? '',
        fields: kept.fields ?? '',
      }),
    });
  }

  router.get(NEW_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    await sendPage(page, 200);
  });

  router.post('/documents/send', pages.protectForm, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const body = (req.body ?? {}) as Record<string, unknown>;
    const list = (name: string) => {
      const v = body[name];
      return (Array.isArray(v) ? v : v === undefined ? [] : [v]).map((x) => (typeof x === 'string' ? x : '')).slice(0, MAX_SIGNERS + 1);
    };
    const names_ = list('signer_name');
    const emails = list('signer_email');
    const signers = names_.map((name, i) => ({ name: name.trim(), email: (emails[i] ?? '').trim() })).filter((s) => s.name || s.email);
    const kept = {
      fileId: field(body, 'file_id'),
      filename: field(body, 'filename').slice(0, 255),
      title: field(body, 'title').trim(),
      message: field(body, 'message'),
      signers,
      deadline: field(body, 'deadline'),
      method: field(body, 'signature_method') === 'bankid' ? 'bankid' : 'standard',
      private: field(body, 'private') === 'on',
      inOrder: field(body, 'in_order') === 'on',
      cc: field(body, 'cc').slice(0, 4000),
      fields: field(body, 'fields'),
    };
    const refuse = (problem: string) => sendPage(page, 400, { ...kept, problem });
    if (!kept.fileId) return refuse('Choose a PDF and wait until it is uploaded, then send.');
    if (!signers.length) return refuse('Add at least one signer: a name and an e-mail address.');
    if (signers.length > MAX_SIGNERS) return refuse(`A request has at most ${MAX_SIGNERS} signers.`);
    const missing = signers.findIndex((s) => !s.name || !s.email);
    if (missing >= 0) return refuse(`Signer ${missing + 1} needs both a name and an e-mail address.`);
    // Privacy is the file's, fixed when it was uploaded: a box changed afterwards must not be ignored silently.
    const file = await filesOf(deps).find(db.sql, page.workspaceId, kept.fileId);
    if (file && (file.ownerMemberId !== null) !== kept.private) {
      return sendPage(page, 400, { ...kept, fileId: '', filename: '', problem: `The file was uploaded as ${file.ownerMemberId !== null ? 'private' : 'a workspace file'}, but the Private box now says otherwise. Choose the file again to upload it with this setting.` });
    }
    const deadline = kept.deadline ? minuteMs(kept.deadline) : null;
    if (kept.deadline && deadline === null) return refuse('The deadline is not a date and time (YYYY-MM-DD HH:MM, UTC).');
    const cc = kept.cc.split(/[,;\s]+/).map((a) => a.trim()).filter(Boolean);
    if (cc.length > MAX_SIGNERS) return refuse(`Copy to at most ${MAX_SIGNERS} addresses.`);
    // The field editor's fields, as the operation takes them (it checks each one).
    let placed: unknown[] = [];
    if (kept.fields.trim()) {
      // Never sent without the fields the sender placed: what cannot be read is refused, not dropped.
      let parsed: unknown = null;
      try {
        parsed = kept.fields.length <= FIELDS_MAX_CHARS ? JSON.parse(kept.fields) : null;
      } catch {
        parsed = null;
      }
      if (!Array.isArray(parsed) || !parsed.every((f) => f !== null && typeof f === 'object' && !Array.isArray(f))) {
        return sendPage(page, 400, { ...kept, fields: '', problem: 'The placed fields could not be read. Place them again (or send without fields).' });
      }
      placed = parsed;
      const orphan = placed.findIndex((f) => typeof (f as { signer?: unknown }).signer === 'number' && (f as { signer: number }).signer >= signers.length);
      if (orphan >= 0) return refuse(`A field is placed for signer ${(placed[orphan] as { signer: number }).signer + 1}, but the request has ${signers.length} signer${signers.length === 1 ? '' : 's'}: give the field to another signer or remove it.`);
    }
    // "One after another": each signer is a step of the signing order, in the order listed.
    const input: Record<string, unknown> = { file_id: kept.fileId, signers: kept.inOrder ? signers.map((x, i) => ({ ...x, order: i + 1 })) : signers, signature_method: kept.method };
    if (cc.length) input.cc = cc.map((email) => ({ email }));
    if (placed.length) input.fields = placed;
    if (kept.title) input.title = kept.title;
    if (kept.message.trim()) input.message = kept.message;
    if (deadline !== null) input.deadline_at = deadline;
    const made = await call<SigningRequest>(page, 'signing.RequestFileSignatures', input, formKey(body));
    if (!made.ok) return refuse(sentence(made.message));
    const r = made.body;
    logger.info({ workspace_id: page.workspaceId, signing_request_id: r.signing_request_id }, 'signing request sent from the Documents page');
    const failed = r.invitation_failures;
    await page.hold(requestPath(r.signing_request_id), {
      flash: `Sent "${r.title}" to ${signerCount(r)} signer${signerCount(r) === 1 ? '' : 's'}${r.recipients.length > signerCount(r) ? `; ${r.recipients.length - signerCount(r)} more get the signed copy` : ''}.`,
      ...(failed.length ? { problem: `The invitation to ${failed.join(', ')} could not be delivered. Check the address, or use Remind once the problem is fixed.` } : {}),
    } satisfies Held);
    res.redirect(303, requestPath(r.signing_request_id));
  });

  /** The request of a page's path, read as the member; null after a 404 (or other refusal) page. */
  async function readRequest(page: MemberPage, id: string): Promise<SigningRequest | null> {
    if (!REQUEST_ID.test(id)) {
      await page.notice(404, 'No such request', ['There is no signing request at this address that you may see.']);
      return null;
    }
    const got = await call<SigningRequest>(page, 'signing.GetSigningRequest', { signing_request_id: id });
    if (!got.ok) {
      await page.notice(got.status === 404 ? 404 : got.status, got.status === 404 ? 'No such request' : 'Not available', [
        got.status === 404 ? 'There is no signing request at this address that you may see.' : sentence(got.message),
      ]);
      return null;
    }
    return got.body;
  }

  router.get('/documents/requests/:id', async (req: Request<{ id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const r = await readRequest(page, req.params.id);
    if (!r) return;
    const now = clock.now();
    const history = await call<{ items: SigningEvent[]; has_more: boolean }>(page, 'signing.ListSigningEvents', { signing_request_id: r.signing_request_id, limit: HISTORY_LIMIT });
    const who = await names(page.workspaceId);
    const held = ((await page.take()) ?? {}) as Held;
    const manage = mayManage(page, r) && r.status === 'pending';
    const pendingCount = r.recipients.filter((c) => c.role !== 'cc' && c.invitation !== 'waiting' && (c.status === 'pending' || c.status === 'opened')).length;
    await page.send(200, {
      title: r.title,
      html: views.render('request', {
        csrf: page.csrf,
        idem: newFormKey(),
        idemField: IDEMPOTENCY_FIELD,
        flash: held.flash ?? '',
        problem: held.problem ?? '',
        r: { ...summary(r, now), sender: who.sender(r), message: r.message ?? '', method: r.signature_method === 'bankid' ? 'BankID' : 'Typed name', deadline: timeInWords(r.deadline_at), deadlineValue: toMinute(r.deadline_at) },
        endedWhy:
          r.status === 'cancelled' ? (r.cancel_reason ? `Cancelled ${timeInWords(r.cancelled_at ?? now)}: ${r.cancel_reason}` : `Cancelled ${timeInWords(r.cancelled_at ?? now)}.`)
          : r.status === 'expired' ? `Expired ${timeInWords(r.expired_at ?? r.deadline_at)}, before everyone signed.`
          : r.status === 'completed' ? `Completed ${timeInWords(r.completed_at ?? now)}.` : '',
        fields: fieldRows(r),
        archive: r.status !== 'completed' ? 'none' : r.file_id ? 'ready' : r.archive_error ? 'failed' : 'preparing',
        archiveError: r.archive_error ?? '',
        inOrder: new Set(r.recipients.filter((c) => c.role !== 'cc').map((c) => c.signing_order)).size > 1,
        recipients: r.recipients.map((c) => ({
          id: c.recipient_id,
          replaceable: manage && (c.status === 'pending' || c.status === 'opened'),
          name: c.name,
          email: c.email,
          order: c.signing_order,
          cc: c.role === 'cc',
          ...recipientState(c),
          steps: [
            c.role === 'cc' ? { what: 'Gets the signed copy once everyone has signed; does not sign', at: '', bad: false } : null,
            c.invitation === 'waiting' && r.status === 'pending' ? { what: 'Invited once everyone of the earlier steps has signed', at: '', bad: false } : null,
            c.invited_at !== null ? { what: c.invitation === 'failed' ? 'Invitation failed' : 'Invited', at: timeInWords(c.invited_at), bad: c.invitation === 'failed' } : null,
            c.invitation === 'failed' && c.invitation_error ? { what: c.invitation_error, at: '', bad: true } : null,
            c.last_reminded_at !== null ? { what: 'Last reminded', at: timeInWords(c.last_reminded_at), bad: false } : null,
            c.opened_at !== null ? { what: 'Opened', at: timeInWords(c.opened_at), bad: false } : null,
            c.signed_at !== null ? { what: 'Signed', at: timeInWords(c.signed_at), bad: false } : null,
            c.declined_at !== null ? { what: c.decline_reason ? `Declined: “${c.decline_reason}”` : 'Declined', at: timeInWords(c.declined_at), bad: true } : null,
          ].filter((s) => s !== null),
        })),
        history: history.ok
          ? history.body.items.map((e) => ({ what: EVENT_WORDS[e.kind] ?? e.kind, who: e.recipient ? e.recipient.name : '', at: timeInWords(e.occurred_at) }))
          : [],
        historyMore: history.ok && history.body.has_more,
        manage,
        // The sender (or an owner or admin) may keep the request's document and roles as a template.
        canTemplate: mayManage(page, r),
        pendingCount,
        deadlineMin: toMinute(now + MIN_DEADLINE_MS + 60_000),
        deadlineMax: toMinute(now + MAX_DEADLINE_MS),
      }),
    });
  });

  /** One action on a request: reads it, runs the operation as the member, holds the outcome, back to the page. */
  const action = (work: (page: MemberPage, r: SigningRequest, body: Record<string, unknown>) => Promise<Held>) =>
    async (req: Request<{ id: string }>, res: Response) => {
      const page = await pages.member(req, res);
      if (!page) return;
      const r = await readRequest(page, req.params.id);
      if (!r) return;
      const outcome = await work(page, r, (req.body ?? {}) as Record<string, unknown>);
      await page.hold(requestPath(r.signing_request_id), outcome);
      res.redirect(303, requestPath(r.signing_request_id));
    };

  router.post('/documents/requests/:id/remind', pages.protectForm, action(async (page, r, body) => {
    const done = await call<SigningRequest>(page, 'signing.RemindSigners', { signing_request_id: r.signing_request_id }, formKey(body));
    if (!done.ok) return { problem: sentence(done.message) };
    const failed = done.body.invitation_failures;
    return failed.length ? { flash: 'Reminders sent.', problem: `The reminder to ${failed.join(', ')} could not be delivered.` } : { flash: 'Reminders sent to everyone who has not signed yet.' };
  }));

  router.post('/documents/requests/:id/deadline', pages.protectForm, action(async (page, r, body) => {
    const at = minuteMs(field(body, 'deadline'));
    if (at === null) return { problem: 'The new deadline is not a date and time (YYYY-MM-DD HH:MM, UTC).' };
    const done = await call<SigningRequest>(page, 'signing.UpdateSigningDeadline', { signing_request_id: r.signing_request_id, deadline_at: at }, formKey(body));
    return done.ok ? { flash: `The deadline is now ${timeInWords(done.body.deadline_at)}.` } : { problem: sentence(done.message) };
  }));

  router.post('/documents/requests/:id/replace', pages.protectForm, action(async (page, r, body) => {
    const recipientId = field(body, 'recipient_id');
    const email = field(body, 'email').trim();
    const name = field(body, 'name').trim();
    if (!email) return { problem: 'Give the new e-mail address.' };
    const done = await call<SigningRequest>(page, 'signing.ReplaceRecipient', { signing_request_id: r.signing_request_id, recipient_id: recipientId, email, ...(name ? { name } : {}) }, formKey(body));
    if (!done.ok) return { problem: sentence(done.message) };
    const now = done.body.recipients.find((c) => c.recipient_id === recipientId);
    if (done.body.invitation_failures.length) return { flash: 'Changed the address.', problem: `The invitation to ${done.body.invitation_failures.join(', ')} could not be delivered.` };
    return { flash: now ? `${now.name} now signs at ${now.email}${now.invitation === 'waiting' ? ' (invited when their step comes)' : ': a new invitation went out, and the old links no longer work'}.` : 'Changed the address.' };
  }));

  templateRoutes(router, { deps, call, views, action, mayManage });

  router.get('/documents/requests/:id/cancel', async (req: Request<{ id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const r = await readRequest(page, req.params.id);
    if (!r) return;
    if (r.status !== 'pending' || !mayManage(page, r)) {
      await page.notice(409, 'This request cannot be cancelled', [r.status !== 'pending' ? `It is ${STATUS_WORDS[r.status]?.toLowerCase() ?? r.status} already.` : 'Only its sender, or an owner or admin, may cancel it.']);
      return;
    }
    await page.send(200, {
      title: `Cancel ${r.title}?`,
      html: views.render('cancel', { csrf: page.csrf, idem: newFormKey(), idemField: IDEMPOTENCY_FIELD, id: r.signing_request_id, title: r.title, pending: r.recipients.filter((c) => c.role !== 'cc' && c.status !== 'signed').length }),
    });
  });

  router.post('/documents/requests/:id/cancel', pages.protectForm, action(async (page, r, body) => {
    if (field(body, 'confirm') !== 'yes') return { problem: 'Nothing was cancelled: confirm on the cancel page first.' };
    const reason = field(body, 'reason').trim().slice(0, 500);
    const done = await call<SigningRequest>(page, 'signing.CancelSigningRequest', { signing_request_id: r.signing_request_id, ...(reason ? { reason } : {}) }, formKey(body));
    return done.ok ? { flash: 'The request is cancelled: its links no longer work.' } : { problem: sentence(done.message) };
  }));

  router.get('/documents/requests/:id/download/:version', async (req: Request<{ id: string; version: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const version = req.params.version;
    if (version !== 'original' && version !== 'signed') return page.notice(404, 'No such download', ['Download the original or the signed document.']);
    if (!REQUEST_ID.test(req.params.id)) return page.notice(404, 'No such request', ['There is no signing request at this address that you may see.']);
    const got = await call<{ url: string }>(page, 'signing.GetSigningDocument', { signing_request_id: req.params.id, version });
    if (!got.ok) return page.notice(got.status, got.status === 404 ? 'Not available' : 'Not ready', [sentence(got.message)]);
    // The link is a secret for this member: sent only as this redirect, never shown on a page or logged.
    // The URL names the service's public origin; the browser is on this service already (a proxy may name it otherwise).
    const url = new URL(got.body.url);
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.redirect(303, `${url.pathname}${url.search}`);
  });

  return router;
}
