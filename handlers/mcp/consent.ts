/**
 * The consent page of the authorization server (`GET /oauth/consent/<uid>`, `POST` the same): where a
 * signed-in member approves or denies an MCP client's request (oidc-provider's interaction, handed
 * over by handlers/mcp/oauth/ through `OAuthServer.interaction` / `approve` / `deny`).
 *
 * - Shows the client's name, its client id (and who published it, for a metadata-document client),
 *   the address it sends the browser back to (host in bold), what it asks for, and who is approving.
 * - Personal access (the default) acts as the member, with their role's operations; workspace access
 *   (owners and admins only: a plain member's choice is disabled and a forged post is refused with
 *   403) takes operations and resource access from the API keys' grants chooser and optional
 *   delegation. Toolsets (namespaces; by default every one the member may use) and read-only narrow
 *   both. The operations are frozen when the connection is made (handlers/mcp/connections.ts).
 * - Approve: the connection is made and `connection.approved` recorded in one transaction, then the
 *   authorization server finishes the interaction (the browser goes back to the client with a code).
 *   Deny: the client gets `access_denied`.
 * - Security: the page kit's headers (Content-Security-Policy `frame-ancestors 'none'`,
 *   `X-Frame-Options: DENY`, no inline script), CSRF tokens on both forms, `no-store`.
 * - Signed out: a 401 page linking to `/signin?next=/oauth/consent/<uid>`; the mailed link must be
 *   opened in the same browser, because the pending request lives in this browser's cookie. A request
 *   that is gone (expired, already answered, or another browser's) is a 410 page: start again from the client.
 */
import express, { type Request, type Response } from 'express';
import type { Logger } from 'pino';
import type { Database } from '../../db/database.ts';
import { listWorkspaceMembers } from '../../db/queries/credentials.ts';
import { AdminError, grantableResourceTypes } from '../../server/admin.ts';
import type { Clock } from '../../server/clock.ts';
import type { CredentialStore } from '../../server/credentials.ts';
import { ServiceError } from '../../server/errors.ts';
import { ChooserRefusal, type ChooserSelection, delegationChooserHtml, delegationFromForm, formStrings, grantsChooserHtml, operationsFromForm, resourcesFromForm, selectionFromForm } from '../../server/pages/grants.ts';
import { namespaceLabel } from '../../server/pages/grantWords.ts';
import type { InteractionDetails, OAuthServer } from './oauth/index.ts';
import { type MemberPage, type PageKit, sessionTokenOf, signinLink } from '../../server/pages.ts';
import { createConnection, memberOperations, revokeConnection, WORKSPACE_ACCESS_OFF } from './connections.ts';
import { type ToolListing } from './listing.ts';
import { allToolDefinitions, toolsetNames } from './tools.ts';
import { mcpToolsets } from '../../generated/mcpTools.ts';

export const CONSENT_PATH = '/oauth/consent';
const UID = /^[A-Za-z0-9_-]{1,100}$/;

export interface ConsentOptions {
  db: Database;
  clock: Clock;
  logger: Logger;
  pages: PageKit;
  credentials: CredentialStore;
  /** The authorization server's side of the interaction. */
  oauth: Pick<OAuthServer, 'interaction' | 'approve' | 'deny'>;
}

/** What the form chose, to show it again with a problem. */
interface Choice {
  access: 'personal' | 'workspace';
  toolsets: string[] | null;
  /** How tools/list lists the tools (absent: compact). */
  toolListing?: ToolListing;
  readOnly: boolean;
  selection?: ChooserSelection;
  delegationMode?: 'none' | 'selected' | 'all';
  delegates?: string[];
}

/** `https://app.example.com/cb` → before `https://`, host `app.example.com`, after `/cb`. */
function splitAddress(address: string): { before: string; host: string; after: string; local: boolean } {
  try {
    const u = new URL(address);
    if (u.host) {
      const at = address.toLowerCase().indexOf(u.host.toLowerCase());
      const local = ['localhost', '127.0.0.1', '[::1]'].includes(u.hostname);
      if (at >= 0) return { before: address.slice(0, at), host: address.slice(at, at + u.host.length), after: address.slice(at + u.host.length), local };
    }
    // A private-use scheme (`cursor://...`, `com.example.app:/cb`): the scheme names the program.
    return { before: '', host: `${u.protocol}`, after: address.slice(u.protocol.length), local: true };
  } catch {
    return { before: '', host: address, after: '', local: false };
  }
}

/**
 * The page's Content-Security-Policy with `form-action` widened to the client's redirect address:
 * the answer to the page's forms redirects (through /oauth/authorize) to the client, and browsers
 * apply `form-action` to every redirect of a form's navigation. Only a plain origin (or a private-use
 * scheme) is added; anything else leaves the policy as it is.
 */
