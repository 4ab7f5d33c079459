/**
 * The `bankid` signature method: signing through a national electronic ID provider instead of a typed
 * name. The provider is behind one interface (`SigningProvider`), chosen by the operator with
 * BANKID_PROVIDER; unset means none, and then the method is refused (400 invalid_input) with nothing
 * charged. `test` is the test provider (testProvider.ts), which runs inside this service, says TEST on
 * every page and is refused when NODE_ENV=production. A provider's code is loaded the first time it is
 * used (`KnownProvider.load`): the settings, the pages and the orders need only its id, name and test
 * flag, so a service without BANKID_PROVIDER=test never loads the test provider.
 *
 * Flow per signer: the signer's page (signer/signerPages.ts) offers "Sign with <provider>" (a form posting to
 * `/sign/<token>/bankid/start`); the service opens an order and calls `start`, which answers a
 * redirect (to the provider, or to a page of this service under `/sign/<token>/bankid/`) or a page to
 * show; the provider sends the signer back by posting to `/sign/<token>/bankid/return`; the service
 * calls `complete` with the request's working PDF, and the provider answers that PDF with the signer's
 * signature added as an incremental update (earlier signatures stay valid) and its evidence (JSON, kept
 * on the recipient). When the last signer has signed, the provider's PDF is the archive, unmodified.
 * The flow itself (orders, the working PDF, recording the signature) is in flow.ts.
 */
import type { Sql } from '../../../db/database.ts';
import type { ServiceEnv } from '../../../server/config.ts';
import { invalidInput } from '../../../server/errors.ts';
import { BANKID_PRICE, chargeOnce } from '../credit/credit.ts';

/** The signer a provider signs for (as the request names them; a real eID answers the person's own name). */
export interface ProviderSigner {
  recipientId: string;
  name: string;
  email: string;
}

export interface ProviderStartInput {
  /** The service's order id (`spo_...`): the provider echoes it back on return. */
  orderId: string;
  requestId: string;
  title: string;
  signer: ProviderSigner;
  /** The PDF as it is now (the original, or the provider's output after earlier signers). */
  document: Uint8Array;
  /** Absolute URL the provider sends the signer back to with a form POST (fields: `order` and its own). */
  returnUrl: string;
  /** Path prefix (`/sign/<token>/bankid`) of pages this service serves for the provider (test provider). */
  pagesPath: string;
  now: number;
}

/** Where the signer goes after start: a redirect (absolute URL or a path of this service), or a page to show. */
export type ProviderStartResult = { redirect: string; providerRef?: string } | { page: { title: string; html: string }; providerRef?: string };

export interface ProviderCompleteInput {
  orderId: string;
  /** What `start` answered as the provider's reference, if anything. */
  providerRef: string | null;
  requestId: string;
  title: string;
  signer: ProviderSigner;
  /** The fields the provider posted back to the return URL (strings only). */
  params: Readonly<Record<string, string>>;
  /** The working PDF to sign (the same bytes `start` was given unless another signer signed since). */
  document: Uint8Array;
  now: number;
}

export interface ProviderCompleteResult {
  /** The provider's signed PDF: `document` followed by an incremental update carrying this signer's signature. */
  pdf: Uint8Array;
  /** The provider's evidence (who identified, how, when, the certificate); stored with the recipient, never in events. */
  evidence: Record<string, unknown>;
}

/** What the service knows of a provider without loading its code: what the settings, pages and orders show. */
export interface ProviderInfo {
  /** The value of BANKID_PROVIDER that selects it. */
  readonly id: string;
  /** Shown to signers and on the settings page, e.g. "BankID (test)". */
  readonly name: string;
  /** A test provider: no real identity is checked; refused in production. */
  readonly test: boolean;
}

/** A signing provider (Scrive, Signicat, Criipto and the like; or the test provider). */
export interface SigningProvider extends ProviderInfo {
  start(input: ProviderStartInput): Promise<ProviderStartResult>;
  complete(input: ProviderCompleteInput): Promise<ProviderCompleteResult>;
}

/** The mark of a ProviderRefusal, the same in every copy of this module (see ProviderRefusal). */
const REFUSAL = Symbol.for('signing.bankid.ProviderRefusal');

