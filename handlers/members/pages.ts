/**
 * The Members settings page (`/settings/members`) and the invitation link (`/signin/invite/<token>`).
 *
 * - Everyone signed in sees the members (name, e-mail, role, state, joined) and the open invitations;
 *   plain members read only (no forms). Owners and admins invite, revoke invitations, change roles and
 *   disable or enable members; every action is a CSRF-protected form (`pages.protectForm`) answering
 *   303 back to the page, with what happened held for its next view (post/redirect/get).
 * - One open invitation per address (compared without case): inviting it again replaces the open one
 *   in the same transaction (`member.invited` says which it replaces).
 * - Who may: an owner does everything; an admin invites, sets and revokes only admins and members and
 *   never touches an owner. Nobody changes or disables themselves, and the last active owner stays one.
 * - A role change or a disable ends that member's sign-in sessions at once (revoked, as the admin CLI's
 *   `member disable` does; a session also never outlives its role): other members' sessions go on.
 * - Invitations: a 256-bit token (only its SHA-256 stored), valid 7 days, used once, revocable, mailed
 *   through the mailer. The link is under /signin/, so the request log never shows the token.
 *   Each takes one of the workspace's member invitations an hour and one of its mails an hour and a
 *   day (server/limits.ts); past either, nothing is made and the page says when to retry.
 *   `GET` of the link changes nothing (mail scanners fetch links): it shows the workspace, role and
 *   inviter and a form for the name; the `POST` (signed-out CSRF: the sign-in form's `wso_form` cookie
 *   and an HMAC of it: server/pages/signedOutForms.ts) creates the member, uses the invitation, opens a
 *   12-hour session and redirects to `/` (the address's other open invitations are closed). Used, expired or revoked: 410 pointing to /signin; an address
 *   that is already a member of the workspace: 409 pointing to /signin.
 */
import express, { type Request, type Response } from 'express';
import type { Logger } from 'pino';
import type { Database } from '../../db/database.ts';
import {
  consumeInvitation,
  countOtherActiveOwners,
  findInvitation,
  findInvitationByHash,
  findMemberByEmail,
  insertInvitation,
  insertMember,
  listOpenInvitations,
  listWorkspaceMembers,
  openInvitationsFor,
  revokeInvitation,
  revokeOpenInvitationsFor,
  setMemberDisabled,
  setMemberRole,
} from './queries.ts';
import { insertSession, revokeSessions } from '../../db/queries/sessions.ts';
import { bumpAuthVersion, findWorkspaceMember } from '../../db/queries/workspaces.ts';
import type { MemberRole } from '../../db/rows.ts';
import { memberRoleNames } from '../../generated/catalogue.ts';
import { type AuditActor, recordAudit } from '../../server/audit.ts';
import type { Clock } from '../../server/clock.ts';
import { newSessionSecret } from '../../server/credentials.ts';
import { newId } from '../../server/ids.ts';
import { isLinkToken, linkTokenHash, newLinkToken } from '../../server/links.ts';
import { isMailAddress, type Mailer, mailTemplates } from '../../server/mailer.ts';
import { invitationBucket, mailBuckets, takeAll, workspaceLimits } from '../../server/limits.ts';
import { type MemberPage, type NavEntry, type PageKit, SESSION_COOKIE, signinLink } from '../../server/pages.ts';
import { SESSION_TTL_MS } from '../../server/signin.ts';
import { bidiControlProblem } from '../../server/text.cjs';
import { signedOutForms } from '../../server/pages/signedOutForms.ts';

export const MEMBERS_PATH = '/settings/members';
export const INVITE_PREFIX = '/signin/invite/';
export const INVITATION_TTL_MS = 7 * 24 * 3_600_000;
const ID = /^[a-z]{2}_[0-9A-Za-z]{1,40}$/;

/** The navigation entry: everyone signed in (plain members read the list). */
export const membersNavigation: NavEntry[] = [{ label: 'Members', path: MEMBERS_PATH, order: 50, section: 'settings', summary: 'Who belongs to the workspace: invite people by e-mail, change roles, disable members.' }];
export const MEMBERS_CSS = new URL('./members.css', import.meta.url);

const mails = mailTemplates(new URL('./mails', import.meta.url));