function allowFormRedirect(res: Response, redirectUri: string): void {
  const current = res.getHeader('Content-Security-Policy');
  if (typeof current !== 'string') return;
  let source = '';
  try {
    const u = new URL(redirectUri);
    if ((u.protocol === 'https:' || u.protocol === 'http:') && /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9a-fA-F:]+\](:\d{1,5})?$/.test(u.host)) source = u.origin;
    else if (/^[a-z][a-z0-9+.-]*:$/i.test(u.protocol) && u.protocol !== 'javascript:' && u.protocol !== 'data:') source = u.protocol;
  } catch {
    return;
  }
  if (!source) return;
  res.setHeader('Content-Security-Policy', current.replace(/form-action 'self'/, `form-action 'self' ${source}`));
}

function hostOf(value: string | undefined): string {
  if (!value) return '';
  try {
    const u = new URL(value);
    return u.protocol === 'https:' || u.protocol === 'http:' ? u.host : '';
  } catch {
    return '';
  }
}

const byNamespace = new Map<string, { total: number }>();
for (const d of allToolDefinitions) byNamespace.set(d.namespace, { total: (byNamespace.get(d.namespace)?.total ?? 0) + 1 });

export function consentRoutes(options: ConsentOptions): express.Router {
  const { db, clock, logger, pages, credentials, oauth } = options;
  const router = pages.router();
  const views = pages.views(new URL('./pages', import.meta.url));

  /** The pending request of this browser for `uid`, or null after the 410 page. */
  const pending = async (req: Request, res: Response, uid: string): Promise<InteractionDetails | null> => {
    const details = await oauth.interaction(req, res);
    if (details && details.uid === uid) return details;
    pages.notice(res, 410, 'This connection request has ended', [
      'The request to connect is no longer waiting here: it expired (after 30 minutes), was already answered, or was started in another browser.',
      'Start connecting again from the app or tool you were connecting (for example, its “Connect” or “Sign in” button). Then sign in, if asked, in this same browser.',
    ]);
    return null;
  };

  /** Whether the request has a live member session (401 only: a 429 or another problem is left to `pages.member`). */
  const signedIn = async (req: Request): Promise<boolean> => {
    const token = sessionTokenOf(req);
    if (token === undefined) return false;
    try {
      await credentials.authenticateSession(token);
      return true;
    } catch (err) {
      if (err instanceof ServiceError && err.status === 401) return false;
      return true;
    }
  };

  const signInFirst = (res: Response, uid: string, details: InteractionDetails) => {
    pages.notice(
      res,
      401,
      'Sign in to approve this connection',
      [
        `${details.clientName} asks to connect to your workspace through its MCP server. Sign in first to see what it asks for, then approve or deny it.`,
        'We mail you a sign-in link. Open that link in this same browser: the request waits in this browser only (for 30 minutes) and the link brings you back to it. Opened elsewhere, it signs you in there but the request is not found.',
      ],
      undefined,
      signinLink(`${CONSENT_PATH}/${uid}`),
    );
  };

  const render = async (res: Response, page: MemberPage, details: InteractionDetails, status: number, choice: Choice, problem = '') => {
    const ws = page.workspaceId;
    const [workspace, members, types] = await Promise.all([
      db.sql.one<{ name: string; api_key_access: string }>(`SELECT name, api_key_access FROM workspaces WHERE id = ?`, [ws]),
      page.manage ? listWorkspaceMembers(db.sql, ws) : Promise.resolve([]),
      page.manage ? grantableResourceTypes(db.sql, ws) : Promise.resolve([]),
    ]);
    const mine = new Set(memberOperations(page.member.role));
    const toolsets = mcpToolsets.map((t) => {
      const defs = allToolDefinitions.filter((d) => d.namespace === t.name);
      const personal = defs.filter((d) => mine.has(d.operationId));
      return {
        name: t.name,
        label: namespaceLabel(t.name),
        description: t.description,
        total: defs.length,
        personal: personal.length,
        personalQueries: personal.filter((d) => d.kind === 'query').length,
        checked: choice.toolsets ? choice.toolsets.includes(t.name) : personal.length > 0,
      };
    });
    const cimd = /^https:\/\//.test(details.clientId);
    const html = views.render('consent', {
      action: `${CONSENT_PATH}/${details.uid}`,
      csrf: page.csrf,
      problem,
      workspace: workspace?.name ?? ws,
      member: { name: page.member.name, role: page.member.role },
      manage: page.manage,
      // Workspace access is a workspace credential like a key: not while the operator has API keys off or stopped.
      workspaceRefused: !page.manage ? 'Only owners and admins approve workspace access.' : workspace && workspace.api_key_access !== 'on' ? `Not available: ${WORKSPACE_ACCESS_OFF(workspace.api_key_access).replace(/^workspace access is not available: /, '')}.` : '',
      client: {
        name: details.clientName,
        id: details.clientId,
        metadataHost: cimd ? hostOf(details.clientId) : '',
        uri: hostOf(details.clientUri) ? details.clientUri : '',
        uriHost: hostOf(details.clientUri),
      },
      redirect: splitAddress(details.redirectUri),
      resource: details.resource,
      scopes: details.scopes.join(' ') || 'mcp',
      access: choice.access,
      readOnly: choice.readOnly,
      toolListing: choice.toolListing ?? 'compact',
      toolsets,
      grantsChooser: page.manage ? grantsChooserHtml({ resourceTypes: types, selected: choice.selection }) : '',
      delegationChooser: page.manage
        ? delegationChooserHtml({
            members: members.filter((m) => m.disabled_at === null).map((m) => ({ id: m.id, name: m.name, role: m.role })),
            mode: choice.delegationMode,
            delegates: choice.delegates,
            noun: 'connection',
          })
        : '',
    });
    allowFormRedirect(res, details.redirectUri);
    await page.send(status, { title: `Connect ${details.clientName}`, html });
  };

  /** The pending request and the signed-in member's page for a consent URL; undefined when an answer was sent instead. */
  const consentPage = async (req: Request<{ uid: string }>, res: Response) => {
    const uid = req.params.uid;
    if (!UID.test(uid)) return void pages.notFound(res);
    const details = await pending(req, res, uid);
    if (!details) return undefined;
    if (!(await signedIn(req))) return void signInFirst(res, uid, details);
    const page = await pages.member(req, res);
    return page ? { uid, details, page } : undefined;
  };

  router.get(`${CONSENT_PATH}/:uid`, async (req: Request<{ uid: string }>, res: Response) => {
    const found = await consentPage(req, res);
    if (!found) return;
    const { details, page } = found;
    await render(res, page, details, 200, { access: 'personal', toolsets: null, readOnly: false });
  });

  router.post(`${CONSENT_PATH}/:uid`, pages.protectForm, async (req: Request<{ uid: string }>, res: Response) => {
    const found = await consentPage(req, res);
    if (!found) return;
    const { details, page } = found;
    const body = (req.body ?? {}) as Record<string, unknown>;
    const log = { workspace_id: page.workspaceId, member_id: page.member.id, client_id: details.clientId };
    if (body.decision === 'deny') {
      logger.info(log, 'MCP connection denied on the consent page');
      return oauth.deny(req, res);
    }
    if (body.decision !== 'approve') return page.notice(400, 'Unknown answer', ['Approve or deny the connection with the buttons of the consent page.']);
    const access = body.access === 'workspace' ? 'workspace' : body.access === 'personal' || body.access === undefined ? 'personal' : null;
    const toolsets = formStrings(body.toolset);
    const readOnly = body.read_only === 'on';
    const toolListing: ToolListing = body.tool_listing === 'full' ? 'full' : 'compact';
    const choice: Choice = { access: access ?? 'personal', toolsets, readOnly, toolListing, selection: selectionFromForm(body) };
    if (access === null) return render(res, page, details, 400, choice, 'Choose personal or workspace access.');
    const mode = body.delegation;
    if (mode === 'none' || mode === 'all' || mode === 'selected') choice.delegationMode = mode;
    choice.delegates = formStrings(body.delegate);
    if (access === 'workspace' && !page.manage) {
      return render(res, page, details, 403, { ...choice, access: 'personal' }, 'Only owners and admins approve workspace access. Choose personal access (acting as you), or ask an owner or admin to connect the client.');
    }
    if (toolsets.some((t) => !toolsetNames.includes(t))) return render(res, page, details, 400, { ...choice, toolsets: null }, 'One of the chosen toolsets does not exist. Choose from the list.');
    if (!toolsets.length) return render(res, page, details, 400, choice, 'Choose at least one toolset the connection may use.');
    let connectionId: string;
    try {
      const workspace = access === 'workspace'
        ? { operations: operationsFromForm(body), resources: resourcesFromForm(body), delegation: delegationFromForm(body, 'the connection') }
        : {};
      if (access === 'workspace' && !workspace.operations!.length) throw new ChooserRefusal('Choose at least one operation the connection may call (all of a part of the API, or single operations).');
      const made = await db.tx((sql) =>
        createConnection(sql, {
          workspaceId: page.workspaceId,
          clientId: details.clientId,
          clientName: details.clientName,
          redirectUri: details.redirectUri,
          access,
          member: { id: page.member.id, name: page.member.name, role: page.member.role },
          toolsets,
          readOnly,
          toolListing,
          ...workspace,
          now: clock.now(),
        }),
      );
      connectionId = made.id;
      logger.info({ ...log, connection_id: made.id, access, operations: made.operations.length }, 'MCP connection approved on the consent page');
    } catch (err) {
      if (!(err instanceof ChooserRefusal) && !(err instanceof AdminError)) throw err;
      const message = err.message.charAt(0).toUpperCase() + err.message.slice(1) + (/[.!?]$/.test(err.message) ? '' : '.');
      return render(res, page, details, 400, choice, message);
    }
    try {
      await oauth.approve(req, res, { connectionId });
    } catch (err) {
      // No grant was made: the connection never gets a token; revoke it so the list does not show it as live.
      await revokeConnection(db, clock, connectionId, { actor: { type: 'system', label: 'the service (the authorization request had ended)' } }).catch(() => undefined);
      throw err;
    }
  });

  return router;
}
