/**
 * A connection and an access token for it, written as the authorization server and the consent page
 * write them (an `mcp_connections` row, and an `oauth_records` AccessToken record keyed by the SHA-256
 * of the token, its payload naming the connection as accountId, the resource as audience, the issuer
 * and the scope mcp), for the suites that need a working token without the browser flow: the
 * conformance suite and the benchmark. The OAuth flow itself is exercised in e2e.browser.test.ts.
 */
import crypto from 'node:crypto';
import type { Database } from '../../db/database.ts';
import type { ApplyResult } from '../../server/admin.ts';
import type { Clock } from '../../server/clock.ts';
import { newId, sha256Hex } from '../../server/ids.ts';
import { MCP_SCOPE, mcpResource } from '../../handlers/mcp/resource.ts';

export interface ConnectionSpec {
  access: 'personal' | 'workspace';
  /** Frozen operation ids. */
  operations: string[];
  /** Personal access: the member (a key of the workspace spec's members, e.g. `olga`). */
  member?: string;
  /** Personal: the member's role now (recorded as at approval). */
  memberRole?: 'owner' | 'admin' | 'member';
  resources?: Record<string, Array<'read' | 'write'>>;
  /** Default: the namespaces of `operations`. */
  toolsets?: string[];
  readOnly?: boolean;
  delegation?: 'none' | 'selected' | 'all';
  /** Members (spec keys) a workspace connection may act for with `delegation: 'selected'`. */
  delegates?: string[];
  clientName?: string;
  /** Token lifetime (s); 3600 by default. */
  ttlS?: number;
  /** Override what the token names (bad-token cases). */
  audience?: string;
  issuer?: string;
  scope?: string;
}

/** Writes the connection and a token for it; answers the token and the connection id. */
export async function mintConnection(
  svc: { db: Database; clock: Clock; config: { publicUrl: string } },
  ws: ApplyResult,
  spec: ConnectionSpec,
): Promise<{ token: string; connectionId: string; grantId: string }> {
  const now = svc.clock.now();
  const connectionId = newId('mc');
  const grantId = crypto.randomBytes(16).toString('base64url');
  const clientId = `mcl_${crypto.randomBytes(8).toString('hex')}`;
  const memberId = spec.member ? ws.members[spec.member] : undefined;
  if (spec.access === 'personal' && !memberId) throw new Error(`mintConnection: personal access needs a member of the workspace (got ${spec.member})`);
  const owner = Object.values(ws.members)[0]!;
  const bool = (b: boolean) => (svc.db.dialect === 'pg' ? b : b ? 1 : 0);
  await svc.db.sql.run(
    `INSERT INTO mcp_connections (id, workspace_id, client_id, client_name, redirect_uri, access, member_id, member_role, operations, resources, toolsets, read_only, delegation, grant_id, created_by, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      connectionId,
      ws.workspace_id,
      clientId,
      spec.clientName ?? 'Test client',
      'http://127.0.0.1:33418/callback',
      spec.access,
      spec.access === 'personal' ? memberId! : null,
      spec.access === 'personal' ? (spec.memberRole ?? null) : null,
      JSON.stringify(spec.operations),
      JSON.stringify(spec.resources ?? {}),
      JSON.stringify(spec.toolsets ?? [...new Set(spec.operations.map((id) => id.split('.')[0]!))].sort()),
      bool(spec.readOnly ?? false),
      spec.delegation ?? 'none',
      grantId,
      memberId ?? owner,
      now,
    ],
  );
  for (const d of spec.delegates ?? []) await svc.db.sql.run(`INSERT INTO mcp_connection_delegates (connection_id, member_id) VALUES (?, ?)`, [connectionId, ws.members[d]!]);
  const token = await mintAccessToken(svc, { connectionId, grantId, clientId, ...spec });
  return { token, connectionId, grantId };
}

/** Another access token of an existing connection (payload fields overridable for bad-token cases). */
export async function mintAccessToken(
  svc: { db: Database; clock: Clock; config: { publicUrl: string } },
  t: { connectionId: string; grantId: string; clientId?: string; ttlS?: number; audience?: string; issuer?: string; scope?: string },
): Promise<string> {
  const now = svc.clock.now();
  const r = mcpResource(svc.config.publicUrl);
  const token = crypto.randomBytes(32).toString('base64url');
  const ttl = t.ttlS ?? 3600;
  const exp = Math.floor(now / 1000) + ttl;
  const payload = JSON.stringify({
    kind: 'AccessToken',
    accountId: t.connectionId,
    aud: t.audience ?? r.resource,
    iss: t.issuer ?? r.issuer,
    scope: t.scope ?? MCP_SCOPE,
    clientId: t.clientId ?? 'mcl_test',
    grantId: t.grantId,
    iat: Math.floor(now / 1000),
    exp,
    format: 'opaque',
  });
  await svc.db.sql.run(`INSERT INTO oauth_records (model, id_hash, grant_id, uid_hash, payload, expires_at, consumed_at) VALUES ('AccessToken', ?, ?, NULL, ?, ?, NULL)`, [
    sha256Hex(token),
    t.grantId,
    payload,
    exp * 1000,
  ]);
  return token;
}

/** Conformance and bench: a token only. */
export async function mintConnectionToken(svc: Parameters<typeof mintConnection>[0], ws: ApplyResult, spec: ConnectionSpec): Promise<string> {
  return (await mintConnection(svc, ws, spec)).token;
}
