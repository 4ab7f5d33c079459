import crypto from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Database } from '../db/database.ts';
import { findKeyForAuth, listKeyDelegateIds, listWorkspaceMembers, takeRateLimitToken, touchKeyUsage } from '../db/queries/credentials.ts';
import { type DbConnectionForAuth, findConnectionForAuth, listConnectionDelegateIds } from '../db/queries/connections.ts';
import { type ConnectionEndedReason, endConnection, findAccessToken, takeConnectionRateLimitToken, touchConnectionUsage } from '../db/queries/mcp.ts';
import { findSessionForAuth, revokeSessions, takeSessionRateLimitToken } from '../db/queries/sessions.ts';
import type { Delegation, MemberRole } from '../db/rows.ts';
import { type Access, type CatalogueEntry, catalogue, resourceTypes } from '../generated/catalogue.ts';
import type { Clock } from './clock.ts';
import { roleAccess } from './roles.ts';
import { forbidden, invalidKey, rateLimited } from './errors.ts';
import { randomIdPart, sha256Hex } from './ids.ts';
import { MCP_SCOPE, type McpResource } from './mcp/resource.ts';
import { toolDefinitionsFor, toolsetNames } from './mcp/tools.ts';

const TOKEN = /^wso_([0-9a-z]{24})_([A-Za-z0-9_-]{43})$/;
const SESSION_TOKEN = /^wss_([0-9a-z]{24})_([A-Za-z0-9_-]{43})$/;

/** What a sign-in session may call: the catalogued operations whose `security` lists SessionCookie (the generator allows that only on queries that can run as a member). */
export const sessionOperations: ReadonlySet<string> = new Set((catalogue as readonly CatalogueEntry[]).filter((e) => e.listed && e.sessions).map((e) => e.id));

const NO_KEY = 'No API key: send the header Authorization: Bearer <API key> (a workspace key, wso_...).';
const MALFORMED_KEY = 'The Authorization header must be exactly "Bearer <API key>", with a workspace key (wso_<24 characters>_<43 characters>).';

/** The 403 of every key of a workspace whose API keys the operator stopped (`workspaces.api_key_access = 'stopped'`). */
export const KEYS_STOPPED = 'API keys are stopped for this workspace: the operator has turned them off, so every key is refused until the operator turns them on again.';

/** The 400 of a request with more than one Authorization header (whichever comes first, none is used). */
export const TWO_AUTHORIZATION_HEADERS = 'The request has more than one Authorization header: send exactly one.';

/** How many times a request carries a header: Node keeps only the first Authorization in req.headers, rawHeaders has them all. */
export function headerCount(req: { rawHeaders: string[] }, name: string): number {
  let n = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() === name) n += 1;
  return n;
}

/**
 * The 403 of every workspace-access MCP connection of a workspace whose API keys the operator stopped: a
 * shared connection is a workspace credential like a key (personal connections act as their member and
 * keep working).
 */
export const CONNECTIONS_STOPPED =
  'API keys are stopped for this workspace, and with them its workspace-access (shared) MCP connections: the operator has turned them off, so this connection is refused until the operator turns them on again. Personal connections keep working.';

/** `api_keys.last_used_at` is written at most this often per key. */
export const KEY_USAGE_INTERVAL_MS = 60_000;

const SESSION_ENDED = 'The sign-in session is missing, expired or ended; ask an operator for a new sign-in link.';

export interface MemberInfo {
  readonly id: string;
  readonly name: string;
  readonly role: MemberRole;
  readonly disabled: boolean;
}

/** An authenticated API key or member session with everything authorization needs, cached per process. */
export interface Credential {
  /**
   * `key`: an API key. `session`: a member's sign-in session (cookie `wso_session`), acting as that
   * member. `connection`: an MCP connection's OAuth access token (personal access acts as its member
   * like a session; workspace access holds grants like a key). `system`: the service itself
   * (automation actions), never from a request.
   */
  readonly kind: 'key' | 'session' | 'connection' | 'system';
  /** The key id (`ak_...`), the session id (`ss_...`) of a session, or the connection id (`mc_...`): its rate-limit bucket. */
  readonly keyId: string;
  readonly workspaceId: string;
  readonly name: string;
  readonly operations: ReadonlySet<string>;
  readonly resources: ReadonlyMap<string, ReadonlySet<Access>>;
  readonly delegation: Delegation;
  readonly delegates: ReadonlySet<string>;
  /** Every member of the key's workspace, by id. */
  readonly members: ReadonlyMap<string, MemberInfo>;
  readonly authVersion: number;
  readonly secretHash: Buffer;
  /** Keys and workspace-access connections: the operator stopped the workspace's API keys (every request is refused with 403). */
  readonly keysStopped?: boolean;
  /** Sessions: the member the session acts for (always), and when it ends (Unix ms). */
  readonly sessionMember?: MemberInfo;
  readonly expiresAt?: number;
  /** Connections: what the member approved (the operations above are already narrowed to its toolsets and read-only choice). */
  readonly connection?: ConnectionInfo;
}