export interface MembersOptions {
  db: Database;
  clock: Clock;
  logger: Logger;
  pages: PageKit;
  mailer: Mailer;
  /** The service's public origin (links are `BASE/signin/invite/<token>`). */
  baseUrl: string;
}

type Role = MemberRole;
const isRole = (v: unknown): v is Role => typeof v === 'string' && (memberRoleNames as readonly string[]).includes(v);
/** The roles an inviter or role-changer of `role` may give: an owner any, an admin admin or member. */
export const assignableRoles = (actor: string): Role[] => (memberRoleNames as readonly Role[]).filter((r) => actor === 'owner' || r !== 'owner');

const when = (ms: number) => new Date(ms).toISOString().slice(0, 16).replace('T', ' ') + ' UTC';

/** Thrown by an action to refuse it: its message is the page's flash. */
class Refusal extends Error {}

/** The member acting on a page, as the audit log names them. */
const actorOf = (page: MemberPage): AuditActor => ({ type: 'member', id: page.member.id, label: page.member.name });

export function membersRoutes(options: MembersOptions): express.Router {
  const { db, clock, logger, pages, mailer, baseUrl } = options;
  const router = pages.router();
  const views = pages.views(new URL('./pages', import.meta.url));

  // ---- The settings page --------------------------------------------------------------------

  router.get(MEMBERS_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const held = (await page.take()) as { flash?: string; problem?: string } | undefined;
    const now = clock.now();
    const me = page.member;
    const members = await listWorkspaceMembers(db.sql, page.workspaceId);
    const invitations = await listOpenInvitations(db.sql, page.workspaceId, now);
    const roles = page.manage ? assignableRoles(me.role) : [];
    await page.send(200, {
      title: 'Members',
      html: views.render('members', {
        manage: page.manage,
        csrf: page.csrf,
        flash: held?.flash ?? '',
        problem: held?.problem ?? '',
        roles,
        members: members.map((m) => ({
          id: m.id,
          name: m.name,
          email: m.email,
          role: m.role,
          active: m.disabled_at === null,
          joined: when(Number(m.created_at)),
          self: m.id === me.id,
          // The forms shown: never on oneself, never an admin's on an owner.
          editable: page.manage && m.id !== me.id && (me.role === 'owner' || m.role !== 'owner'),
        })),
        invitations: invitations.map((i) => ({
          id: i.id,
          email: i.email,
          role: i.role,
          by: i.inviter_name ?? 'a former member',
          expires: when(Number(i.expires_at)),
          revocable: page.manage && (me.role === 'owner' || i.role !== 'owner'),
        })),
      }),
    });
  });

  /** One action: checks, does, holds the outcome and redirects to the page. */
  const action = (work: (page: MemberPage, body: Record<string, unknown>) => Promise<string>) =>
    async (req: Request, res: Response) => {
      const page = await pages.member(req, res);
      if (!page) return;
      if (!page.manage) return page.notice(403, 'Owners and admins only', ['Only owners and admins manage the workspace’s members.']);
      let outcome: { flash?: string; problem?: string };
      try {
        outcome = { flash: await work(page, (req.body ?? {}) as Record<string, unknown>) };
      } catch (err) {
        if (!(err instanceof Refusal)) throw err;
        outcome = { problem: err.message };
      }
      // The acting member's session may have ended (it never does for their own changes: they are refused).
      await page.hold(MEMBERS_PATH, outcome);
      res.redirect(303, MEMBERS_PATH);
    };

  /** The member a form names, in the page's workspace, checked against who acts. */
  const target = async (page: MemberPage, body: Record<string, unknown>) => {
    const id = typeof body.member === 'string' && ID.test(body.member) ? body.member : '';
    const m = id ? await findWorkspaceMember(db.sql, page.workspaceId, id) : undefined;
    if (!m) throw new Refusal('No such member in this workspace.');
    if (page.member.role !== 'owner' && m.role === 'owner') throw new Refusal(`Only an owner may change an owner (${m.name}).`);
    return m;
  };

  /** Refuses a change that would leave the workspace without an active owner, then one of oneself. */
  const keepOwner = async (page: MemberPage, m: { id: string; role: string; disabled_at: number | null }, removes: boolean) => {
    if (removes && m.role === 'owner' && m.disabled_at === null && (await countOtherActiveOwners(db.sql, page.workspaceId, m.id)) === 0) {
      throw new Refusal('The workspace must keep at least one active owner: make another member owner first.');
    }
    if (m.id === page.member.id) throw new Refusal('You cannot change or disable yourself: ask another owner or admin.');
  };

  router.post(`${MEMBERS_PATH}/invite`, pages.protectForm, action(async (page, body) => {
    const email = typeof body.email === 'string' ? body.email.trim() : '';
    // The readable bidi refusal first: the address rule refuses the same characters without saying which.
    const bidi = bidiControlProblem('e-mail address', email);
    if (bidi) throw new Refusal(bidi);
    if (!isMailAddress(email)) throw new Refusal('Enter an e-mail address to invite, such as name@example.com.');
    if (!isRole(body.role) || !assignableRoles(page.member.role).includes(body.role)) throw new Refusal(`As ${page.member.role} you may invite as ${assignableRoles(page.member.role).join(' or ')}.`);
    const role = body.role;
    if (await findMemberByEmail(db.sql, page.workspaceId, email)) throw new Refusal(`${email} is already a member of this workspace.`);
    const now = clock.now();
    // The workspace's invitation and mail budgets (server/limits.ts), spent before anything is made.
    const limits = await workspaceLimits(db.sql, page.workspaceId);
    const invites = invitationBucket(page.workspaceId, limits);
    const over = await takeAll(db.sql, [{ ...invites, label: `${limits.member_invitations_per_hour} invitations an hour` }, ...mailBuckets(page.workspaceId, limits)], 1, now, 'No invitation was made');
    if (over) throw new Refusal(`${over.message} (Settings, Usage and limits shows the limits.)`);
    const token = newLinkToken();
    const invitationId = newId('iv');
    // One open invitation per address (compared without case): a new one replaces the open ones, in the
    // same transaction (a double submit, a second tab, another case, another role), so only the newest link works.
    const replaced = await db.tx(async (sql) => {
      const open = await openInvitationsFor(sql, page.workspaceId, email, now);
      if (page.member.role !== 'owner' && open.some((i) => i.role === 'owner')) throw new Refusal(`${email} has an open invitation as owner: only an owner may replace it.`);
      if (open.length) await revokeOpenInvitationsFor(sql, page.workspaceId, email, page.member.id, now);
      await insertInvitation(sql, {
        id: invitationId, token_hash: linkTokenHash(token), workspace_id: page.workspaceId, email, role, invited_by: page.member.id, created_at: now, expires_at: now + INVITATION_TTL_MS,
      });
      const details = open.length ? { email, role, replaces: open.map((i) => i.id) } : { email, role };
      await recordAudit(sql, { workspaceId: page.workspaceId, actor: actorOf(page), action: 'member.invited', subject: { type: 'invitation', id: invitationId, label: email }, details, at: now });
      return open;
    });
    const workspace = await db.sql.one<{ name: string }>(`SELECT name FROM workspaces WHERE id = ?`, [page.workspaceId]);
    const base = new URL(baseUrl);
    const url = `${base.origin}${base.pathname.replace(/\/+$/, '')}${INVITE_PREFIX}${token}`;
    const subject = `${page.member.name} invites you to ${workspace?.name ?? 'a workspace'}`;
    const { text, html } = mails.render('invite', { subject, inviter: page.member.name, workspace: workspace?.name ?? '', role, url, days: INVITATION_TTL_MS / 86_400_000 });
    try {
      await mailer.send({ to: email, subject, text, html, tag: 'platform.invite', workspaceId: page.workspaceId });
    } catch (err) {
      logger.warn({ err }, 'members: the invitation could not be mailed');
      throw new Refusal(`The invitation for ${email} was made but could not be mailed; revoke it and try again later.`);
    }
    logger.info({ workspace_id: page.workspaceId, role }, 'member invited');
    const replaces = replaced.length ? ` It replaces the earlier open invitation${replaced.length > 1 ? 's' : ''} of this address (${replaced.map((i) => `${i.email} as ${i.role}`).join(', ')}): ${replaced.length > 1 ? 'their links' : 'its link'} no longer work${replaced.length > 1 ? '' : 's'}.` : '';
    return `Invited ${email} as ${role}: the link works once, for 7 days.${replaces}`;
  }));

  router.post(`${MEMBERS_PATH}/invitations/revoke`, pages.protectForm, action(async (page, body) => {
    const id = typeof body.invitation === 'string' && ID.test(body.invitation) ? body.invitation : '';
    const inv = id ? await findInvitation(db.sql, page.workspaceId, id) : undefined;
    if (!inv) throw new Refusal('No such invitation in this workspace.');
    if (page.member.role !== 'owner' && inv.role === 'owner') throw new Refusal('Only an owner may revoke an invitation as owner.');
    const revoked = await db.tx(async (sql) => {
      const now = clock.now();
      if (!(await revokeInvitation(sql, inv.id, page.member.id, now))) return false;
      await recordAudit(sql, { workspaceId: page.workspaceId, actor: actorOf(page), action: 'invitation.revoked', subject: { type: 'invitation', id: inv.id, label: inv.email }, details: { email: inv.email, role: inv.role }, at: now });
      return true;
    });
    if (!revoked) throw new Refusal(`The invitation for ${inv.email} was already used or revoked.`);
    return `Revoked the invitation for ${inv.email}: its link no longer works.`;
  }));

  router.post(`${MEMBERS_PATH}/role`, pages.protectForm, action(async (page, body) => {
    const m = await target(page, body);
    if (!isRole(body.role) || !assignableRoles(page.member.role).includes(body.role)) throw new Refusal(`As ${page.member.role} you may give the roles ${assignableRoles(page.member.role).join(', ')}.`);
    const role = body.role;
    await keepOwner(page, m, role !== 'owner');
    if (m.role === role) return `${m.name} already is ${role}.`;
    const ended = await db.tx(async (sql) => {
      const now = clock.now();
      await setMemberRole(sql, m.id, role);
      const n = await revokeSessions(sql, { memberId: m.id }, now);
      await bumpAuthVersion(sql, page.workspaceId);
      await recordAudit(sql, {
        workspaceId: page.workspaceId, actor: actorOf(page), action: 'member.role_changed', subject: { type: 'member', id: m.id, label: m.name }, details: { before: m.role, after: role, sessions_ended: n }, at: now,
      });
      return n;
    });
    logger.info({ member_id: m.id, role, sessions_ended: ended }, 'member role changed');
    return `${m.name} is now ${role}; their sign-in sessions have ended.`;
  }));

  router.post(`${MEMBERS_PATH}/state`, pages.protectForm, action(async (page, body) => {
    const m = await target(page, body);
    const disable = body.state === 'disabled';
    if (!disable && body.state !== 'active') throw new Refusal('Choose to disable or enable the member.');
    await keepOwner(page, m, disable);
    if (disable === (m.disabled_at !== null)) return `${m.name} already is ${disable ? 'disabled' : 'active'}.`;
    await db.tx(async (sql) => {
      const now = clock.now();
      await setMemberDisabled(sql, m.id, disable ? now : null);
      const ended = disable ? await revokeSessions(sql, { memberId: m.id }, now) : 0;
      await bumpAuthVersion(sql, page.workspaceId);
      await recordAudit(sql, {
        workspaceId: page.workspaceId, actor: actorOf(page), action: disable ? 'member.disabled' : 'member.enabled', subject: { type: 'member', id: m.id, label: m.name }, details: disable ? { sessions_ended: ended } : {}, at: now,
      });
    });
    logger.info({ member_id: m.id, disabled: disable }, disable ? 'member disabled' : 'member enabled');
    return disable ? `${m.name} is disabled; their sign-in sessions have ended.` : `${m.name} is active again (they sign in anew).`;
  }));

  // ---- The invitation link (signed out) -----------------------------------------------------

  // The sign-in form's protection, bound to this invitation.
  const forms = signedOutForms({ db, clock });
  const purpose = (tokenHash: string) => `invite\n${tokenHash}`;
  const gone = (res: Response) =>
    pages.notice(res, 410, 'This invitation can no longer be used', [
      'Invitations work once and for 7 days, and can be revoked. This one was already used, has expired or was revoked.',
      'Already a member? Sign in with your e-mail address. Otherwise ask the person who invited you for a new invitation.',
    ], undefined, signinLink());
  const unknown = (res: Response) => pages.notice(res, 404, 'Unknown invitation', ['This invitation link does not exist. Check that it was copied completely.'], undefined, signinLink());

  /** The invitation of a link, when it can still be used. */
  const open = async (token: string) => {
    if (!isLinkToken(token)) return 404 as const;
    const inv = await findInvitationByHash(db.sql, linkTokenHash(token));
    if (!inv) return 404 as const;
    if (inv.used_at !== null || inv.revoked_at !== null || Number(inv.expires_at) <= clock.now() || inv.inviter_disabled_at !== null) return 410 as const;
    return inv;
  };

  const sendJoin = async (req: Request, res: Response, status: number, inv: Exclude<Awaited<ReturnType<typeof open>>, 404 | 410>, name: string, error: string) => {
    const html = views.render('invite', {
      workspace: inv.workspace_name, role: inv.role, inviter: inv.inviter_name ?? 'a former member', email: inv.email, expires: when(Number(inv.expires_at)),
      csrf: await forms.token(req, res, purpose(inv.token_hash)), action: req.originalUrl.split('?')[0], name, error,
    });
    pages.send(res, status, { title: `Join ${inv.workspace_name}`, bodyClass: 'notice', html });
  };

  // The page policy (same-origin) sends the token as a referrer only to this service (never logged);
  // `no-referrer` would make Chromium send `Origin: null` on the join form's post.
  router.get(`${INVITE_PREFIX}:token`, async (req: Request<{ token: string }>, res: Response) => {
    const inv = await open(req.params.token);
    if (inv === 404) return unknown(res);
    if (inv === 410) return gone(res);
    await sendJoin(req, res, 200, inv, '', '');
  });

  router.post(`${INVITE_PREFIX}:token`, async (req: Request<{ token: string }>, res: Response) => {
    const inv = await open(req.params.token);
    if (inv === 404) return unknown(res);
    if (inv === 410) return gone(res);
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (!(await forms.valid(req, purpose(inv.token_hash)))) {
      return pages.notice(res, 403, 'Refused', ['This form has expired or did not come from this service. Open the invitation link again and send it from there.']);
    }
    const name = typeof body.name === 'string' ? body.name.trim().replace(/\s+/g, ' ') : '';
    if (name.length < 1 || name.length > 200) return sendJoin(req, res, 400, inv, name.slice(0, 200), 'Enter your name (up to 200 characters).');
    const bidi = bidiControlProblem('name', name);
    if (bidi) return sendJoin(req, res, 400, inv, name.slice(0, 200), bidi);
    if (await findMemberByEmail(db.sql, inv.workspace_id, inv.email)) {
      return pages.notice(res, 409, 'Already a member', [`${inv.email} already is a member of ${inv.workspace_name}: there is nothing to join.`, 'Sign in with that e-mail address instead.'], undefined, signinLink());
    }
    const now = clock.now();
    const memberId = newId('mb');
    const session = newSessionSecret();
    const joined = await db.tx(async (sql) => {
      if (!(await consumeInvitation(sql, inv.token_hash, memberId, now))) return false;
      await insertMember(sql, { id: memberId, workspace_id: inv.workspace_id, name, email: inv.email, role: inv.role, created_at: now });
      // Other open invitations of the address are moot now.
      await revokeOpenInvitationsFor(sql, inv.workspace_id, inv.email, memberId, now);
      await recordAudit(sql, {
        workspaceId: inv.workspace_id, actor: { type: 'member', id: memberId, label: name }, action: 'member.joined', subject: { type: 'member', id: memberId, label: name },
        details: { email: inv.email, role: inv.role, invitation: inv.id, invited_by: inv.inviter_name ?? 'a former member' }, at: now,
      });
      const w = await sql.one<{ auth_version: number | string }>(`SELECT auth_version FROM workspaces WHERE id = ?`, [inv.workspace_id]);
      await insertSession(sql, {
        id: session.sessionId, secret_hash: session.secretHash, workspace_id: inv.workspace_id, member_id: memberId,
        auth_version: Number(w?.auth_version ?? 0), member_role: inv.role, created_at: now, expires_at: now + SESSION_TTL_MS,
      });
      return true;
    });
    if (!joined) return gone(res);
    logger.info({ workspace_id: inv.workspace_id, member_id: memberId, role: inv.role }, 'member joined by invitation');
    res.cookie(SESSION_COOKIE, session.secret, { path: '/', httpOnly: true, sameSite: 'lax', secure: req.secure, maxAge: SESSION_TTL_MS });
    res.redirect(303, '/');
  });
  return router;
}
