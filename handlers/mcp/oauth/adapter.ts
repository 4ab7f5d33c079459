/**
 * oidc-provider's storage on the `oauth_records` table (SQLite and PostgreSQL), one adapter class per
 * model name (`Session`, `Interaction`, `Grant`, `Client`, `AuthorizationCode`, `AccessToken`,
 * `RefreshToken`, ...).
 *
 * - Every record is keyed by (model, SHA-256 of its id). A token's, code's, session's or
 *   interaction's id IS the secret (the opaque token value, the cookie value, the uid in the URL), so
 *   the id never reaches the table: the payload is stored with every occurrence of the id replaced by
 *   a marker (the `jti`, an interaction's `returnTo`), and `find` puts the id back from the value the
 *   caller already holds. An interaction's copy of its session's cookie value is dropped (oidc-provider
 *   never reads it back).
 * - `grant_id` stays in clear (a grant's own row holds its id there too), so every record of a grant
 *   goes at once (`revokeByGrantId`: refresh replay, revocation of a connection).
 * - A client's secret is stored as `sha256:<hex>`; `compareClientSecret` is replaced to compare hashes
 *   (see index.ts). The registration answer shows the secret once, from memory.
 * - The payload carries `iss` (this issuer), so a token minted by another issuer sharing the tables is
 *   never taken for ours.
 * - `expires_at` (ms, from the service clock) drives `find` and the `oauth.prune` job; `consume` is a
 *   compare-and-set: the loser of two concurrent uses of one refresh token or code sees a replay (the
 *   grant is revoked and the call fails with invalid_grant).
 */
import type { Adapter, AdapterPayload, errors as OidcErrors } from 'oidc-provider';
import type { Database } from '../../../db/database.ts';
import type { Clock } from '../../../server/clock.ts';
import { sha256Hex } from '../../../server/ids.ts';

/** Stands for the record's id inside a stored payload. */
const ID_MARKER = '${oauth-record-id}';

export const CLIENT_SECRET_PREFIX = 'sha256:';

/** The stored form of a client secret. */
export const hashClientSecret = (secret: string): string => `${CLIENT_SECRET_PREFIX}${sha256Hex(secret)}`;

/** Records that belong to a grant and die with it. */
const GRANT_BOUND = new Set(['AccessToken', 'RefreshToken', 'AuthorizationCode']);

interface StoredRow {
  payload: string;
  expires_at: number | null;
  consumed_at: number | null;
}

