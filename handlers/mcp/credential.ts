/**
 * The credential of an MCP connection: an OAuth access token this service's authorization server issued
 * (oauth/), sent to `/v1/mcp` (and to the two discovery operations) as `Bearer`, or as `DPoP` with
 * a proof for a token bound to a key. A kind of credential registered with the kernel's store
 * (`CredentialStore.registerKind`): the store asks it for a connection by id (`mc_...`) and to forget what
 * it caches; the rate limit and usage writes are the store's, as for keys.
 */
import { LRUCache } from 'lru-cache';
import type { Database } from '../../db/database.ts';
import { listWorkspaceMembers } from '../../db/queries/credentials.ts';
import { type DbConnectionForAuth, findConnectionForAuth, listConnectionDelegateIds } from '../../db/queries/connections.ts';
import { type ConnectionEndedReason, endConnection, findAccessToken, takeConnectionRateLimitToken, touchConnectionUsage } from '../../db/queries/mcp.ts';
import { type Access, resourceTypes } from '../../generated/catalogue.ts';
import type { Clock } from '../../server/clock.ts';
import type { Credential, CredentialKind, CredentialStore, MemberInfo } from '../../server/credentials.ts';
import { forbidden, rateLimited } from '../../server/errors.ts';
import { sha256Hex } from '../../server/ids.ts';
import { roleAccess } from '../../server/roles.ts';
import { MCP_SCOPE, type McpResource } from './resource.ts';
import { listingOf, type ToolListing } from './listing.ts';
import { toolDefinitionsFor, toolsetNames } from './tools.ts';

/**
 * The 403 of every workspace-access MCP connection of a workspace whose API keys the operator stopped: a
 * shared connection is a workspace credential like a key (personal connections act as their member and
 * keep working).
 */
export const CONNECTIONS_STOPPED =
  'API keys are stopped for this workspace, and with them its workspace-access (shared) MCP connections: the operator has turned them off, so this connection is refused until the operator turns them on again. Personal connections keep working.';

/** An MCP connection as its credential carries it. */
export interface ConnectionInfo {
  readonly id: string;
  /** `personal`: acts as the member who approved it, with their role's permissions; `workspace`: grants and delegation like a key. */
  readonly access: 'personal' | 'workspace';
  readonly toolsets: string[];
  readonly readOnly: boolean;
  /** How `tools/list` lists the connection's tools. */
  readonly toolListing: ToolListing;
  readonly clientName: string;
  readonly clientId: string;
}

/** The error codes of `/v1/mcp` refusals at the HTTP level (RFC 6750 §3.1, RFC 9449 §7.1). */
export type AccessTokenErrorCode = 'invalid_token' | 'insufficient_scope' | 'invalid_request' | 'invalid_dpop_proof';

/** Why `/v1/mcp` refuses an access token: the status, the RFC 6750 error code of the challenge, and a message. */
export class AccessTokenError extends Error {
  constructor(
    readonly status: 400 | 401 | 403,
    /** The body's `error`. */
    readonly code: AccessTokenErrorCode,
    message: string,
    /** The challenge's `error` parameter; absent when the request carried no credentials (RFC 6750 §3.1). */
    readonly challengeError: AccessTokenErrorCode | null = code,
    /** The scheme of the challenge: `DPoP` (RFC 9449 §7.1) when the refusal is about a DPoP-bound token or a DPoP proof. */
    readonly scheme: 'Bearer' | 'DPoP' = 'Bearer',
  ) {
    super(message);
  }
}

/**
 * How the request sent its access token: `bearer` (`Authorization: Bearer`), or `dpop` (`Authorization:
 * DPoP`) with `verifyProof`, which checks the request's DPoP proof against the token's key thumbprint.
 */
export interface TokenSender {
  scheme: 'bearer' | 'dpop';
  verifyProof?: (jkt: string) => Promise<void>;
}

/** `mcp_connections.last_used_at` is written at most this often per connection. */
export const CONNECTION_USAGE_INTERVAL_MS = 60_000;

/** An OAuth access token as sent (RFC 6750 b64token), of a sane length. */
const ACCESS_TOKEN = /^[A-Za-z0-9\-._~+/]{16,1024}=*$/;

