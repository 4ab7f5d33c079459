/**
 * The `bankid` signature method: signing through a national electronic ID provider instead of a typed
 * name. The provider is behind one interface (`SigningProvider`), chosen by the operator with
 * BANKID_PROVIDER; unset means none, and then the method is refused (400 invalid_input) with nothing
 * charged. `test` is the test provider (bankidTest.ts), which runs inside this service, says TEST on
 * every page and is refused when NODE_ENV=production.
 *
 * Flow per signer: the signer's page (signer.ts) offers "Sign with <provider>" (a form posting to
 * `/sign/<token>/bankid/start`); the service opens an order and calls `start`, which answers a
 * redirect (to the provider, or to a page of this service under `/sign/<token>/bankid/`) or a page to
 * show; the provider sends the signer back by posting to `/sign/<token>/bankid/return`; the service
 * calls `complete` with the request's working PDF, and the provider answers that PDF with the signer's
 * signature added as an incremental update (earlier signatures stay valid) and its evidence (JSON, kept
 * on the recipient). When the last signer has signed, the provider's PDF is the archive, unmodified.
 * The flow itself (orders, the working PDF, recording the signature) is in bankidFlow.ts.
 */
import type { Sql } from '../../../db/database.ts';
import type { ServiceEnv } from '../../../server/config.ts';
import { invalidInput } from '../../../server/errors.ts';
import { BANKID_PRICE, chargeOnce } from '../credit/credit.ts';
import { testProvider } from './testProvider.ts';

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

/** A signing provider (Scrive, Signicat, Criipto and the like; or the test provider). */
export interface SigningProvider {
  /** The value of BANKID_PROVIDER that selects it. */
  readonly id: string;
  /** Shown to signers and on the settings page, e.g. "BankID (test)". */
  readonly name: string;
  /** A test provider: no real identity is checked; refused in production. */
  readonly test: boolean;
  start(input: ProviderStartInput): Promise<ProviderStartResult>;
  complete(input: ProviderCompleteInput): Promise<ProviderCompleteResult>;
}

/**
 * The provider refused or could not finish this attempt (a wrong personal number, a cancelled order):
 * the signer sees `message` and may try again; nothing is recorded as signed.
 */
export class ProviderRefusal extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ProviderRefusal';
  }
}

/** The providers this build knows, by BANKID_PROVIDER value (a function: bankidTest.ts imports this file). */
export function providers(): Readonly<Record<string, SigningProvider>> {
  return { [testProvider.id]: testProvider };
}

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
  const provider = providers()[raw];
  if (!provider) throw new Error(`BANKID_PROVIDER must be empty (no bankid) or one of: ${Object.keys(providers()).join(', ')} (got "${raw}")`);
  if (provider.test && env.NODE_ENV === 'production') throw new Error(`BANKID_PROVIDER=${raw} is a test provider (it checks no identity) and is refused when NODE_ENV=production`);
  return { bankidProvider: provider.id };
}

/** The configured provider, or null. */
export function providerOf(settings: BankIdSettings): SigningProvider | null {
  return settings.bankidProvider ? (providers()[settings.bankidProvider] ?? null) : null;
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
export async function prepareBankId(sql: Sql, settings: BankIdSettings, input: { workspaceId: string; requestId: string; now: number }): Promise<{ provider: SigningProvider; charged: boolean; balance: number }> {
  const provider = providerOf(settings);
  if (!provider) throw invalidInput(BANKID_UNAVAILABLE);
  const { charged, balance } = await chargeOnce(sql, { workspaceId: input.workspaceId, requestId: input.requestId, amount: BANKID_PRICE, now: input.now });
  return { provider, charged, balance };
}
