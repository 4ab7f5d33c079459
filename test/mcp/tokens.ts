/**
 * Connections and access tokens for tests of `/v1/mcp` without the authorization server: rows as the
 * consent page (mcp_connections) and oidc-provider's adapter (oauth_records, model AccessToken, keyed
 * by SHA-256 of the token) write them. The token is what a client would get from the token endpoint.
 */
import crypto from 'node:crypto';
import { Client, type ClientOptions, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { newId, sha256Hex } from '../../server/ids.ts';
import { mcpResource } from '../../handlers/mcp/resource.ts';
import type { TestService } from '../support/service.ts';

export interface ConnectionSpec {
  workspaceId: string;
  /** The member who approved it (personal: the member it acts as). */
  createdBy: string;
  access: 'personal' | 'workspace';
  operations: string[];
  /** Workspace access: resource grants. */
  resources?: Record<string, Array<'read' | 'write'>>;
  toolsets?: string[];
  readOnly?: boolean;
  delegation?: 'none' | 'selected' | 'all';
  delegates?: string[];
  clientName?: string;
  /** Personal: the member's role at approval (default: their role now). */
  memberRole?: string;
  /** How tools/list lists the tools (default `full`, what the column defaults to). */
  toolListing?: 'compact' | 'full';
}

/** Inserts a connection as the consent page would, and returns its id. */
export async function insertConnection(svc: TestService, spec: ConnectionSpec): Promise<string> {
  const id = newId('mc');
  const sql = svc.db.sql;
  let memberRole: string | null = null;
  if (spec.access === 'personal') {
    memberRole = spec.memberRole ?? (await sql.one<{ role: string }>(`SELECT role FROM members WHERE id = ?`, [spec.createdBy]))!.role;
  }
  await sql.run(
    `INSERT INTO mcp_connections (id, workspace_id, client_id, client_name, redirect_uri, access, member_id, member_role, operations, resources, toolsets, read_only, delegation, grant_id, created_by, created_at, tool_listing)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      id,
      spec.workspaceId,
      'https://client.example/metadata.json',
      spec.clientName ?? 'Test client',
      'http://127.0.0.1:33418/callback',
      spec.access,
      spec.access === 'personal' ? spec.createdBy : null,
      memberRole,
      JSON.stringify(spec.operations),
      JSON.stringify(spec.resources ?? {}),
      JSON.stringify(spec.toolsets ?? [...new Set(spec.operations.map((o) => o.split('.')[0]!))]),
      spec.readOnly ?? false,
      spec.delegation ?? 'none',
      `grant_${id}`,
      spec.createdBy,
      svc.clock.now(),
      spec.toolListing ?? 'full',
    ],
  );
  for (const member of spec.delegates ?? []) await sql.run(`INSERT INTO mcp_connection_delegates (connection_id, member_id) VALUES (?, ?)`, [id, member]);
  return id;
}

export interface TokenOptions {
  aud?: string;
  iss?: string;
  scope?: string;
  /** Seconds from the service clock's now (default 3600). */
  expiresIn?: number;
  /** The oidc-provider model (RefreshToken for a refresh token). */
  model?: string;
}

/** Mints an opaque access token for the connection (43 characters, as oidc-provider's) and stores its record hashed. */
export async function mintAccessToken(svc: TestService, connectionId: string, options: TokenOptions = {}): Promise<string> {
  const r = mcpResource(svc.config.publicUrl);
  const token = crypto.randomBytes(32).toString('base64url');
  const nowS = Math.floor(svc.clock.now() / 1000);
  const exp = nowS + (options.expiresIn ?? 3600);
  const model = options.model ?? 'AccessToken';
  const payload = {
    kind: model,
    accountId: connectionId,
    aud: options.aud ?? r.resource,
    iss: options.iss ?? r.issuer,
    scope: options.scope ?? 'mcp',
    iat: nowS,
    exp,
    grantId: `grant_${connectionId}`,
    clientId: 'https://client.example/metadata.json',
  };
  await svc.db.sql.run(`INSERT INTO oauth_records (model, id_hash, grant_id, payload, expires_at) VALUES (?, ?, ?, ?, ?)`, [
    model,
    sha256Hex(token),
    payload.grantId,
    JSON.stringify(payload),
    exp * 1000,
  ]);
  return token;
}

/** Revokes a token as the authorization server does (its record is destroyed). */
export async function revokeToken(svc: TestService, token: string): Promise<void> {
  await svc.db.sql.run(`DELETE FROM oauth_records WHERE id_hash = ?`, [sha256Hex(token)]);
}

/** The endpoint's URL on the test server. */
export const mcpUrl = (svc: TestService) => `${svc.origin}/v1/mcp`;

export type Era = 'legacy' | 'modern';

/** An SDK client connected with the token: `legacy` speaks 2025-11-25 (initialize), `modern` pins 2026-07-28. */
export async function connectClient(svc: TestService, token: string, era: Era, headers: Record<string, string> = {}, options: { capabilities?: ClientOptions['capabilities'] } = {}): Promise<Client> {
  const client = new Client({ name: 'test-client', version: '1.0.0' }, { versionNegotiation: { mode: era === 'legacy' ? 'legacy' : { pin: '2026-07-28' } }, ...(options.capabilities ? { capabilities: options.capabilities } : {}) });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl(svc)), { requestInit: { headers: { Authorization: `Bearer ${token}`, ...headers } } });
  await client.connect(transport);
  return client;
}

/** A raw JSON-RPC POST to /v1/mcp (legacy framing unless headers say otherwise); the body parsed from JSON or the first SSE message. */
export async function rawPost(
  svc: TestService,
  body: unknown,
  headers: Record<string, string> = {},
  url = mcpUrl(svc),
): Promise<{ status: number; headers: Headers; body: any; text: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  const data = /^data: (.*)$/m.exec(text);
  try {
    parsed = JSON.parse(data ? data[1]! : text);
  } catch {
    /* keep text */
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

/** The per-request envelope and headers of a 2026-07-28 request. */
export function modern(method: string, params: Record<string, unknown> = {}, id = 1): { body: unknown; headers: Record<string, string> } {
  const body = {
    jsonrpc: '2.0',
    id,
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
      },
    },
  };
  const headers: Record<string, string> = { 'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': method };
  if (method === 'tools/call' && typeof params.name === 'string') headers['Mcp-Name'] = params.name;
  return { body, headers };
}