export const TOKEN_MALFORMED = 'The access token is malformed: send the token the authorization server issued, as Authorization: Bearer <token>.';
export const TOKEN_UNKNOWN = 'The access token is unknown or was revoked; get a new one from the authorization server.';
export const TOKEN_EXPIRED = 'The access token has expired; refresh it or connect again.';
export const TOKEN_OTHER_RESOURCE = 'The access token was issued for another resource, not this MCP endpoint.';
export const TOKEN_OTHER_ISSUER = 'The access token was issued by another authorization server.';
export const TOKEN_NO_SCOPE = 'The access token lacks the scope mcp.';
export const CONNECTION_ENDED = 'The connection of this access token was revoked or has ended (its member was disabled or changed role); connect again.';
export const TOKEN_DPOP_BOUND = 'The access token is bound to a DPoP key: send it as Authorization: DPoP <token> with a DPoP proof signed by that key (RFC 9449).';
export const TOKEN_NOT_DPOP_BOUND = 'The access token is not bound to a DPoP key: send it as Authorization: Bearer <token>.';

interface AccessTokenInfo {
  connectionId: string;
  /** Unix ms. */
  expiresAt: number;
  clientId: string;
  /** The RFC 7638 thumbprint of the key the token is bound to (DPoP, `cnf.jkt`); null for a bearer token. */
  jkt: string | null;
}

/** The connection an MCP credential carries, or undefined for any other credential. */
export const connectionInfoOf = (credential: Credential): ConnectionInfo | undefined => (credential.kind === 'connection' ? (credential.extra as ConnectionInfo) : undefined);

