/**
 * The agent connections settings page (`/settings/connections`): the workspace's MCP connections
 * (handlers/mcp/connections.ts) in words: client, access (personal: whom it acts as; workspace: its
 * operations, resource access and delegation, as the API keys page says them), toolsets, read-only,
 * who approved it and when, last use, and its state (active, ended because its member was disabled or
 * changed role, revoked). Never a token.
 *
 * Owners and admins see and revoke every connection; a plain member sees the shared (workspace)
 * connections and their own personal ones, and revokes their own personal ones. Revoking is a
 * CSRF-protected post answering 303 back to the page; the connection's next call is refused, and
 * `connection.revoked` is in the audit log with the member as actor.
 */
import express, { type Request, type Response } from 'express';
import type { Logger } from 'pino';
import type { Database } from '../../db/database.ts';
import { listWorkspaceMembers } from '../../db/queries/credentials.ts';
import type { MemberRole } from '../../db/rows.ts';
import { AdminError } from '../../server/admin.ts';
import type { Clock } from '../../server/clock.ts';
import type { ServiceConfig } from '../../server/config.ts';
import { grantsInWords, namespaceLabel, operationsInWords, resourcesInWords } from '../../server/pages/grantWords.ts';
import type { OAuthServer } from './oauth/index.ts';
import type { MemberPage, NavEntry, PageKit } from '../../server/pages.ts';
import { timeInWords } from '../../server/pages/format.ts';
import { type Connection, connectionEnded, listConnections, revokeConnection } from './connections.ts';
import { mcpResource } from './resource.ts';

export const CONNECTIONS_PATH = '/settings/connections';
const CONNECTION_ID = /^mc_[0-9a-z]{1,40}$/;

export const connectionsNavigation: NavEntry[] = [
  {
    label: 'Agent connections',
    path: CONNECTIONS_PATH,
    order: 56,
    section: 'settings',
    summary: 'AI agents and tools connected through the MCP server: whom each acts as or what it may call, when it was last used; revoke them.',
  },
];
export const MCP_CSS = new URL('./mcp.css', import.meta.url);

export interface ConnectionsPageOptions {
  db: Database;
  clock: Clock;
  logger: Logger;
  config: ServiceConfig;
  pages: PageKit;
  oauth: Pick<OAuthServer, 'revokeGrant'>;
}

interface Held {
  flash?: string;
  problem?: string;
}

/** Whom a workspace connection may act for, in words. */
export function connectionDelegationInWords(c: Pick<Connection, 'delegation' | 'delegates'>, names: ReadonlyMap<string, string>): string {
  if (c.delegation === 'all') return 'May act for every current and future member: with Service-Act-As a call runs as that member, within both the connection’s grants and the member’s own role.';
  if (c.delegation === 'selected') {
    return `May act for ${c.delegates.map((id) => names.get(id) ?? id).join(', ')}: with Service-Act-As naming one of them a call runs as that member, within both the connection’s grants and the member’s own role; naming anyone else is refused.`;
  }
  return 'Acts for no member: a call with Service-Act-As is refused.';
}

/** A connection in words, for the page and the CLI. */
export function connectionInWords(c: Connection, members: ReadonlyMap<string, { name: string; role: MemberRole; disabled: boolean }>) {
  const names = new Map([...members].map(([id, m]) => [id, m.disabled ? `${m.name} (disabled)` : m.name]));
  const member = c.memberId ? members.get(c.memberId) : undefined;
  const ended = c.revokedAt === null ? connectionEnded({ ...c, member: member ? { roleNow: member.role, disabled: member.disabled } : null }) : null;
  let redirectHost = c.redirectUri;
  try {
    const u = new URL(c.redirectUri);
    redirectHost = u.host || u.protocol;
  } catch {
    // shown as stored
  }
  return {
    id: c.id,
    client: c.clientName,
    clientId: c.clientId,
    redirectHost,
    workspace: c.access === 'workspace',
    access: c.access === 'personal' ? `Personal: acts as ${names.get(c.memberId ?? '') ?? c.memberId} (${c.memberRole ?? 'role unknown'}), with that member’s own permissions` : 'Workspace: a shared integration with the grants below',
    grants: grantsInWords(c.operations),
    operationWords: operationsInWords(c.operations),
    operationCount: c.operations.length,
    resources: resourcesInWords(c.resources),
    delegation: connectionDelegationInWords(c, names),
    toolsets: c.toolsets.map(namespaceLabel).join(', '),
    readOnly: c.readOnly,
    toolListing: c.toolListing === 'compact' ? 'compact: at most 30 tools, the rest found and called through search_tools and call_tool' : 'full: every tool in full',
    creator: names.get(c.createdBy) ?? c.createdBy,
    created: timeInWords(c.createdAt),
    lastUsed: c.lastUsedAt === null ? 'never' : timeInWords(c.lastUsedAt),
    ended: c.revokedAt !== null || ended !== null,
    state:
      c.revokedAt !== null
        ? c.endedReason
          ? `ended on ${timeInWords(c.revokedAt)}: ${connectionEnded({ ...c, member: null })}`
          : `revoked on ${timeInWords(c.revokedAt)}`
        : ended
          ? `ended: ${ended}`
          : 'active',
  };
}

/**
 * Which connection this is, in words that tell two approvals of one client apart: personal (whose) or
 * workspace, who approved it and when, and "2 of 3" when several active connections share its name.
 */