/** An MCP connection as its credential carries it. */
export interface ConnectionInfo {
  readonly id: string;
  /** `personal`: acts as the member who approved it, with their role's permissions; `workspace`: grants and delegation like a key. */
  readonly access: 'personal' | 'workspace';
  readonly toolsets: string[];
  readonly readOnly: boolean;
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

/** A new key secret: `wso_<key id part>_<256-bit random>`; only its SHA-256 is stored. */
export function newKeySecret(): { keyId: string; secret: string; secretHash: string } {
  const idPart = randomIdPart();
  const secret = `wso_${idPart}_${crypto.randomBytes(32).toString('base64url')}`;
  return { keyId: `ak_${idPart}`, secret, secretHash: sha256Hex(secret) };
}

/** A new session secret: `wss_<session id part>_<256-bit random>`; only its SHA-256 is stored. */
/** The session id a `wss_...` session token names, or null when it is not one. */
export function sessionIdOf(token: string): string | null {
  const parts = SESSION_TOKEN.exec(token);
  return parts ? `ss_${parts[1]}` : null;
}

export function newSessionSecret(): { sessionId: string; secret: string; secretHash: string } {
  const idPart = randomIdPart();
  const secret = `wss_${idPart}_${crypto.randomBytes(32).toString('base64url')}`;
  return { sessionId: `ss_${idPart}`, secret, secretHash: sha256Hex(secret) };
}

export interface RateLimitSettings {
  perSecond: number;
  burst: number;
}

/**
 * Authenticates bearer keys. Key material, grants and members are cached in memory; every request
 * still makes one database round trip that both takes a rate-limit token and proves the key is not
 * revoked, returning the workspace's auth version so a stale cache entry is reloaded at once.
 */
export class CredentialStore {
  // Bounded: the least recently used entries go first (a reload costs one read).
  private readonly cache = new LRUCache<string, Credential>({ max: 10_000 });
  private readonly sessions = new LRUCache<string, Credential>({ max: 10_000 });
  // Access tokens by SHA-256 (hex) of the token, checked (audience, issuer, scope); connections by id.
  private readonly accessTokens = new LRUCache<string, AccessTokenInfo>({ max: 10_000 });
  private readonly connections = new LRUCache<string, Credential>({ max: 10_000 });
  // When this process last recorded each key's use (the statement itself also skips recent ones).
  private readonly usage = new LRUCache<string, number>({ max: 10_000 });
  private readonly usageWrites = new Set<Promise<void>>();
  private readonly intervalUs: number;
  private readonly toleranceUs: number;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    limits: RateLimitSettings,
    /** The MCP endpoint's resource and issuer: access tokens must name them. */
    private readonly mcp?: McpResource,
  ) {
    this.intervalUs = Math.max(1, Math.round(1_000_000 / limits.perSecond));
    this.toleranceUs = this.intervalUs * Math.max(0, limits.burst - 1);
  }

  /** Resolves `Authorization: Bearer <key>` to a credential, or throws 401 / 429. */
  async authenticate(authorization: string | undefined): Promise<Credential> {
    const match = /^Bearer (\S+)$/i.exec(authorization ?? '');
    const token = match?.[1];
    const parts = token ? TOKEN.exec(token) : null;
    if (authorization === undefined || authorization.trim() === '') throw invalidKey(NO_KEY);
    if (!token || !parts) throw invalidKey(MALFORMED_KEY);
    const keyId = `ak_${parts[1]}`;
    const presented = crypto.createHash('sha256').update(token).digest();

    let credential: Credential | undefined = this.cache.get(keyId) ?? (await this.load(keyId));
    if (!credential || !crypto.timingSafeEqual(credential.secretHash, presented)) throw invalidKey();

    const nowUs = this.clock.now() * 1000;
    const bucket = await takeRateLimitToken(this.db.relaxed, { keyId, nowUs, intervalUs: this.intervalUs, toleranceUs: this.toleranceUs });
    if (!bucket) {
      this.cache.delete(keyId);
      throw invalidKey();
    }
    if (Number(bucket.auth_version) !== credential.authVersion) {
      credential = await this.load(keyId);
      if (!credential) throw invalidKey();
    }
    if (credential.keysStopped) throw forbidden(KEYS_STOPPED);
    if (!bucket.allowed) {
      const waitUs = Number(bucket.tat) - this.toleranceUs - nowUs;
      throw rateLimited(Math.max(1, Math.ceil(waitUs / 1_000_000)));
    }
    this.noteUsage(keyId, nowUs / 1000);
    return credential;
  }

