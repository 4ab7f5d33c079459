/**
 * Which certificate seals the archives, and which timestamp authority stamps them: the settings
 * (SIGNING_CERTIFICATE_P12_PATH, SIGNING_CERTIFICATE_P12_PASSWORD, SIGNING_TSA_URL) and the
 * installation's own certificate, made on first use and kept in the database so that every process
 * of the deployment seals with the same one.
 */
import fs from 'node:fs';
import type { Database, Sql } from '../../../db/database.ts';
import type { Clock } from '../../../server/clock.ts';
import type { ServiceEnv } from '../../../server/config.ts';
import { CertificateError, createServiceCertificate, loadPkcs12, loadStoredCertificate, type SealCertificate, type StoredCertificate } from './sealCertificate.ts';

export interface SealSettings {
  /** RFC 3161 timestamp authority (SIGNING_TSA_URL); null: seals carry the service's own time only (PAdES B-B). */
  tsaUrl: string | null;
  /** An operator's PKCS#12 (read at start) and its password; null: the installation's own certificate. */
  p12: { path: string; bytes: Uint8Array; password: string } | null;
}

/** Reads the seal settings; a bad value stops the process at start with a readable error (never the password). */
export function sealSettingsFromEnv(env: ServiceEnv): SealSettings {
  const tsa = env.SIGNING_TSA_URL?.trim() || null;
  if (tsa) {
    let url: URL;
    try {
      url = new URL(tsa);
    } catch {
      throw new Error(`SIGNING_TSA_URL must be an http(s) URL of an RFC 3161 timestamp authority (got "${tsa}")`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`SIGNING_TSA_URL must be http or https (got "${url.protocol}")`);
    if (url.username || url.password) throw new Error('SIGNING_TSA_URL must not carry credentials');
  }
  const path = env.SIGNING_CERTIFICATE_P12_PATH?.trim() || null;
  const password = env.SIGNING_CERTIFICATE_P12_PASSWORD ?? '';
  if (!path && env.SIGNING_CERTIFICATE_P12_PASSWORD) throw new Error('SIGNING_CERTIFICATE_P12_PASSWORD is set without SIGNING_CERTIFICATE_P12_PATH');
  let p12: SealSettings['p12'] = null;
  if (path) {
    try {
      p12 = { path, bytes: new Uint8Array(fs.readFileSync(path)), password };
    } catch (err) {
      throw new Error(`SIGNING_CERTIFICATE_P12_PATH cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'}): ${path}`);
    }
  }
  return { tsaUrl: tsa, p12 };
}

interface DbCertificateRow {
  certificate_pem: string;
  private_key_pem: string;
}

const INSTALLATION = 'installation';
// A new installation certificate is made this long before the stored one ends, so no seal is made
// with a certificate about to expire (the old archives stay valid: their seals were made in time).
const RENEW_BEFORE_MS = 30 * 86_400_000;

async function storedCertificate(sql: Sql): Promise<DbCertificateRow | undefined> {
  return sql.one<DbCertificateRow>(`SELECT certificate_pem, private_key_pem FROM signing_certificates WHERE id = ?`, [INSTALLATION]);
}

/**
 * The installation's certificate: the stored one, or a new one when there is none (or it ends within
 * 30 days). Race-safe across processes: each proposes its own, the first insert (or replacement of the
 * same old one) wins, and everyone reads back the winner.
 */
export async function installationCertificate(sql: Sql, now: number, commonName: string): Promise<StoredCertificate> {
  const found = await storedCertificate(sql);
  if (found) {
    const cert = await loadStoredCertificate({ certificatePem: found.certificate_pem, privateKeyPem: found.private_key_pem });
    if (cert.notAfter.getTime() - RENEW_BEFORE_MS > now) return { certificatePem: found.certificate_pem, privateKeyPem: found.private_key_pem };
  }
  const made = await createServiceCertificate({ commonName, organization: 'Workspace Operations', now: new Date(now) });
  if (found) {
    await sql.run(`UPDATE signing_certificates SET certificate_pem = ?, private_key_pem = ?, created_at = ? WHERE id = ? AND certificate_pem = ?`, [
      made.certificatePem,
      made.privateKeyPem,
      now,
      INSTALLATION,
      found.certificate_pem,
    ]);
  } else {
    await sql.run(`INSERT INTO signing_certificates (id, certificate_pem, private_key_pem, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`, [
      INSTALLATION,
      made.certificatePem,
      made.privateKeyPem,
      now,
    ]);
  }
  const row = await storedCertificate(sql);
  if (!row) throw new CertificateError('the installation certificate could not be stored');
  return { certificatePem: row.certificate_pem, privateKeyPem: row.private_key_pem };
}

/** The common name of the installation's certificate: the service's public host, as readers show the signer. */
export function sealCommonName(publicUrl: string): string {
  return `Workspace Operations seal (${new URL(publicUrl).host})`;
}

const opened = new WeakMap<Database, { pem: string; cert: SealCertificate }>();

/**
 * The certificate archives are sealed with now: the operator's PKCS#12 when configured, else the
 * installation's (opened once per process, reopened when another process renewed it).
 */
export async function sealingCertificate(db: Database, clock: Clock, settings: SealSettings, publicUrl: string): Promise<SealCertificate> {
  if (settings.p12) return loadPkcs12(settings.p12.bytes, settings.p12.password);
  const stored = await installationCertificate(db.sql, clock.now(), sealCommonName(publicUrl));
  const cached = opened.get(db);
  if (cached && cached.pem === stored.certificatePem) return cached.cert;
  const cert = await loadStoredCertificate(stored);
  opened.set(db, { pem: stored.certificatePem, cert });
  return cert;
}
