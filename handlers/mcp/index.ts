import express from 'express';
import { document } from '../../generated/document.ts';
import { originsFrom, type ServiceEnv } from '../../server/config.ts';
import type { ModuleDeps, ServiceModule } from '../../server/module.ts';
import { connectionsAuditWords } from './audit.ts';
import { connectionsAdmin } from './connectionsAdmin.ts';
import { connectionsNavigation, connectionsRoutes, MCP_CSS } from './connectionsPage.ts';
import { consentRoutes } from './consent.ts';
import { ConnectionCredentials } from './credential.ts';
import { createOAuthServer, type OAuthServer } from './oauth/index.ts';
import { mcpResource, type McpResource, protectedResourceRoutes } from './resource.ts';
import { discoveryConnectionCredential, mcpRoutes } from './transport.ts';

/** The MCP module's settings. */
export interface McpSettings {
  /**
   * Origins (scheme://host[:port]) whose browser pages may call `/v1/mcp` besides PUBLIC_URL's own
   * (MCP_ALLOWED_ORIGINS, comma-separated, e.g. a browser MCP client such as the Inspector); a request
   * with another `Origin` header is refused (403, DNS rebinding). Requests without `Origin` (desktop
   * and command-line clients) are not affected.
   */
  readonly allowedOrigins: readonly string[];
}

export const mcpSettings = (env: ServiceEnv): McpSettings => ({ allowedOrigins: originsFrom('MCP_ALLOWED_ORIGINS', env.MCP_ALLOWED_ORIGINS) });

/** What one process's MCP module holds: the endpoint's resource, the OAuth server, and the connections' credential kind. */
interface McpState {
  resource: McpResource;
  oauth: OAuthServer;
  connections: ConnectionCredentials;
}

// Made once per process (per module dependencies), on the first of the module's factories the service calls.
const states = new WeakMap<ModuleDeps<McpSettings>, McpState>();
function stateOf(deps: ModuleDeps<McpSettings>): McpState {
  let state = states.get(deps);
  if (!state) {
    const resource = mcpResource(deps.config.publicUrl);
    const connections = new ConnectionCredentials(deps.db, deps.clock, deps.credentials, resource);
    // The kernel's store asks it for a connection by id (work judged at use) and to forget what it caches.
    deps.credentials.registerKind(connections);
    state = { resource, oauth: createOAuthServer({ ...deps, pages: deps.pages }), connections };
    states.set(deps, state);
  }
  return state;
}

/**
 * Agent access, a platform feature: the MCP endpoint `/v1/mcp` (its tools generated from the document,
 * every call through the one execution path), its protected resource metadata (RFC 9728), the OAuth 2.1
 * authorization server (`/oauth/*`, oauth/), the consent page, the agent connections settings page, the
 * connections' credential kind, the operator's `connection` commands and the `oauth.prune` job.
 */
export const mcp: ServiceModule<'mcp', McpSettings> = {
  namespace: 'mcp',
  handlers: {},
  config: mcpSettings,
  migrations: new URL('./migrations/', import.meta.url),
  apiRoutes: (deps) => {
    const { resource, connections } = stateOf(deps);
    const router = express.Router();
    router.use(protectedResourceRoutes(resource));
    router.use(
      mcpRoutes({
        config: deps.config,
        logger: deps.logger,
        connections,
        allowedOrigins: deps.settings.allowedOrigins,
        db: deps.db,
        clock: deps.clock,
        execute: deps.operations.execute,
        resource,
        validator: deps.config.validateResponses ? deps.operations.validator : undefined,
        version: String(document.info.version),
      }),
    );
    return router;
  },
  // An MCP connection's access token learns what it may call and whom it may act for (GET /operations, /delegation/members).
  requestCredential: (deps) => {
    const { resource, connections } = stateOf(deps);
    return (req, route) => discoveryConnectionCredential(req, { db: deps.db, clock: deps.clock, connections, resource }, route);
  },
  routes: (deps) => {
    const { oauth } = stateOf(deps);
    const router = express.Router();
    router.use(oauth.routes());
    router.use(consentRoutes({ ...deps, oauth }));
    router.use(connectionsRoutes({ ...deps, oauth }));
    return router;
  },
  navigation: () => connectionsNavigation,
  stylesheet: MCP_CSS,
  // `oauth.prune`: the job's name as recorded before agent access was a module.
  jobs: (deps) => ({ 'oauth.prune': stateOf(deps).oauth.pruneJob() }),
  admin: connectionsAdmin,
  audit: connectionsAuditWords,
  // The authorization server's interaction ids; its query strings (state, PKCE challenges, a misplaced code).
  secretPaths: ['/oauth/authorize/', '/oauth/consent/'],
  secretQueries: ['/oauth/', '/.well-known/'],
};