  /**
   * Records a key's use (`last_used_at`) at most once a minute per key, in the background: the request
   * never waits for it, and a failed write is only retried at the next use after the interval.
   */
  private noteUsage(keyId: string, now: number): void {
    const last = this.usage.get(keyId);
    if (last !== undefined && now - last < KEY_USAGE_INTERVAL_MS) return;
    this.usage.set(keyId, now);
    const write = touchKeyUsage(this.db.relaxed, keyId, now, KEY_USAGE_INTERVAL_MS).then(
      () => undefined,
      () => undefined,
    );
    this.usageWrites.add(write);
    void write.finally(() => this.usageWrites.delete(write));
  }

  /** Resolves once the usage writes started so far are done (tests, and before closing the database). */
  async usageWritten(): Promise<void> {
    await Promise.all([...this.usageWrites]);
  }

  /**
   * Resolves a `wso_session` cookie value to a session credential, or throws 401 / 429. Like a key:
   * one statement takes the rate-limit token and proves the session is live (not revoked or expired,
   * its member active and in the role it signed in with). Unlike a key, it does not end when the
   * workspace's auth version moves (keys, other members, rules): it holds nothing those change.
   */
  async authenticateSession(token: string): Promise<Credential> {
    const sessionId = sessionIdOf(token);
    if (!sessionId) throw invalidKey(SESSION_ENDED);
    const presented = crypto.createHash('sha256').update(token).digest();
    const now = this.clock.now();
    const credential = this.sessions.get(sessionId) ?? (await this.loadSession(sessionId, now));
    if (!credential || !crypto.timingSafeEqual(credential.secretHash, presented) || credential.expiresAt! <= now) throw invalidKey(SESSION_ENDED);
    const nowUs = now * 1000;
    const bucket = await takeSessionRateLimitToken(this.db.relaxed, { sessionId, now, nowUs, intervalUs: this.intervalUs, toleranceUs: this.toleranceUs });
    if (!bucket) {
      this.sessions.delete(sessionId);
      // Ended for good: a member whose role changes back, or who is enabled again, does not revive it.
      await revokeSessions(this.db.relaxed, { id: sessionId }, now);
      throw invalidKey(SESSION_ENDED);
    }
    if (!bucket.allowed) {
      const waitUs = Number(bucket.tat) - this.toleranceUs - nowUs;
      throw rateLimited(Math.max(1, Math.ceil(waitUs / 1_000_000)));
    }
    return credential;
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
    const bucket = await takeConnectionRateLimitToken(this.db.relaxed, { connectionId: info.connectionId, tokenHash, now, nowUs, intervalUs: this.intervalUs, toleranceUs: this.toleranceUs });
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
      const waitUs = Number(bucket.tat) - this.toleranceUs - nowUs;
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
    if (!this.mcp) throw new AccessTokenError(401, 'invalid_token', TOKEN_OTHER_RESOURCE);
    const aud = payload.aud;
    const audiences = Array.isArray(aud) ? aud : [aud];
    if (audiences.length !== 1 || audiences[0] !== this.mcp.resource) throw new AccessTokenError(401, 'invalid_token', TOKEN_OTHER_RESOURCE);
    if (payload.iss !== this.mcp.issuer) throw new AccessTokenError(401, 'invalid_token', TOKEN_OTHER_ISSUER);
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
    const connection: ConnectionInfo = { id: row.id, access: row.access, toolsets, readOnly, clientName: row.client_name, clientId: row.client_id };
    const base = { kind: 'connection' as const, keyId: row.id, workspaceId: row.workspace_id, name: row.client_name, operations, authVersion: Number(row.auth_version), secretHash: Buffer.alloc(0), connection };
    if (row.access === 'personal') {
      const member: MemberInfo = { id: row.member_id!, name: row.member_name!, role: row.member_role_now!, disabled: false };
      const resources = new Map<string, ReadonlySet<Access>>();
      for (const type of resourceTypes) resources.set(type, new Set(roleAccess(member.role, type)));
      return { ...base, resources, delegation: 'selected', delegates: new Set([member.id]), members: new Map([[member.id, member]]), sessionMember: member };
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
    const key = `connection:${id}`;
    const last = this.usage.get(key);
    if (last !== undefined && now - last < CONNECTION_USAGE_INTERVAL_MS) return;
    this.usage.set(key, now);
    const write = touchConnectionUsage(this.db.relaxed, id, now, CONNECTION_USAGE_INTERVAL_MS).then(
      () => undefined,
      () => undefined,
    );
    this.usageWrites.add(write);
    void write.finally(() => this.usageWrites.delete(write));
  }

  /**
   * The credential `id` names (a key `ak_`, a session `ss_`, a connection `mc_`) as the database holds
   * it now, or undefined when it is revoked, ended or unknown: what server/atUse.ts judges work and
   * URLs by that outlive the request that made them.
   */
  async current(id: string): Promise<Credential | undefined> {
    if (id.startsWith('ak_')) return this.load(id);
    if (id.startsWith('ss_')) return this.loadSession(id, this.clock.now());
    if (id.startsWith('mc_')) return this.loadConnection(id, this.clock.now());
    return undefined;
  }

  /** Drops every cached credential (tests and admin changes made in this process). */
  invalidate(): void {
    this.cache.clear();
    this.sessions.clear();
    this.accessTokens.clear();
    this.connections.clear();
  }

  private async loadSession(sessionId: string, now: number): Promise<Credential | undefined> {
    const row = await findSessionForAuth(this.db.sql, sessionId);
    if (!row || row.revoked_at !== null || Number(row.expires_at) <= now) return undefined;
    if (row.member_disabled_at !== null || row.role_now !== row.member_role) {
      await revokeSessions(this.db.relaxed, { id: sessionId }, now);
      return undefined;
    }
    const member: MemberInfo = { id: row.member_id, name: row.member_name, role: row.role_now, disabled: false };
    // Record operations still need the member's role to allow the access they declare.
    const resources = new Map<string, ReadonlySet<Access>>();
    for (const type of resourceTypes) resources.set(type, new Set(roleAccess(member.role, type)));
    const credential: Credential = {
      kind: 'session',
      keyId: sessionId,
      workspaceId: row.workspace_id,
      name: `session of ${member.name}`,
      operations: sessionOperations,
      resources,
      delegation: 'selected',
      delegates: new Set([member.id]),
      members: new Map([[member.id, member]]),
      authVersion: Number(row.auth_version),
      secretHash: Buffer.from(row.secret_hash, 'hex'),
      sessionMember: member,
      expiresAt: Number(row.expires_at),
    };
    this.sessions.set(sessionId, credential);
    return credential;
  }

  private async load(keyId: string): Promise<Credential | undefined> {
    const row = await findKeyForAuth(this.db.sql, keyId);
    if (!row || row.revoked_at !== null) {
      this.cache.delete(keyId);
      return undefined;
    }
    const [delegates, members] = await Promise.all([
      row.delegation === 'selected' ? listKeyDelegateIds(this.db.sql, keyId) : Promise.resolve([]),
      listWorkspaceMembers(this.db.sql, row.workspace_id),
    ]);
    const resources = new Map<string, ReadonlySet<Access>>();
    for (const [type, access] of Object.entries(JSON.parse(row.resources) as Record<string, Access[]>)) resources.set(type, new Set(access));
    const credential: Credential = {
      kind: 'key',
      keyId,
      workspaceId: row.workspace_id,
      name: row.name,
      operations: new Set(JSON.parse(row.operations) as string[]),
      resources,
      delegation: row.delegation,
      delegates: new Set(delegates),
      members: new Map(members.map((m) => [m.id, { id: m.id, name: m.name, role: m.role, disabled: m.disabled_at !== null }])),
      authVersion: Number(row.auth_version),
      secretHash: Buffer.from(row.secret_hash, 'hex'),
      keysStopped: row.api_key_access === 'stopped',
    };
    this.cache.set(keyId, credential);
    return credential;
  }
}
