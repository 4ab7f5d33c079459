/**
 * The OAuth 2.1 authorization server of the MCP endpoint (issue 17): oidc-provider mounted at the root
 * of the express app, its routes under /oauth/* and the two discovery documents. Stub: filled below.
 */
import type { Request, Response } from 'express';
import express from 'express';
import type { Logger } from 'pino';
import type { Database } from '../../db/database.ts';
import type { Clock } from '../clock.ts';
import type { ServiceConfig } from '../config.ts';
import type { EgressClient } from '../egress.ts';
import type { JobDefinition } from '../jobs.ts';

export interface OAuthDeps {
  db: Database;
  clock: Clock;
  logger: Logger;
  config: ServiceConfig;
  egress: EgressClient;
}

/** What the consent page shows of a pending authorization request. */
export interface InteractionDetails {
  uid: string;
  clientId: string;
  clientName: string;
  redirectUri: string;
  clientUri?: string;
  resource: string;
  scopes: string[];
}

export interface OAuthServer {
  /** The authorization server's routes (mount filter + the resource-canonicalising guard). */
  routes(): express.Router;
  /** The pending interaction of this browser at /oauth/consent/<uid>; null when it is gone or expired. */
  interaction(req: Request, res: Response): Promise<InteractionDetails | null>;
  /** Grants RESOURCE with scope mcp to the connection, records its grant id, answers with the provider's redirect. */
  approve(req: Request, res: Response, input: { connectionId: string }): Promise<void>;
  /** access_denied back to the client (answers with the redirect). */
  deny(req: Request, res: Response): Promise<void>;
  /** Every token of the grant dead. */
  revokeGrant(grantId: string): Promise<void>;
  /** The `oauth.prune` job definition. */
  pruneJob(): JobDefinition;
}

export function createOAuthServer(_deps: OAuthDeps): OAuthServer {
  return {
    routes: () => express.Router(),
    interaction: async () => null,
    approve: async () => {
      throw new Error('oauth: not yet implemented');
    },
    deny: async () => {
      throw new Error('oauth: not yet implemented');
    },
    revokeGrant: async () => {},
    pruneJob: () => ({ everyMs: 60 * 60_000, run: async () => {} }),
  };
}
