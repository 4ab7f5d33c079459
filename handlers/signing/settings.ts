/**
 * The signing module's settings, read once when a process starts (a bad value stops it with a
 * readable error): the bankid provider (BANKID_PROVIDER, handlers/signing/bankid/provider.ts) and the seal's
 * certificate and timestamp authority (SIGNING_CERTIFICATE_P12_PATH, SIGNING_CERTIFICATE_P12_PASSWORD,
 * SIGNING_TSA_URL, handlers/signing/archive/sealSettings.ts).
 */
import type { ServiceEnv } from '../../server/config.ts';
import { bankIdSettings, type BankIdSettings } from './bankid/provider.ts';
import { type SealSettings, sealSettingsFromEnv } from './archive/sealSettings.ts';

export interface SigningSettings extends BankIdSettings {
  readonly seal: SealSettings;
}

export function signingSettings(env: ServiceEnv): SigningSettings {
  return { ...bankIdSettings(env), seal: sealSettingsFromEnv(env) };
}