/** MCP connections as a kind of credential: access tokens checked, connections cached, both forgotten on change. */
export class ConnectionCredentials implements CredentialKind {
  readonly idPrefix = 'mc_';
  // Access tokens by SHA-256 (hex) of the token, checked (audience, issuer, scope); connections by id.
  private readonly accessTokens = new LRUCache<string, AccessTokenInfo>({ max: 10_000 });
  private readonly connections = new LRUCache<string, Credential>({ max: 10_000 });

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly store: CredentialStore,
    /** The MCP endpoint's resource and issuer: access tokens must name them. */
    private readonly resource: McpResource,
  ) {}

  current(id: string): Promise<Credential | undefined> {
    return this.loadConnection(id, this.clock.now());
  }

  invalidate(): void {
    this.accessTokens.clear();
    this.connections.clear();
  }

  /**
   * Resolves an OAuth access token (sent to `/v1/mcp` as a Bearer token) to its connection's
   * credential, or throws AccessTokenError (401 / 403) or 429. The token must be the authorization
   * server's record (stored hashed), unexpired, for this resource (audience) from this issuer, with
   * the scope mcp; then one statement proves the token and the connection live (not revoked; a
   * personal connection's member active and in the role they approved it with) and takes a token from
   * the connection's rate-limit bucket.
   */
  async authenticateAccessToken(token: string, sender: TokenSender = { scheme: 'bearer' }): Promise<Credential> {
    const dpop = sender.scheme === 'dpop' ? 'DPoP' : 'Bearer';
    if (!ACCESS_TOKEN.test(token)) throw new AccessTokenError(401, 'invalid_token', TOKEN_MALFORMED, 'invalid_token', dpop);
    const tokenHash = sha256Hex(token);
    const now = this.clock.now();
    let info: AccessTokenInfo;
    try {
      info = this.accessTokens.get(tokenHash) ?? (await this.loadAccessToken(tokenHash, now));
    } catch (err) {
      if (err instanceof AccessTokenError && dpop === 'DPoP') throw new AccessTokenError(err.status, err.code, err.message, err.challengeError, 'DPoP');
      throw err;
    }
    if (info.expiresAt <= now) {
      this.accessTokens.delete(tokenHash);
      throw new AccessTokenError(401, 'invalid_token', TOKEN_EXPIRED, 'invalid_token', dpop);
    }
    // A token bound to a key (RFC 9449): only with the DPoP scheme and a proof by that key; a stolen token alone is refused.
    if (info.jkt !== null) {
      if (sender.scheme !== 'dpop' || !sender.verifyProof) throw new AccessTokenError(401, 'invalid_token', TOKEN_DPOP_BOUND, 'invalid_token', 'DPoP');
      await sender.verifyProof(info.jkt);
    } else if (sender.scheme === 'dpop') {
      throw new AccessTokenError(401, 'invalid_token', TOKEN_NOT_DPOP_BOUND, 'invalid_token', 'DPoP');
    }
    let credential = this.connections.get(info.connectionId) ?? (await this.loadConnection(info.connectionId, now));
    if (!credential) throw new AccessTokenError(401, 'invalid_token', CONNECTION_ENDED);
    const nowUs = now * 1000;
    const bucket = await takeConnectionRateLimitToken(this.db.relaxed, { connectionId: info.connectionId, tokenHash, now, nowUs, intervalUs: this.store.intervalUs, toleranceUs: this.store.toleranceUs });
    if (!bucket) {
      this.accessTokens.delete(tokenHash);
      this.connections.delete(info.connectionId);
      // Which of the two ended: the token (revoked, expired) or the connection (revoked, member changed).
      if (!(await findAccessToken(this.db.sql, tokenHash))) throw new AccessTokenError(401, 'invalid_token', TOKEN_UNKNOWN);
      await this.loadConnection(info.connectionId, now);
      this.connections.delete(info.connectionId);
      throw new AccessTokenError(401, 'invalid_token', CONNECTION_ENDED);
    }
    if (Number(bucket.auth_version) !== credential.authVersion) {
      credential = await this.loadConnection(info.connectionId, now);
      if (!credential) throw new AccessTokenError(401, 'invalid_token', CONNECTION_ENDED);
    }
    if (credential.keysStopped) throw forbidden(CONNECTIONS_STOPPED);
    if (!bucket.allowed) {
      const waitUs = Number(bucket.tat) - this.store.toleranceUs - nowUs;
      throw rateLimited(Math.max(1, Math.ceil(waitUs / 1_000_000)));
    }
    this.noteConnectionUsage(info.connectionId, now);
    return credential;
  }

  /** Reads and checks an access token's record; caches it until it expires. Throws AccessTokenError when it is not one for this endpoint. */
  private async loadAccessToken(tokenHash: string, now: number): Promise<AccessTokenInfo> {
    const row = await findAccessToken(this.db.sql, tokenHash);
    if (!row || row.consumed_at !== null) throw new AccessTokenError(401, 'invalid_token', TOKEN_UNKNOWN);
    let payload: Record<string, unknown>;
    try {
      payload = JSON.parse(row.payload) as Record<string, unknown>;
    } catch {
      throw new AccessTokenError(401, 'invalid_token', TOKEN_UNKNOWN);
    }
    const expiresAt = Math.min(
      typeof payload.exp === 'number' ? payload.exp * 1000 : Number.POSITIVE_INFINITY,
      row.expires_at === null ? Number.POSITIVE_INFINITY : Number(row.expires_at),
    );
    if (!Number.isFinite(expiresAt) || expiresAt <= now) throw new AccessTokenError(401, 'invalid_token', TOKEN_EXPIRED);
        const aud = payload.aud;
    const audiences = Array.isArray(aud) ? aud : [aud];
    if (audiences.length !== 1 || audiences[0] !== this.resource.resource) throw new AccessTokenError(401, 'invalid_token', TOKEN_OTHER_RESOURCE);
    if (payload.iss !== this.resource.issuer) throw new AccessTokenError(401, 'invalid_token', TOKEN_OTHER_ISSUER);
    const scopes = typeof payload.scope === 'string' ? payload.scope.split(' ') : [];
    if (!scopes.includes(MCP_SCOPE)) throw new AccessTokenError(403, 'insufficient_scope', TOKEN_NO_SCOPE);
    if (typeof payload.accountId !== 'string' || !payload.accountId.startsWith('mc_')) throw new AccessTokenError(401, 'invalid_token', TOKEN_UNKNOWN);
    const jkt = typeof payload.jkt === 'string' && payload.jkt !== '' ? payload.jkt : null;
    const info: AccessTokenInfo = { connectionId: payload.accountId, expiresAt, clientId: typeof payload.clientId === 'string' ? payload.clientId : '', jkt };
    this.accessTokens.set(tokenHash, info, { ttl: Math.max(1, Math.min(expiresAt - now, 3_600_000)) });
    return info;
  }

  /**
   * The credential of a live connection (cached), or undefined when it is gone or revoked. A personal
   * connection whose member is disabled or no longer in the role they approved it with is ended here,
   * for good (as such a session is).
   */
  private async loadConnection(id: string, now: number): Promise<Credential | undefined> {
    const row = await findConnectionForAuth(this.db.sql, id);
    if (!row || row.revoked_at !== null) {
      this.connections.delete(id);
      return undefined;
    }
    const reason: ConnectionEndedReason | null =
      row.access !== 'personal'
        ? null
        : row.member_id === null || row.member_role_now === null
          ? 'member_gone'
          : row.member_disabled_at !== null
            ? 'member_disabled'
            : row.member_role !== null && row.member_role !== row.member_role_now
              ? 'member_role_changed'
              : null;
    if (reason) {
      await endConnection(this.db.relaxed, id, now, reason);
      this.connections.delete(id);
      return undefined;
    }
    const credential = await this.connectionCredential(row);
    this.connections.set(id, credential);
    return credential;
  }

  private async connectionCredential(row: DbConnectionForAuth): Promise<Credential> {
    const parsedToolsets = JSON.parse(row.toolsets) as unknown;
    const toolsets = Array.isArray(parsedToolsets) ? parsedToolsets.filter((t): t is string => typeof t === 'string' && toolsetNames.includes(t)) : [...toolsetNames];
    const readOnly = row.read_only === true || row.read_only === 1;
    // What the connection may call: its frozen operations, narrowed to its toolsets and read-only choice (its tools).
    const operations = new Set(toolDefinitionsFor(JSON.parse(row.operations) as string[], { toolsets, readOnly }).map((d) => d.operationId));
    const connection: ConnectionInfo = { id: row.id, access: row.access, toolsets, readOnly, toolListing: listingOf(row.tool_listing), clientName: row.client_name, clientId: row.client_id };
    const base = { kind: 'connection', noun: 'connection', keyId: row.id, workspaceId: row.workspace_id, name: row.client_name, operations, authVersion: Number(row.auth_version), secretHash: Buffer.alloc(0), extra: connection };
    if (row.access === 'personal') {
      const member: MemberInfo = { id: row.member_id!, name: row.member_name!, role: row.member_role_now!, disabled: false };
      const resources = new Map<string, ReadonlySet<Access>>();
      for (const type of resourceTypes) resources.set(type, new Set(roleAccess(member.role, type)));
      return { ...base, personal: true, resources, delegation: 'selected', delegates: new Set([member.id]), members: new Map([[member.id, member]]), sessionMember: member };
    }
    const [delegates, members] = await Promise.all([
      row.delegation === 'selected' ? listConnectionDelegateIds(this.db.sql, row.id) : Promise.resolve([]),
      listWorkspaceMembers(this.db.sql, row.workspace_id),
    ]);
    const resources = new Map<string, ReadonlySet<Access>>();
    for (const [type, access] of Object.entries(JSON.parse(row.resources) as Record<string, Access[]>)) resources.set(type, new Set(access));
    return {
      ...base,
      resources,
      delegation: row.delegation,
      delegates: new Set(delegates),
      members: new Map(members.map((m) => [m.id, { id: m.id, name: m.name, role: m.role, disabled: m.disabled_at !== null }])),
      keysStopped: row.api_key_access === 'stopped',
    };
  }

  /** Records a connection's use (`last_used_at`) at most once a minute per connection, in the background (as for keys). */
  private noteConnectionUsage(id: string, now: number): void {
    this.store.noteUse(`connection:${id}`, now, CONNECTION_USAGE_INTERVAL_MS, () => touchConnectionUsage(this.db.relaxed, id, now, CONNECTION_USAGE_INTERVAL_MS));
  }
}