/**
 * The provider refused or could not finish this attempt (a wrong personal number, a cancelled order):
 * the signer sees `message` and may try again; nothing is recorded as signed.
 *
 * `instanceof` goes by a registered symbol, not by the class object: a provider's code is loaded with
 * a dynamic import, and where the importer was itself loaded as CommonJS (tsx under the tests' mocha)
 * that import brings a second copy of this module, whose refusals are refusals all the same.
 */
export class ProviderRefusal extends Error {
  readonly [REFUSAL] = true;

  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ProviderRefusal';
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as { [REFUSAL]?: unknown })[REFUSAL] === true;
  }
}

/** A provider this build knows: its description, and its code, loaded on first use. */
export interface KnownProvider extends ProviderInfo {
  load(): Promise<SigningProvider>;
}

/** The test provider's description (testProvider.ts spreads it into the provider). */
export const TEST_PROVIDER: ProviderInfo = { id: 'test', name: 'BankID (test)', test: true };

/**
 * The providers this build knows, by BANKID_PROVIDER value. The test provider is loaded by a dynamic
 * import, so it is outside the production import graph: only a service started with
 * BANKID_PROVIDER=test (refused when NODE_ENV=production) ever loads it.
 */
const PROVIDERS: Readonly<Record<string, KnownProvider>> = {
  [TEST_PROVIDER.id]: { ...TEST_PROVIDER, load: async () => (await import('./testProvider.ts')).testProvider },
};

/** What the signing module's settings carry for bankid (`SigningSettings` includes it). */
export interface BankIdSettings {
  /** BANKID_PROVIDER: the provider's id, or null when none is configured (bankid refused). */
  bankidProvider: string | null;
}

/**
 * Reads BANKID_PROVIDER: unset or empty = none; `test` = the test provider, refused when
 * NODE_ENV=production (it checks no identity); anything else is a readable start-up error.
 */
export function bankIdSettings(env: ServiceEnv): BankIdSettings {
  const raw = env.BANKID_PROVIDER?.trim() ?? '';
  if (raw === '' || raw === 'none') return { bankidProvider: null };
  const provider = Object.hasOwn(PROVIDERS, raw) ? PROVIDERS[raw] : undefined;
  if (!provider) throw new Error(`BANKID_PROVIDER must be empty (no bankid) or one of: ${Object.keys(PROVIDERS).join(', ')} (got "${raw}")`);
  if (provider.test && env.NODE_ENV === 'production') throw new Error(`BANKID_PROVIDER=${raw} is a test provider (it checks no identity) and is refused when NODE_ENV=production`);
  return { bankidProvider: provider.id };
}

/** The configured provider (its code not loaded yet: `load()` it to start or complete a signature), or null. */
export function providerOf(settings: BankIdSettings): KnownProvider | null {
  return settings.bankidProvider && Object.hasOwn(PROVIDERS, settings.bankidProvider) ? PROVIDERS[settings.bankidProvider]! : null;
}

/** The 400 of a bankid request when no provider is configured. */
export const BANKID_UNAVAILABLE =
  'bankid is not available: this service has no signing provider configured (BANKID_PROVIDER). Use signature_method standard, or ask the operator to configure a provider. Nothing was charged.';

/**
 * Called by signing.RequestFileSignatures in its transaction for a bankid request, after the input is
 * validated and before anything is sent: refuses with 400 invalid_input when no provider is
 * configured (nothing charged), 409 conflict when the workspace's credit is short (the transaction is
 * rolled back: nothing created, nothing sent), else charges BANKID_PRICE once for `requestId`.
 */
export async function prepareBankId(sql: Sql, settings: BankIdSettings, input: { workspaceId: string; requestId: string; now: number }): Promise<{ provider: KnownProvider; charged: boolean; balance: number }> {
  const provider = providerOf(settings);
  if (!provider) throw invalidInput(BANKID_UNAVAILABLE);
  const { charged, balance } = await chargeOnce(sql, { workspaceId: input.workspaceId, requestId: input.requestId, amount: BANKID_PRICE, now: input.now });
  return { provider, charged, balance };
}
