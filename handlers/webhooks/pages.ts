/**
 * The webhook pages of a signed-in member (owners and admins act; other members read):
 *
 * - `GET /settings/webhooks/proposals/:id` (the `approval_url` of webhooks.PrepareWebhook): the
 *   destination, the event, the data the subscription carries (each type's fields, read from the API
 *   document), who proposed it and when it expires; Approve and Reject forms.
 * - `POST .../approve`: approves, then answers (200, never a redirect) the one page that shows the
 *   signing secret, with how to verify signatures. `POST .../reject`: 303 back with a notice.
 * - `GET /settings/webhooks`: the workspace's subscriptions and pending proposals.
 * - `GET /settings/webhooks/:id`: one subscription and its deliveries, newest first, paged with
 *   `?before=<created_at>.<delivery id>` (optionally `?status=`), each with its attempts.
 * - `POST /settings/webhooks/:id/disable | enable | rotate`: enable sends a signed test delivery first
 *   and enables only when it succeeds; rotate shows the new secret once (the old one signs beside it
 *   for 24 h). `GET /settings/webhooks/:id/delete` asks for confirmation (a required checkbox), and
 *   `POST /settings/webhooks/:id/delete` deletes.
 *
 * Secrets: only the approve and rotate answers carry one (no-store, like every page); nothing here
 * logs, and errors thrown here never carry a secret. Destinations can hold tokens in their path, so
 * members who are not owners or admins see only their origin.
 */
import express, { type Request, type Response } from 'express';
import { listWorkspaceMembers } from '../../db/queries/credentials.ts';
import { unreadCount } from '../../db/queries/inbox.ts';
import type { MemberRole } from '../../db/rows.ts';
import { catalogue } from '../../generated/catalogue.ts';
import { document } from '../../generated/document.ts';
import type { Credential, MemberInfo } from '../../server/credentials.ts';
import type { ModuleDeps } from '../../server/module.ts';
import { roleAllows } from '../../server/roles.ts';
import {
  attemptsOfDeliveries,
  type DbWebhookAttemptRow,
  type DbWebhookDeliveryRow,
  type DbWebhookProposalRow,
  type DbWebhookSubscriptionRow,
  findProposal,
  findSubscription,
  keyNameOf,
  listDeliveries,
  listPendingProposals,
  listSubscriptions,
  type WebhookEventName,
} from './queries.ts';
import {
  deleteSubscription,
  disableSubscription,
  enableSubscription,
  approveProposal,
  rejectProposal,
  rotateSecret,
  ROTATION_GRACE_MS,
  WebhookActionError,
} from './subscriptions.ts';

/** Deliveries per page of a subscription's page. */
export const DELIVERIES_PER_PAGE = 20;
const MAX_SUBSCRIPTIONS = 2000;
const PROPOSAL_ID = /^whp_[0-9a-z]{1,40}$/;
const WEBHOOK_ID = /^wh_[0-9a-z]{1,40}$/;
const POSITION = /^(\d{1,16})\.([a-z]{1,8}_[0-9a-z]{1,40})$/;
const STATUSES = ['pending', 'delivering', 'succeeded', 'failed'] as const;
const RESPONSE_SHOWN = 300;

const DONE: Record<string, string> = {
  disabled: 'is disabled: no new events are delivered to it.',
  enabled: 'is enabled again: the test delivery succeeded, the failure count is cleared, and events from now on are delivered.',
  deleted: 'The subscription and its delivery history are deleted.',
  rejected: 'The proposal is rejected: nothing will be delivered.',
};

const EVENT_WORDS: Record<WebhookEventName, string> = {
  'resource.created': 'when a record of these types is created',
  'resource.updated': 'when a record of these types is changed (each delivery names the changed fields)',
  'resource.deleted': 'when a record of these types is deleted',
  'meeting.completed': 'when a meeting is completed (legacy event: the meeting id only)',
};

