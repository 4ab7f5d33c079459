/**
 * The MCP endpoint as an OAuth protected resource (RFC 9728, RFC 6750, RFC 8707): its canonical
 * identifier, the metadata document clients discover the authorization server from, and the
 * `WWW-Authenticate` challenges of its 401 and 403 answers.
 */
import express, { type Request, type Response } from 'express';
import { DPOP_ALGS } from './dpop.ts';

/** The identifiers of the protected resource `/v1/mcp`. */
export interface McpResource {
  /** The canonical resource identifier (RFC 8707): PUBLIC_URL's origin + `/v1/mcp`, lowercase scheme and host, no trailing slash. */
  resource: string;
  /** The authorization server's issuer: PUBLIC_URL's origin (no path). */
  issuer: string;
  /** Where the protected resource metadata is (RFC 9728, the path-inserted well-known URI). */
  metadataUrl: string;
}

/** The scope every MCP access token carries (narrowing lives on the connection, not in scopes). */
export const MCP_SCOPE = 'mcp';
/** The path of the endpoint. */
export const MCP_PATH = '/v1/mcp';
/** The metadata path (RFC 9728 §3.1: the well-known segment inserted before the resource's path). */
export const PROTECTED_RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource';

/** The resource identifiers for a PUBLIC_URL (any path of it is ignored: the service answers at its origin). */
export function mcpResource(publicUrl: string): McpResource {
  // URL lowercases scheme and host and drops a default port; `origin` has no trailing slash.
  const origin = new URL(publicUrl).origin;
  return {
    resource: `${origin}${MCP_PATH}`,
    issuer: origin,
    metadataUrl: `${origin}${PROTECTED_RESOURCE_METADATA_PATH}${MCP_PATH}`,
  };
}

/** A quoted-string value (RFC 9110 §5.6.4): backslash and double quote escaped, control characters dropped. */
function quoted(value: string): string {
  return `"${value.replace(/[\u0000-\u001f\u007f]/g, ' ').replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

/**
 * The `WWW-Authenticate` value of a 401 or 403 from `/v1/mcp`: `Bearer resource_metadata="…", scope="mcp"`, plus
 * `error` and `error_description` when given (RFC 6750 §3.1: no error code when the request carried no credentials).
 */
export function bearerChallenge(
  r: McpResource,
  opts: { error?: string; description?: string } = {},
): string {
  const params = [`resource_metadata=${quoted(r.metadataUrl)}`, `scope=${quoted(MCP_SCOPE)}`];
  if (opts.error) params.push(`error=${quoted(opts.error)}`);
  if (opts.error && opts.description) params.push(`error_description=${quoted(opts.description)}`);
  return `Bearer ${params.join(', ')}`;
}

/**
 * The `WWW-Authenticate` value of a refusal about a DPoP-bound token or a DPoP proof (RFC 9449 §7.1):
 * `DPoP algs="…", resource_metadata="…", scope="mcp"` plus `error` (`invalid_token`,
 * `invalid_dpop_proof`) and `error_description`.
 */
export function dpopChallenge(r: McpResource, opts: { error?: string; description?: string } = {}): string {
  const params = [`algs=${quoted(DPOP_ALGS.join(' '))}`, `resource_metadata=${quoted(r.metadataUrl)}`, `scope=${quoted(MCP_SCOPE)}`];
  if (opts.error) params.push(`error=${quoted(opts.error)}`);
  if (opts.error && opts.description) params.push(`error_description=${quoted(opts.description)}`);
  return `DPoP ${params.join(', ')}`;
}

/** The protected resource metadata document (RFC 9728 §2). */
export function protectedResourceMetadata(r: McpResource): Record<string, unknown> {
  return {
    resource: r.resource,
    authorization_servers: [r.issuer],
    scopes_supported: [MCP_SCOPE],
    bearer_methods_supported: ['header'],
    // DPoP-bound tokens are honoured (RFC 9449 §5.1); unbound bearer tokens too.
    dpop_signing_alg_values_supported: DPOP_ALGS,
    dpop_bound_access_tokens_required: false,
    resource_name: 'Workspace Operations',
    resource_documentation: `${r.issuer}/docs`,
  };
}

/**
 * `GET /.well-known/oauth-protected-resource/v1/mcp` and, for clients that only try the root,
 * `GET /.well-known/oauth-protected-resource` (the same document: there is one protected resource).
 * Public, cacheable for five minutes, readable cross-origin (browser clients discover it too).
 */
export function protectedResourceRoutes(r: McpResource): express.Router {
  const router = express.Router();
  const body = JSON.stringify(protectedResourceMetadata(r));
  const answer = (_req: Request, res: Response) => {
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.type('application/json').send(body);
  };
  router.get(`${PROTECTED_RESOURCE_METADATA_PATH}${MCP_PATH}`, answer);
  router.get(PROTECTED_RESOURCE_METADATA_PATH, answer);
  router.options([`${PROTECTED_RESOURCE_METADATA_PATH}${MCP_PATH}`, PROTECTED_RESOURCE_METADATA_PATH], (_req, res) => {
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('Access-Control-Allow-Methods', 'GET');
    res.setHeader('Access-Control-Allow-Headers', 'MCP-Protocol-Version');
    res.setHeader('Access-Control-Max-Age', '600');
    res.status(204).end();
  });
  return router;
}