/** The adapter class oidc-provider instantiates per model (`new Adapter('AccessToken')`). */
export function knexAdapterFor(db: Database, clock: Clock, issuer: string, errors: typeof OidcErrors): new (model: string) => Adapter {
  const revokeGrant = (grantId: string): Promise<void> => deleteGrantRecords(db, grantId);

  return class OAuthRecords implements Adapter {
    constructor(private readonly model: string) {}

    async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
      const stored: AdapterPayload = { ...payload, iss: issuer };
      delete stored.jti;
      if (this.model === 'Interaction' && stored.session && typeof stored.session === 'object') {
        const { cookie: _cookie, ...session } = stored.session as Record<string, unknown>;
        stored.session = session;
      }
      if (this.model === 'Client' && typeof stored.client_secret === 'string' && !stored.client_secret.startsWith(CLIENT_SECRET_PREFIX)) {
        stored.client_secret = hashClientSecret(stored.client_secret);
      }
      const text = JSON.stringify(stored).split(id).join(ID_MARKER);
      const grantId = this.model === 'Grant' ? id : typeof payload.grantId === 'string' ? payload.grantId : null;
      const uidHash = this.model === 'Session' && typeof payload.uid === 'string' ? sha256Hex(payload.uid) : null;
      const expiresAt = typeof expiresIn === 'number' ? clock.now() + expiresIn * 1000 : null;
      if (grantId !== null && GRANT_BOUND.has(this.model)) {
        // Only while the grant lives: a token saved after its grant was revoked (a refresh that raced a
        // replay) is refused, not stored. The grant's lock orders this against deleteGrantRecords.
        const stored = await db.tx(async (sql) => {
          await db.lock(sql, grantLockKey(grantId));
          return sql.run(
            `INSERT INTO oauth_records (model, id_hash, grant_id, uid_hash, payload, expires_at)
             SELECT CAST(? AS VARCHAR(32)), CAST(? AS VARCHAR(64)), CAST(? AS VARCHAR(64)), CAST(? AS VARCHAR(64)), CAST(? AS TEXT), CAST(? AS BIGINT)
             WHERE EXISTS (SELECT 1 FROM oauth_records WHERE model = 'Grant' AND grant_id = ?)
             ON CONFLICT (model, id_hash) DO UPDATE SET payload = excluded.payload, expires_at = excluded.expires_at`,
            [this.model, sha256Hex(id), grantId, uidHash, text, expiresAt, grantId],
          );
        });
        if (stored === 0) throw new errors.InvalidGrant('grant revoked');
        return;
      }
      await db.sql.run(
        `INSERT INTO oauth_records (model, id_hash, grant_id, uid_hash, payload, expires_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (model, id_hash) DO UPDATE SET grant_id = excluded.grant_id, uid_hash = excluded.uid_hash, payload = excluded.payload, expires_at = excluded.expires_at`,
        [this.model, sha256Hex(id), grantId, uidHash, text, expiresAt],
      );
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      const row = await db.sql.one<StoredRow>(`SELECT payload, expires_at, consumed_at FROM oauth_records WHERE model = ? AND id_hash = ?`, [this.model, sha256Hex(id)]);
      return this.restore(row, id);
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      const row = await db.sql.one<StoredRow & { id: string }>(`SELECT payload, expires_at, consumed_at FROM oauth_records WHERE model = ? AND uid_hash = ?`, [this.model, sha256Hex(uid)]);
      // A session found by uid: its id (the cookie value) is not known here, and the caller (back-channel
      // logout, not used by this service) does not need it.
      return this.restore(row, null);
    }

    async findByUserCode(): Promise<AdapterPayload | undefined> {
      return undefined; // no device flow
    }

    async consume(id: string): Promise<void> {
      const idHash = sha256Hex(id);
      const changed = await db.sql.run(`UPDATE oauth_records SET consumed_at = ? WHERE model = ? AND id_hash = ? AND consumed_at IS NULL`, [clock.now(), this.model, idHash]);
      if (changed === 1) return;
      // Consumed in the meantime (a concurrent use of the same refresh token or code): a replay.
      const row = await db.sql.one<{ grant_id: string | null }>(`SELECT grant_id FROM oauth_records WHERE model = ? AND id_hash = ?`, [this.model, idHash]);
      if (row?.grant_id) await revokeGrant(row.grant_id);
      throw new errors.InvalidGrant(`${this.model === 'RefreshToken' ? 'refresh token' : 'grant'} already used`);
    }

    async destroy(id: string): Promise<void> {
      await db.sql.run(`DELETE FROM oauth_records WHERE model = ? AND id_hash = ?`, [this.model, sha256Hex(id)]);
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      await revokeGrant(grantId);
    }

    private restore(row: StoredRow | undefined, id: string | null): AdapterPayload | undefined {
      if (!row) return undefined;
      if (row.expires_at !== null && Number(row.expires_at) <= clock.now()) return undefined;
      const text = id === null ? row.payload : row.payload.split(ID_MARKER).join(id);
      const payload = JSON.parse(text) as AdapterPayload;
      if (payload.iss !== issuer) return undefined;
      delete payload.iss;
      if (id !== null) payload.jti = id;
      if (row.consumed_at !== null) payload.consumed = Math.floor(Number(row.consumed_at) / 1000);
      return payload;
    }
  };
}

/** Deletes records that expired more than `graceMs` ago; returns how many. */
export async function pruneRecords(db: Database, before: number): Promise<number> {
  return db.sql.run(`DELETE FROM oauth_records WHERE expires_at IS NOT NULL AND expires_at < ?`, [before]);
}

/**
 * Deletes dynamically registered clients issued before `issuedBefore` (ms) that no connection names
 * (registration is open, so unused registrations must not pile up); returns how many.
 */
export async function pruneUnusedClients(db: Database, issuedBefore: number): Promise<number> {
  const used = new Set((await db.sql.all<{ client_id: string }>(`SELECT DISTINCT client_id FROM mcp_connections`)).map((r) => sha256Hex(r.client_id)));
  const clients = await db.sql.all<{ id_hash: string; payload: string }>(`SELECT id_hash, payload FROM oauth_records WHERE model = 'Client'`);
  let removed = 0;
  for (const client of clients) {
    if (used.has(client.id_hash)) continue;
    const issuedAt = Number((JSON.parse(client.payload) as { client_id_issued_at?: unknown }).client_id_issued_at);
    if (!Number.isFinite(issuedAt) || issuedAt * 1000 >= issuedBefore) continue;
    removed += await db.sql.run(`DELETE FROM oauth_records WHERE model = 'Client' AND id_hash = ?`, [client.id_hash]);
  }
  return removed;
}

const grantLockKey = (grantId: string) => `oauth-grant:${grantId}`;

/**
 * Deletes every record of a grant (its tokens, codes and the grant itself), under the grant's lock: a
 * token being saved for it at the same moment is either deleted here or refused (it checks the grant
 * under the same lock).
 */
export async function deleteGrantRecords(db: Database, grantId: string): Promise<void> {
  await db.tx(async (sql) => {
    await db.lock(sql, grantLockKey(grantId));
    await sql.run(`DELETE FROM oauth_records WHERE grant_id = ?`, [grantId]);
  });
}