const timeInWords = (ms: number) => `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
const n = (v: number | string | null) => (v === null ? null : Number(v));

function inHours(ms: number): string {
  if (ms <= 0) return 'now';
  const hours = ms / 3_600_000;
  if (hours >= 1) return `in ${Math.floor(hours)} h${hours % 1 >= 1 / 60 ? ` ${Math.floor((hours % 1) * 60)} min` : ''}`;
  return `in ${Math.max(1, Math.floor(ms / 60_000))} min`;
}

// ---- What a subscription carries: each type's fields, from the API document ------------------------

interface Schema {
  $ref?: string;
  allOf?: Schema[];
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  readOnly?: boolean;
  content?: Record<string, { schema?: Schema }>;
}
type Paths = Record<string, Record<string, { operationId?: string; responses?: Record<string, Schema> }>>;
const doc = document as unknown as { paths: Paths; components: { schemas: Record<string, Schema> } };

const deref = (s: Schema | undefined): Schema | undefined => (s?.$ref ? doc.components.schemas[s.$ref.split('/').at(-1)!] : s);

/** A description as text and `code` segments (the document writes Markdown backticks). */
export type TextPart = { text: string; code: boolean };

function firstSentence(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim().replace(/^Read-only: /, '');
  const m = /^(.+?[.!?])(\s|$)/.exec(flat);
  const first = m ? m[1]! : flat;
  return first.charAt(0).toUpperCase() + first.slice(1);
}

function parts(text: string): TextPart[] {
  return text.split(/(`[^`]+`)/).filter(Boolean).map((p) => (p.startsWith('`') && p.endsWith('`') ? { text: p.slice(1, -1), code: true } : { text: p, code: false }));
}

export interface FieldInfo {
  name: string;
  description: TextPart[];
  required: boolean;
  readOnly: boolean;
}

export interface TypeInfo {
  type: string;
  schema: string;
  fields: FieldInfo[];
}

const typeInfos = new Map<string, TypeInfo>();

/**
 * The record fields of a resource type: the `data` schema of the `item` of its Get operation's 200
 * answer (the catalogue names the operation, the document has the schema).
 */
export function typeInfo(type: string): TypeInfo {
  const known = typeInfos.get(type);
  if (known) return known;
  const entry = catalogue.find((e) => e.resource === type && e.kind === 'query' && e.name.startsWith('Get'));
  const op = entry ? doc.paths[entry.path]?.[entry.method] : undefined;
  const answer = deref(op?.responses?.['200']);
  const itemRef = answer?.content?.['application/json']?.schema;
  const record = deref(deref(itemRef)?.properties?.item);
  const dataRef = record?.properties?.data;
  const data = deref(dataRef);
  const schemaName = dataRef?.$ref?.split('/').at(-1) ?? '';
  const fields = Object.entries(data?.properties ?? {}).map(([name, s]): FieldInfo => {
    const own = s.description ?? s.allOf?.map((a) => a.description ?? deref(a)?.description).find(Boolean) ?? deref(s)?.description ?? '';
    const readOnly = Boolean(s.readOnly ?? deref(s)?.readOnly ?? s.allOf?.some((a) => deref(a)?.readOnly));
    return { name, description: parts(firstSentence(own)), required: (data?.required ?? []).includes(name), readOnly };
  });
  const info = { type, schema: schemaName, fields };
  typeInfos.set(type, info);
  return info;
}

// ---- Positions -------------------------------------------------------------------------------------

/** `?before=<created_at>.<delivery id>`: absent (null), valid, or 'invalid'. */
export function parseDeliveryPosition(value: unknown): { t: number; i: string; text: string } | null | 'invalid' {
  if (value === undefined || value === '') return null;
  if (typeof value !== 'string') return 'invalid';
  const m = POSITION.exec(value);
  if (!m) return 'invalid';
  const t = Number(m[1]);
  return Number.isSafeInteger(t) ? { t, i: m[2]!, text: value } : 'invalid';
}

// ---- Routes ----------------------------------------------------------------------------------------

