/**
 * A test authorization server: the real OAuth server (handlers/mcp/oauth) on its own express app, on the
 * database of the run, with a minimal test-only approval page at /oauth/consent/<uid> (JSON details,
 * POST .../approve creates a connection row and calls `approve`, POST .../deny calls `deny`), and a
 * browser-like HTTP client that keeps cookies by path and follows nothing by itself.
 */
import crypto from 'node:crypto';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { migrations } from '../../app.ts';
import { type Database, openDatabase } from '../../db/database.ts';
import { applyWorkspace } from '../../server/admin.ts';
import { FakeClock } from '../../server/clock.ts';
import { loadConfig } from '../../server/config.ts';
import { EgressClient, type EgressPolicy, STRICT_EGRESS_POLICY } from '../../server/egress.ts';
import { newId } from '../../server/ids.ts';
import { createOAuthServer, type OAuthServer } from '../../handlers/mcp/oauth/index.ts';
import { capturedLogger } from '../support/service.ts';

export interface TestAuthServer {
  origin: string;
  resource: string;
  db: Database;
  clock: FakeClock;
  oauth: OAuthServer;
  workspaceId: string;
  logs(): string;
  close(): Promise<void>;
}

export async function startAuthServer(databaseUrl: string, egressPolicy: EgressPolicy = STRICT_EGRESS_POLICY): Promise<TestAuthServer> {
  const db = openDatabase(databaseUrl);
  await db.migrate(migrations);
  const clock = new FakeClock();
  const { logger, logs } = capturedLogger();
  const { workspace_id: workspaceId } = await applyWorkspace(db, clock, { workspace: { name: 'OAuth test' } });
  const app = express();
  const server: Server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const egress = new EgressClient(egressPolicy);
  const oauth = createOAuthServer({ db, clock, logger, config: { ...loadConfig({}), publicUrl: origin, egress: egressPolicy }, egress });
  app.use(oauth.routes());
  // The test-only stand-in for the consent page (handlers/mcp/consent.ts in the service).
  app.get('/oauth/consent/:uid', async (req, res) => {
    const details = await oauth.interaction(req, res);
    res.status(details ? 200 : 404).json(details);
  });
  app.post('/oauth/consent/:uid/approve', async (req, res) => {
    const details = await oauth.interaction(req, res);
    if (!details) return void res.status(404).json(null);
    const connectionId = newId('mc');
    await db.sql.run(
      `INSERT INTO mcp_connections (id, workspace_id, client_id, client_name, redirect_uri, access, member_id, operations, resources, toolsets, read_only, delegation, created_by, created_at)
       VALUES (?, ?, ?, ?, ?, 'workspace', NULL, '[]', '{}', '[]', ?, 'none', 'me_test', ?)`,
      [connectionId, workspaceId, details.clientId, details.clientName, details.redirectUri, false, clock.now()],
    );
    res.setHeader('Connection-Id', connectionId);
    await oauth.approve(req, res, { connectionId });
  });
  app.post('/oauth/consent/:uid/deny', async (req, res) => {
    await oauth.deny(req, res);
  });
  app.use((err: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(500).json({ error: 'internal', message: String(err) });
  });
  return {
    origin,
    resource: `${origin}/v1/mcp`,
    db,
    clock,
    oauth,
    workspaceId,
    logs,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await egress.close();
      const schema = db.dialect === 'pg' ? new URL(databaseUrl).searchParams.get('schema') : null;
      if (schema) await db.knex.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await db.close();
    },
  };
}

export interface Answer {
  status: number;
  headers: Headers;
  location: string | null;
  text: string;
  json: any;
}

/** An HTTP client with a cookie jar (path-scoped, as a browser keeps them); never follows redirects. */
export class Browser {
  private jar: Array<{ name: string; value: string; path: string }> = [];
  constructor(private readonly origin: string) {}

  /** Every cookie value it holds (session ids, interaction ids). */
  cookieValues(): string[] {
    return this.jar.map((c) => c.value);
  }

  cookieHeader(path: string): string {
    return this.jar
      .filter((c) => path === c.path || path.startsWith(c.path.endsWith('/') ? c.path : `${c.path}/`) || c.path === '/')
      .map((c) => `${c.name}=${c.value}`)
      .join('; ');
  }

