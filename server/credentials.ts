import crypto from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Database } from '../db/database.ts';
import { findKeyForAuth, listKeyDelegateIds, listWorkspaceMembers, takeRateLimitToken, touchKeyUsage } from '../db/queries/credentials.ts';
import { findSessionForAuth, revokeSessions, takeSessionRateLimitToken } from '../db/queries/sessions.ts';
import type { Delegation, MemberRole } from '../db/rows.ts';
import { type Access, type CatalogueEntry, catalogue, resourceTypes } from '../generated/catalogue.ts';
import type { Clock } from './clock.ts';
import { roleAccess } from './roles.ts';
import { forbidden, invalidKey, rateLimited } from './errors.ts';
import { randomIdPart, sha256Hex } from './ids.ts';

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
   * member. `system`: the service itself (automation actions), never from a request. A module may add
   * a kind of its own (`connection`: an MCP connection's OAuth access token) with `registerKind`.
   */
  readonly kind: 'key' | 'session' | 'system' | (string & {});
  /** The key id (`ak_...`), the session id (`ss_...`) of a session, or a module kind's id (`mc_...`): its rate-limit bucket. */
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
  /** Keys and workspace-wide credentials of a module: the operator stopped the workspace's API keys (every request is refused with 403). */
  readonly keysStopped?: boolean;
  /** Sessions and personal credentials: the member it acts for (always), and for a session when it ends (Unix ms). */
  readonly sessionMember?: MemberInfo;
  readonly expiresAt?: number;
  /** What refusals call a module kind's credential (`connection`: "This connection is not granted …"); a key's is `key`. */
  readonly noun?: string;
  /** A module kind's credential that acts only as `sessionMember`, with that member's role (a personal MCP connection). */
  readonly personal?: boolean;
  /** What the module of its kind keeps with it (an MCP connection's client, toolsets), for that module only. */
  readonly extra?: unknown;
}

/**
 * A kind of credential a module adds (an MCP connection's access token): the module authenticates its
 * own requests; the store asks it for a credential by id (server/atUse.ts) and to forget what it caches.
 */
export interface CredentialKind {
  /** The id prefix of its credentials (`mc_`). */
  readonly idPrefix: string;
  /** The credential `id` names as the database holds it now, or undefined when it is ended or unknown. */
  current(id: string): Promise<Credential | undefined>;
  /** Drops what it caches (tests and admin changes made in this process). */
  invalidate(): void;
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
  private readonly kinds: CredentialKind[] = [];
  // When this process last recorded each key's use (the statement itself also skips recent ones).
  private readonly usage = new LRUCache<string, number>({ max: 10_000 });
  private readonly usageWrites = new Set<Promise<void>>();
  /** The per-credential rate limit (GCRA): microseconds per request, and the burst's tolerance; module kinds take their tokens with these. */
  readonly intervalUs: number;
  readonly toleranceUs: number;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    limits: RateLimitSettings,
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

  /**
   * Records a use of a module kind's credential (`write`, e.g. its `last_used_at`) at most once per
   * `intervalMs` per `key`, in the background, as for keys: the request never waits for it.
   */
  noteUse(key: string, now: number, intervalMs: number, write: () => Promise<unknown>): void {
    const last = this.usage.get(key);
    if (last !== undefined && now - last < intervalMs) return;
    this.usage.set(key, now);
    const done = write().then(
      () => undefined,
      () => undefined,
    );
    this.usageWrites.add(done);
    void done.finally(() => this.usageWrites.delete(done));
  }

  /** Adds a module's kind of credential (its `current` and `invalidate`). */
  registerKind(kind: CredentialKind): void {
    if (this.kinds.some((k) => k.idPrefix === kind.idPrefix)) throw new Error(`two credential kinds use the id prefix ${kind.idPrefix}`);
    this.kinds.push(kind);
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
   * The credential `id` names (a key `ak_`, a session `ss_`, a module kind's, e.g. a connection `mc_`) as the database holds
   * it now, or undefined when it is revoked, ended or unknown: what server/atUse.ts judges work and
   * URLs by that outlive the request that made them.
   */
  async current(id: string): Promise<Credential | undefined> {
    if (id.startsWith('ak_')) return this.load(id);
    if (id.startsWith('ss_')) return this.loadSession(id, this.clock.now());
    return this.kinds.find((k) => id.startsWith(k.idPrefix))?.current(id);
  }

  /** Drops every cached credential (tests and admin changes made in this process). */
  invalidate(): void {
    this.cache.clear();
    this.sessions.clear();
    for (const kind of this.kinds) kind.invalidate();
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