type IdParams = { id: string };
const mayManage = (member: MemberInfo) => member.role === 'owner' || member.role === 'admin';
const subscriptionHref = (id: string) => `/settings/webhooks/${encodeURIComponent(id)}`;
const proposalHref = (id: string) => `/settings/webhooks/proposals/${encodeURIComponent(id)}`;
const typesOf = (row: { resource_types: string }) => JSON.parse(row.resource_types) as string[];

/** What a person may see of a destination: all of it for owners and admins, else its origin. */
function destinationFor(url: string, manage: boolean): { text: string; hidden: boolean } {
  if (manage) return { text: url, hidden: false };
  try {
    return { text: `${new URL(url).origin}/…`, hidden: true };
  } catch {
    return { text: '…', hidden: true };
  }
}

export function webhookRoutes(deps: ModuleDeps): express.Router {
  const { db, clock, config, pages } = deps;
  const views = pages.views(new URL('./pages/', import.meta.url));
  const router = pages.router();

  async function memberNamer(workspaceId: string): Promise<(id: string | null) => string> {
    const names = new Map((await listWorkspaceMembers(db.sql, workspaceId)).map((m) => [m.id, m.name]));
    return (id) => (id === null ? '' : (names.get(id) ?? id));
  }

  /** The top bar of every page of this module (navigation, unread count, sign-out). */
  async function chrome(req: Request, res: Response, member: MemberInfo) {
    return { member: member.name, role: member.role, unread: await unreadCount(db.sql, member.id), csrf: pages.csrfToken(req, res), section: 'webhooks' };
  }

  /** A member who is not an owner or admin sees a subscription only when their role reads all its types (as the API does for keys). */
  const visibleTo = (member: MemberInfo, row: { resource_types: string }) => mayManage(member) || typesOf(row).every((t) => roleAllows(member.role as MemberRole, t, 'read'));

  const noProposal = (res: Response, id: string) =>
    pages.notice(res, 404, 'No such proposal', [`This workspace has no webhook proposal ${id}. It may belong to another workspace, or it was decided or expired more than 30 days ago.`]);
  const noSubscription = (res: Response, id: string) =>
    pages.notice(res, 404, 'No such webhook', [`This workspace has no webhook subscription ${id}. It may have been deleted.`]);
  const notAllowed = (res: Response, member: MemberInfo, what: string) =>
    pages.notice(res, 403, 'Not allowed', [`Only owners and admins may ${what}; you are signed in as ${member.name} (${member.role}).`]);

  function reasonInWords(reason: string | null, name: (id: string) => string): string {
    return (reason ?? '').replace(/\bmember (\S+)/g, (_m, id: string) => name(id));
  }

  function subscriptionSummary(s: DbWebhookSubscriptionRow, manage: boolean, name: (id: string) => string, now: number) {
    const previousUntil = n(s.previous_secret_until);
    return {
      id: s.id,
      href: subscriptionHref(s.id),
      destination: destinationFor(s.url, manage),
      event: s.event,
      eventWords: EVENT_WORDS[s.event] ?? s.event,
      types: typesOf(s),
      enabled: Boolean(s.enabled),
      disabledAt: s.disabled_at === null ? '' : timeInWords(Number(s.disabled_at)),
      disabledReason: reasonInWords(s.disabled_reason, name),
      failures: Number(s.consecutive_failures),
      lastSuccess: s.last_success_at === null ? '' : timeInWords(Number(s.last_success_at)),
      lastFailure: s.last_failure_at === null ? '' : timeInWords(Number(s.last_failure_at)),
      lastAttempt: s.last_attempt_at === null ? '' : timeInWords(Number(s.last_attempt_at)),
      created: timeInWords(Number(s.created_at)),
      approvedBy: name(s.approved_by),
      proposalHref: proposalHref(s.proposal_id),
      rotationUntil: previousUntil !== null && previousUntil > now ? timeInWords(previousUntil) : '',
    };
  }

  async function proposalSummary(p: DbWebhookProposalRow, manage: boolean, name: (id: string | null) => string, now: number) {
    const key = await keyNameOf(db.sql, p.workspace_id, p.proposed_by_key);
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
      keyId: p.proposed_by_key,
      keyRevoked: Boolean(key && key.revoked_at !== null),
      actingFor: p.proposed_by_member ? name(p.proposed_by_member) : '',
      proposed: timeInWords(Number(p.created_at)),
      expires: timeInWords(Number(p.expires_at)),
      expiresIn: state === 'pending' ? inHours(Number(p.expires_at) - now) : '',
      decidedBy: name(p.decided_by),
      decided: p.decided_at === null ? '' : timeInWords(Number(p.decided_at)),
      webhookId: p.webhook_id ?? '',
    };
  }

  // ---- Proposals -----------------------------------------------------------------------------------

  async function proposalPage(req: Request, res: Response, session: Credential, p: DbWebhookProposalRow, status: number, flash = '', problem = '') {
    const member = session.sessionMember!;
    const manage = mayManage(member);
    const now = clock.now();
    const name = await memberNamer(session.workspaceId);
    const proposal = await proposalSummary(p, manage, name, now);
    const live = proposal.webhookId ? await findSubscription(db.sql, session.workspaceId, proposal.webhookId) : undefined;
    pages.send(res, status, {
      title: proposal.state === 'pending' && manage ? 'Approve a webhook?' : 'Webhook proposal',
      bodyClass: 'page',
      html: views.render('proposal', {
        ...(await chrome(req, res, member)),
        manage,
        proposal,
        subscriptionHref: live ? subscriptionHref(live.id) : '',
        flash,
        problem,
      }),
    });
  }

  /** The proposal of the session's workspace, or null after a 404 page. */
  async function proposalOf(res: Response, session: Credential, id: string): Promise<DbWebhookProposalRow | null> {
    const p = PROPOSAL_ID.test(id) ? await findProposal(db.sql, id) : undefined;
    if (!p || p.workspace_id !== session.workspaceId) {
      noProposal(res, id);
      return null;
    }
    return p;
  }

  router.get('/settings/webhooks/proposals/:id', async (req: Request<IdParams>, res: Response) => {
    const session = await pages.session(req, res);
    if (!session) return;
    const p = await proposalOf(res, session, req.params.id);
    if (!p) return;
    const done = req.query.done === 'rejected' && p.status === 'rejected' ? DONE.rejected! : '';
    await proposalPage(req, res, session, p, 200, done);
  });

  router.post('/settings/webhooks/proposals/:id/approve', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const session = await pages.session(req, res);
    if (!session) return;
    const member = session.sessionMember!;
    const p = await proposalOf(res, session, req.params.id);
    if (!p) return;
    if (!mayManage(member)) return notAllowed(res, member, 'approve webhooks');
    let approved: { webhook_id: string; secret: string };
    try {
      approved = await approveProposal(db, clock, p.id, { workspaceId: session.workspaceId, memberId: member.id, role: member.role });
    } catch (err) {
      if (!(err instanceof WebhookActionError)) throw err;
      if (err.status === 404) return noProposal(res, p.id);
      if (err.status === 403) return notAllowed(res, member, 'approve webhooks');
      // Already decided, expired, or a type no longer published: the proposal as it stands, and why.
      return proposalPage(req, res, session, (await findProposal(db.sql, p.id)) ?? p, err.status, '', err.message);
    }
    const s = await findSubscription(db.sql, session.workspaceId, approved.webhook_id);
    // The one answer that carries this secret: a page, not a redirect (no-store, as every page).
    pages.send(res, 200, {
      title: 'Webhook approved',
      bodyClass: 'page',
      html: views.render('secret', {
        ...(await chrome(req, res, member)),
        kind: 'approved',
        secret: approved.secret,
        webhookId: approved.webhook_id,
        href: subscriptionHref(approved.webhook_id),
        destination: s?.url ?? p.url,
        legacy: p.event === 'meeting.completed',
        graceUntil: '',
      }),
    });
  });

  router.post('/settings/webhooks/proposals/:id/reject', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const session = await pages.session(req, res);
    if (!session) return;
    const member = session.sessionMember!;
    const p = await proposalOf(res, session, req.params.id);
    if (!p) return;
    if (!mayManage(member)) return notAllowed(res, member, 'reject webhooks');
    try {
      await rejectProposal(db, clock, p.id, { workspaceId: session.workspaceId, memberId: member.id, role: member.role });
    } catch (err) {
      if (!(err instanceof WebhookActionError)) throw err;
      if (err.status === 404) return noProposal(res, p.id);
      return proposalPage(req, res, session, (await findProposal(db.sql, p.id)) ?? p, err.status, '', err.message);
    }
    res.redirect(303, `${proposalHref(p.id)}?done=rejected`);
  });

  // ---- Subscriptions -------------------------------------------------------------------------------

  async function listPage(req: Request, res: Response, session: Credential, status: number, flash: string, problem: string) {
    const member = session.sessionMember!;
    const manage = mayManage(member);
    const now = clock.now();
    const rows: DbWebhookSubscriptionRow[] = [];
    let after: { t: number; i: string } | null = null;
    for (;;) {
      const batch = await listSubscriptions(db.sql, session.workspaceId, after, 500);
      rows.push(...batch);
      const last = batch.at(-1);
      if (batch.length < 500 || !last || rows.length >= MAX_SUBSCRIPTIONS) break;
      after = { t: Number(last.created_at), i: last.id };
    }
    const name = await memberNamer(session.workspaceId);
    const visible = rows.filter((s) => visibleTo(member, s));
    const proposals = (await listPendingProposals(db.sql, session.workspaceId, now)).filter((p) => visibleTo(member, p));
    pages.send(res, status, {
      title: 'Webhooks',
      bodyClass: 'page',
      html: views.render('webhooks', {
        ...(await chrome(req, res, member)),
        manage,
        subscriptions: visible.map((s) => subscriptionSummary(s, manage, name, now)),
        hiddenCount: rows.length - visible.length,
        proposals: await Promise.all(proposals.map((p) => proposalSummary(p, manage, name, now))),
        flash,
        problem,
      }),
    });
  }

  router.get('/settings/webhooks', async (req: Request, res: Response) => {
    const session = await pages.session(req, res);
    if (!session) return;
    await listPage(req, res, session, 200, await doneText(req, session), '');
  });

  /** The `?done=` notice of a page after an action (naming the subscription when it still exists). */
  async function doneText(req: Request, session: Credential): Promise<string> {
    const done = typeof req.query.done === 'string' ? req.query.done : '';
    const text = DONE[done];
    if (!text || done === 'rejected') return '';
    if (done === 'deleted') return text;
    const id = typeof req.query.webhook === 'string' && WEBHOOK_ID.test(req.query.webhook) ? req.query.webhook : '';
    const s = id ? await findSubscription(db.sql, session.workspaceId, id) : undefined;
    if (!s || (done === 'disabled') === Boolean(s.enabled)) return '';
    return `The webhook ${s.id} ${text}`;
  }

  async function subscriptionPage(req: Request<IdParams>, res: Response, session: Credential, s: DbWebhookSubscriptionRow, status: number, flash: string, problem: string) {
    const member = session.sessionMember!;
    const manage = mayManage(member);
    const before = parseDeliveryPosition(req.query.before);
    if (before === 'invalid') {
      pages.notice(res, 400, 'Bad request', ['The “before” position in this address is not one this page made (it looks like 1795000000000.whd_…). Open the webhook from the list again.']);
      return;
    }
    const filter = typeof req.query.status === 'string' && (STATUSES as readonly string[]).includes(req.query.status) ? req.query.status : '';
    const rows = await listDeliveries(db.sql, s.id, filter || undefined, before, DELIVERIES_PER_PAGE + 1);
    const page = rows.slice(0, DELIVERIES_PER_PAGE);
    const attempts = new Map<string, DbWebhookAttemptRow[]>();
    for (const a of await attemptsOfDeliveries(db.sql, page.map((d) => d.id))) attempts.set(a.delivery_id, [...(attempts.get(a.delivery_id) ?? []), a]);
    const last = page.at(-1);
    const base = subscriptionHref(s.id);
    const query = (more: Record<string, string>) => {
      const q = new URLSearchParams({ ...(filter ? { status: filter } : {}), ...more }).toString();
      return q ? `${base}?${q}` : base;
    };
    const name = await memberNamer(session.workspaceId);
    const now = clock.now();
    pages.send(res, status, {
      title: `Webhook ${s.id}`,
      bodyClass: 'page',
      html: views.render('subscription', {
        ...(await chrome(req, res, member)),
        manage,
        s: subscriptionSummary(s, manage, name, now),
        flash,
        problem,
        filter,
        filters: [{ label: 'All', href: base, current: filter === '' }, ...STATUSES.map((st) => ({ label: st, href: `${base}?status=${st}`, current: filter === st }))],
        deliveries: page.map((d: DbWebhookDeliveryRow) => ({
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
          tries: (attempts.get(d.id) ?? []).map((a) => ({
            attempt: Number(a.attempt),
            started: timeInWords(Number(a.started_at)),
            durationMs: Number(a.duration_ms),
            statusCode: n(a.status_code),
            // The status code is shown already; the error only when it says more.
            error: a.error && a.error !== `HTTP ${a.status_code}` ? a.error : '',
            response: a.response_body ? (a.response_body.length > RESPONSE_SHOWN ? `${a.response_body.slice(0, RESPONSE_SHOWN)}…` : a.response_body) : '',
            next: a.next_attempt_at === null ? '' : timeInWords(Number(a.next_attempt_at)),
          })),
        })),
        older: rows.length > DELIVERIES_PER_PAGE && last ? query({ before: `${Number(last.created_at)}.${last.id}` }) : '',
        newest: before ? query({}) : '',
      }),
    });
  }

  /** The subscription of the session's workspace that the member may see, or null after a 404 page. */
  async function subscriptionOf(res: Response, session: Credential, id: string): Promise<DbWebhookSubscriptionRow | null> {
    const s = WEBHOOK_ID.test(id) ? await findSubscription(db.sql, session.workspaceId, id) : undefined;
    if (!s || !visibleTo(session.sessionMember!, s)) {
      noSubscription(res, id);
      return null;
    }
    return s;
  }

  router.get('/settings/webhooks/:id', async (req: Request<IdParams>, res: Response) => {
    const session = await pages.session(req, res);
    if (!session) return;
    const s = await subscriptionOf(res, session, req.params.id);
    if (!s) return;
    await subscriptionPage(req, res, session, s, 200, await doneText(req, session), '');
  });

  /** Where a form goes back to: the subscription's page or the list. */
  const backOf = (req: Request, id: string) => (((req.body ?? {}) as Record<string, unknown>).back === 'subscription' ? subscriptionHref(id) : '/settings/webhooks');

  /** Runs an owner/admin action on a subscription; null after answering (404 or 403 page). */
  async function managed(req: Request<IdParams>, res: Response, what: string): Promise<{ session: Credential; member: MemberInfo; s: DbWebhookSubscriptionRow } | null> {
    const session = await pages.session(req, res);
    if (!session) return null;
    const member = session.sessionMember!;
    const s = await subscriptionOf(res, session, req.params.id);
    if (!s) return null;
    if (!mayManage(member)) {
      notAllowed(res, member, what);
      return null;
    }
    return { session, member, s };
  }

  /** A WebhookActionError as a page (a 404 when the subscription went away meanwhile). */
  function actionFailed(res: Response, err: unknown, id: string): void {
    if (!(err instanceof WebhookActionError)) throw err;
    if (err.status === 404) return noSubscription(res, id);
    pages.notice(res, err.status, 'Not done', [err.message]);
  }

  router.post('/settings/webhooks/:id/disable', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const got = await managed(req, res, 'disable webhooks');
    if (!got) return;
    try {
      await disableSubscription(db, clock, got.session.workspaceId, got.s.id, `member ${got.member.id}`);
    } catch (err) {
      return actionFailed(res, err, got.s.id);
    }
    res.redirect(303, `${backOf(req, got.s.id)}?done=disabled&webhook=${encodeURIComponent(got.s.id)}`);
  });

  router.post('/settings/webhooks/:id/enable', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const got = await managed(req, res, 'enable webhooks');
    if (!got) return;
    let test;
    try {
      test = await enableSubscription(db, clock, got.session.workspaceId, got.s.id, config.egress);
    } catch (err) {
      return actionFailed(res, err, got.s.id);
    }
    if (test.ok) {
      res.redirect(303, `${backOf(req, got.s.id)}?done=enabled&webhook=${encodeURIComponent(got.s.id)}`);
      return;
    }
    // The outcome is shown on the page the form was on; the subscription stays disabled.
    const problem = `The test delivery to ${got.s.url} failed: ${test.error ?? 'no answer'}${test.durationMs ? ` (after ${test.durationMs} ms)` : ''}. The webhook stays disabled. Fix the receiver (it must answer 2xx within 10 seconds and verify the signature), then enable it again.`;
    const s = (await findSubscription(db.sql, got.session.workspaceId, got.s.id)) ?? got.s;
    if (backOf(req, s.id) === '/settings/webhooks') await listPage(req, res, got.session, 200, '', problem);
    else await subscriptionPage(req, res, got.session, s, 200, '', problem);
  });

  router.post('/settings/webhooks/:id/rotate', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const got = await managed(req, res, 'rotate webhook secrets');
    if (!got) return;
    let rotated: { secret: string; previous_valid_until: number };
    try {
      rotated = await rotateSecret(db, clock, got.session.workspaceId, got.s.id);
    } catch (err) {
      return actionFailed(res, err, got.s.id);
    }
    pages.send(res, 200, {
      title: 'New signing secret',
      bodyClass: 'page',
      html: views.render('secret', {
        ...(await chrome(req, res, got.member)),
        kind: 'rotated',
        secret: rotated.secret,
        webhookId: got.s.id,
        href: subscriptionHref(got.s.id),
        destination: got.s.url,
        legacy: got.s.event === 'meeting.completed',
        graceUntil: timeInWords(rotated.previous_valid_until),
        graceHours: Math.round(ROTATION_GRACE_MS / 3_600_000),
      }),
    });
  });

  async function deletePage(req: Request, res: Response, session: Credential, s: DbWebhookSubscriptionRow, status: number, problem: string) {
    const member = session.sessionMember!;
    const name = await memberNamer(session.workspaceId);
    pages.send(res, status, {
      title: `Delete webhook ${s.id}?`,
      bodyClass: 'page',
      html: views.render('delete', { ...(await chrome(req, res, member)), s: subscriptionSummary(s, true, name, clock.now()), problem }),
    });
  }

  router.get('/settings/webhooks/:id/delete', async (req: Request<IdParams>, res: Response) => {
    const got = await managed(req, res, 'delete webhooks');
    if (!got) return;
    await deletePage(req, res, got.session, got.s, 200, '');
  });

  router.post('/settings/webhooks/:id/delete', pages.protectForm, async (req: Request<IdParams>, res: Response) => {
    const got = await managed(req, res, 'delete webhooks');
    if (!got) return;
    if (((req.body ?? {}) as Record<string, unknown>).confirm !== 'delete') {
      return deletePage(req, res, got.session, got.s, 400, 'Tick the box to confirm: deleting cannot be undone.');
    }
    try {
      await deleteSubscription(db, got.session.workspaceId, got.s.id);
    } catch (err) {
      return actionFailed(res, err, got.s.id);
    }
    res.redirect(303, '/settings/webhooks?done=deleted');
  });

  return router;
}