  async request(url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
    const target = new URL(url, this.origin);
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    if (target.origin === this.origin) {
      const cookie = this.cookieHeader(target.pathname);
      if (cookie) headers.cookie = cookie;
    }
    const res = await fetch(target, { method: init.method ?? 'GET', headers, body: init.body, redirect: 'manual' });
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const path = attrs.map((a) => a.trim()).find((a) => a.toLowerCase().startsWith('path='))?.slice(5) ?? '/';
      const expired = attrs.some((a) => /^expires=/i.test(a.trim()) && Date.parse(a.trim().slice(8)) < Date.now()) || value === '';
      this.jar = this.jar.filter((c) => !(c.name === name && c.path === path));
      if (!expired) this.jar.push({ name, value, path });
    }
    const text = await res.text();
    let json: unknown = null;
    try {
      json = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, headers: res.headers, location: res.headers.get('location'), text, json };
  }
}

export function pkce(): { verifier: string; challenge: string } {
  const verifier = crypto.randomBytes(32).toString('base64url');
  return { verifier, challenge: crypto.createHash('sha256').update(verifier).digest('base64url') };
}

export const REDIRECT = 'http://127.0.0.1:5555/cb';

export async function register(origin: string, body: Record<string, unknown>): Promise<Answer> {
  return new Browser(origin).request('/oauth/register', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

export async function token(origin: string, params: Record<string, string>, headers: Record<string, string> = {}): Promise<Answer> {
  return new Browser(origin).request('/oauth/token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: new URLSearchParams(params).toString() });
}

/**
 * The browser part of an authorization: authorize → consent (test page) → approve or deny → resume →
 * the redirect to the client. Returns the final redirect URL and what happened on the way.
 */
export async function authorize(
  server: TestAuthServer,
  input: { clientId: string; challenge: string; resource?: string; scope?: string; state?: string; redirectUri?: string; deny?: boolean; browser?: Browser },
): Promise<{ callback: URL; connectionId: string | null; uid: string; details: any; browser: Browser }> {
  const browser = input.browser ?? new Browser(server.origin);
  const params = new URLSearchParams({
    client_id: input.clientId,
    response_type: 'code',
    redirect_uri: input.redirectUri ?? REDIRECT,
    scope: input.scope ?? 'mcp',
    state: input.state ?? 'st-1',
    code_challenge: input.challenge,
    code_challenge_method: 'S256',
    resource: input.resource ?? server.resource,
  });
  const start = await browser.request(`/oauth/authorize?${params}`);
  if (start.status !== 303 || !start.location?.startsWith('/oauth/consent/')) throw new Error(`authorize answered ${start.status} ${start.location} ${start.text.slice(0, 300)}`);
  const uid = start.location.split('/').pop()!;
  const details = await browser.request(start.location);
  if (details.status !== 200) throw new Error(`consent details ${details.status}`);
  const decided = await browser.request(`${start.location}/${input.deny ? 'deny' : 'approve'}`, { method: 'POST' });
  if (decided.status !== 303 || !decided.location) throw new Error(`approve answered ${decided.status} ${decided.text.slice(0, 300)}`);
  const connectionId = decided.headers.get('connection-id');
  const resumed = await browser.request(decided.location);
  if (resumed.status !== 303 || !resumed.location) throw new Error(`resume answered ${resumed.status} ${resumed.text.slice(0, 300)}`);
  if (!/^https?:/.test(resumed.location)) throw new Error(`resume answered ${resumed.status} ${resumed.location}`);
  return { callback: new URL(resumed.location), connectionId, uid, details: details.json, browser };
}

/** A second "process": another OAuth server on the same database and PUBLIC_URL, on its own listener. */
export async function startSecondProcess(first: TestAuthServer): Promise<{ origin: string; close(): Promise<void> }> {
  const app = express();
  const server: Server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const egress = new EgressClient(STRICT_EGRESS_POLICY);
  const { logger } = capturedLogger();
  const oauth = createOAuthServer({ db: first.db, clock: first.clock, logger, config: { ...loadConfig({}), publicUrl: first.origin, egress: STRICT_EGRESS_POLICY }, egress });
  app.use(oauth.routes());
  return {
    origin,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await egress.close();
    },
  };
}
