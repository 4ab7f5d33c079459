/**
 * The parts of oidc-provider 9 (no published types) this service uses. Loose on purpose: the
 * provider's configuration object is checked by the provider itself at construction.
 */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  export interface AdapterPayload {
    [key: string]: unknown;
    jti?: string;
    grantId?: string;
    uid?: string;
    consumed?: unknown;
  }

  export interface Adapter {
    upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void>;
    find(id: string): Promise<AdapterPayload | undefined>;
    findByUserCode(userCode: string): Promise<AdapterPayload | undefined>;
    findByUid(uid: string): Promise<AdapterPayload | undefined>;
    consume(id: string): Promise<void>;
    destroy(id: string): Promise<void>;
    revokeByGrantId(grantId: string): Promise<void>;
  }

  export interface KoaContextish {
    status: number;
    type: string;
    body: unknown;
    set(name: string, value: string): void;
    method: string;
    path: string;
    [key: string]: unknown;
  }

  export interface ClientInstance {
    clientId: string;
    clientName?: string;
    clientUri?: string;
    clientSecret?: string;
    redirectUris?: string[];
    clientIdMetadataDocument?: boolean;
    [key: string]: unknown;
  }

  export interface InteractionInstance {
    uid: string;
    params: Record<string, unknown>;
    prompt: { name: string; reasons: string[]; details: Record<string, unknown> };
    session?: { accountId?: string; uid?: string };
    exp: number;
    save(ttl: number): Promise<string>;
    [key: string]: unknown;
  }

  export interface GrantInstance {
    addResourceScope(resource: string, scope: string): void;
    addOIDCScope(scope: string): void;
    save(ttl?: number): Promise<string>;
    destroy(): Promise<void>;
    jti: string;
  }

  export class OIDCProviderError extends Error {
    constructor(message?: string, description?: string);
    status: number;
    statusCode: number;
    error: string;
    error_description?: string;
    expose: boolean;
  }

  export const errors: {
    OIDCProviderError: typeof OIDCProviderError;
    InvalidGrant: new (description?: string, detail?: string) => OIDCProviderError;
    InvalidTarget: new (description?: string, detail?: string) => OIDCProviderError;
    InvalidRequest: new (description?: string, code?: number) => OIDCProviderError;
    InvalidClient: new (description?: string, detail?: string) => OIDCProviderError;
    InvalidScope: new (description?: string, scope?: string) => OIDCProviderError;
    SessionNotFound: new (description?: string) => OIDCProviderError;
    [name: string]: new (...args: never[]) => OIDCProviderError;
  };

  /** What an interaction policy check sees of the request. */
  export interface PolicyContext {
    oidc: { session?: { accountId?: string }; account?: unknown; [key: string]: unknown };
  }

  export class Check {
    constructor(reason: string, description: string, check: (ctx: PolicyContext) => boolean);
  }

  export interface PolicyPrompt {
    name: string;
    checks: Check[] & { add(check: Check, index?: number): void };
  }

  export const interactionPolicy: {
    Check: typeof Check;
    base(): PolicyPrompt[] & { get(name: string): PolicyPrompt | undefined };
  };

  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    issuer: string;
    proxy: boolean;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<InteractionInstance>;
    interactionFinished(req: IncomingMessage, res: ServerResponse, result: Record<string, unknown>, options?: { mergeWithLastSubmission?: boolean }): Promise<void>;
    interactionResult(req: IncomingMessage, res: ServerResponse, result: Record<string, unknown>, options?: { mergeWithLastSubmission?: boolean }): Promise<string>;
    on(event: string, listener: (...args: unknown[]) => void): this;
    Client: {
      find(id: string): Promise<ClientInstance | undefined>;
      prototype: {
        compareClientSecret(this: ClientInstance, actual: string): Promise<boolean> | boolean;
        redirectUriAllowed(this: ClientInstance, value: string): boolean;
      };
    };
    Grant: {
      new (input: { accountId: string; clientId: string }): GrantInstance;
      find(id: string): Promise<GrantInstance | undefined>;
    };
    AccessToken: { find(value: string): Promise<Record<string, unknown> | undefined> };
  }
}