export function whichInWords(c: Connection, all: readonly Connection[], members: ReadonlyMap<string, { name: string }>): string {
  const same = all.filter((x) => x.clientName === c.clientName && x.revokedAt === null).sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  const kind = c.access === 'personal' ? `Personal connection of ${members.get(c.memberId ?? '')?.name ?? c.memberId}` : 'Workspace connection';
  const approved = `approved ${timeInWords(c.createdAt)} by ${members.get(c.createdBy)?.name ?? c.createdBy}`;
  const nth = c.revokedAt === null && same.length > 1 ? ` · ${same.findIndex((x) => x.id === c.id) + 1} of ${same.length} “${c.clientName}” connections` : '';
  return `${kind}, ${approved}${nth}`;
}

/** Owners and admins see every connection; a member the shared ones and their own personal ones. */
const seenBy = (page: MemberPage, c: Connection) => page.manage || c.access === 'workspace' || c.memberId === page.member.id;
/** Owners and admins revoke any live connection; a member their own personal ones. */
const revocableBy = (page: MemberPage, c: Connection) => c.revokedAt === null && (page.manage || (c.access === 'personal' && c.memberId === page.member.id));

export function connectionsRoutes(options: ConnectionsPageOptions): express.Router {
  const { db, clock, logger, config, pages, oauth } = options;
  const router = pages.router();
  const views = pages.views(new URL('./pages', import.meta.url));
  const endpoint = mcpResource(config.publicUrl).resource;

  router.get(CONNECTIONS_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const held = ((await page.take()) ?? {}) as Held;
    const [connections, members] = await Promise.all([listConnections(db.sql, page.workspaceId), listWorkspaceMembers(db.sql, page.workspaceId)]);
    const byId = new Map(members.map((m) => [m.id, { name: m.name, role: m.role, disabled: m.disabled_at !== null }]));
    const visible = connections.filter((c) => seenBy(page, c));
    const view = visible.map((c) => ({
      ...connectionInWords(c, byId),
      which: whichInWords(c, visible, byId),
      revocable: revocableBy(page, c),
      revoked: c.revokedAt !== null,
    }));
    await page.send(200, {
      title: 'Agent connections',
      html: views.render('connections', {
        endpoint,
        manage: page.manage,
        csrf: page.csrf,
        flash: held.flash ?? '',
        problem: held.problem ?? '',
        active: view.filter((c) => !c.revoked),
        revoked: view.filter((c) => c.revoked),
      }),
    });
  });

  /** Revoking asks first: this page says what stops, and its form revokes. */
  router.get(`${CONNECTIONS_PATH}/:id/revoke`, async (req: Request<{ id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const [connections, members] = await Promise.all([listConnections(db.sql, page.workspaceId), listWorkspaceMembers(db.sql, page.workspaceId)]);
    const c = CONNECTION_ID.test(req.params.id) ? connections.find((x) => x.id === req.params.id) : undefined;
    if (!c || !revocableBy(page, c)) {
      const seen = c && seenBy(page, c);
      return page.notice(seen ? 409 : 404, seen ? 'Not revocable here' : 'No such connection', [
        seen ? (c.revokedAt !== null ? 'This connection is already revoked.' : 'Only owners and admins revoke workspace connections; a member revokes their own personal ones.') : 'There is no agent connection at this address that you may see.',
      ]);
    }
    const byId = new Map(members.map((m) => [m.id, { name: m.name, role: m.role, disabled: m.disabled_at !== null }]));
    // Counted among the connections this member may see, as on the list.
    const visible = connections.filter((x) => seenBy(page, x));
    await page.send(200, {
      title: `Revoke ${c.clientName}?`,
      html: views.render('revoke', { csrf: page.csrf, c: { ...connectionInWords(c, byId), which: whichInWords(c, visible, byId) } }),
    });
  });

  router.post(`${CONNECTIONS_PATH}/revoke`, pages.protectForm, async (req: Request, res: Response) => {
    const page: MemberPage | null = await pages.member(req, res);
    if (!page) return;
    const body = (req.body ?? {}) as Record<string, unknown>;
    // Only from the confirmation page: a post without it goes there first.
    if (body.confirm !== 'yes' && typeof body.connection === 'string' && CONNECTION_ID.test(body.connection)) {
      return res.redirect(303, `${CONNECTIONS_PATH}/${body.connection}/revoke`);
    }
    let outcome: Held;
    try {
      const id = typeof body.connection === 'string' && CONNECTION_ID.test(body.connection) ? body.connection : null;
      if (!id) throw new AdminError('no such connection in this workspace');
      await revokeConnection(db, clock, id, {
        actor: { type: 'member', id: page.member.id, label: page.member.name },
        workspaceId: page.workspaceId,
        ...(page.manage ? {} : { onlyPersonalOf: page.member.id }),
        revokeGrant: (grantId) => oauth.revokeGrant(grantId),
      });
      logger.info({ workspace_id: page.workspaceId, connection_id: id }, 'MCP connection revoked on the page');
      outcome = { flash: `Revoked the connection ${id}: its next call is refused and its tokens no longer work.` };
    } catch (err) {
      if (!(err instanceof AdminError)) throw err;
      const m = err.message;
      outcome = { problem: m.charAt(0).toUpperCase() + m.slice(1) + (/[.!?]$/.test(m) ? '' : '.') };
    }
    await page.hold(CONNECTIONS_PATH, outcome);
    res.redirect(303, CONNECTIONS_PATH);
  });

  return router;
}
