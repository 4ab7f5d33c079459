/**
 * The service's sealing certificate: one self-signed RSA certificate made per installation on first use
 * (stored as PEM; the private key as PKCS#8, encrypted when a passphrase is given), or an operator's PKCS#12.
 */
import { createPrivateKey, webcrypto, X509Certificate } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { CryptoKeySigner, P12Signer, type Signer } from '@libpdf/core';

const RSA_SHA256 = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } as const;

/** What storage keeps of the installation's own certificate. */
export interface StoredCertificate {
  certificatePem: string;
  /** PKCS#8; `ENCRYPTED PRIVATE KEY` when made with a passphrase. */
  privateKeyPem: string;
}

/** A certificate ready to seal with, and the facts a settings page or a verification shows. */
export interface SealCertificate {
  signer: Signer;
  subject: string;
  issuer: string;
  notBefore: Date;
  notAfter: Date;
  /** SHA-256 of the certificate's DER, colon-separated hex as `openssl x509 -fingerprint` prints it. */
  fingerprint: string;
  selfSigned: boolean;
}

/** A certificate or key that cannot be used, with a message fit for an operator (never the password). */
export class CertificateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CertificateError';
  }
}

export interface CreateCertificateOptions {
  /** Shown as the signer in PDF readers, e.g. "Workspace Operations seal (example.com)". */
  commonName: string;
  organization?: string;
  now: Date;
  /** Default 10. */
  validYears?: number;
  /** Encrypts the stored private key (AES-256-CBC, PKCS#8). */
  passphrase?: string;
  /** Default 3072. */
  modulusLength?: 2048 | 3072 | 4096;
}

/** Makes the installation's self-signed document-signing certificate (RSA, SHA-256). */
export async function createServiceCertificate(options: CreateCertificateOptions): Promise<StoredCertificate> {
  if (!options.commonName.trim()) throw new CertificateError('the certificate needs a common name');
  const keys = await webcrypto.subtle.generateKey(
    { ...RSA_SHA256, modulusLength: options.modulusLength ?? 3072, publicExponent: new Uint8Array([1, 0, 1]) },
    true,
    ['sign', 'verify'],
  );
  // A day of slack before "now" so that a signer's clock a little behind still sees a valid certificate.
  const notBefore = new Date(options.now.getTime() - 24 * 3600 * 1000);
  const notAfter = new Date(options.now);
  notAfter.setUTCFullYear(notAfter.getUTCFullYear() + (options.validYears ?? 10));
  const der = await selfSigned(keys, options.commonName.trim(), options.organization?.trim(), notBefore, notAfter);
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const key = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
  const privateKeyPem = options.passphrase
    ? key.export({ format: 'pem', type: 'pkcs8', cipher: 'aes-256-cbc', passphrase: options.passphrase })
    : key.export({ format: 'pem', type: 'pkcs8' });
  return { certificatePem: new X509Certificate(der).toString(), privateKeyPem: String(privateKeyPem) };
}

/** Opens a stored certificate for sealing; the passphrase is needed when the key was stored encrypted. */
export async function loadStoredCertificate(stored: StoredCertificate, passphrase?: string): Promise<SealCertificate> {
  let der: Uint8Array;
  let facts: X509Certificate;
  try {
    facts = new X509Certificate(stored.certificatePem);
    der = new Uint8Array(facts.raw);
  } catch {
    throw new CertificateError('the stored certificate is not a PEM X.509 certificate');
  }
  let pkcs8: Buffer;
  try {
    pkcs8 = createPrivateKey({ key: stored.privateKeyPem, format: 'pem', passphrase }).export({ format: 'der', type: 'pkcs8' });
  } catch {
    throw new CertificateError(
      stored.privateKeyPem.includes('ENCRYPTED') ? 'the stored private key cannot be opened: wrong or missing passphrase' : 'the stored private key is not a PEM PKCS#8 key',
    );
  }
  const key = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
  if (!facts.checkPrivateKey(key)) throw new CertificateError('the stored private key does not belong to the certificate');
  if (key.asymmetricKeyType !== 'rsa') throw new CertificateError(`stored keys must be RSA (found ${key.asymmetricKeyType})`);
  const privateKey = await webcrypto.subtle.importKey('pkcs8', pkcs8, RSA_SHA256, false, ['sign']);
  return describe(new CryptoKeySigner(privateKey, der, 'RSA', 'RSASSA-PKCS1-v1_5'), facts);
}

/** Opens an operator's PKCS#12 (.p12/.pfx) with its password; RSA or ECDSA keys. */
export async function loadPkcs12(p12: Uint8Array, password: string): Promise<SealCertificate> {
  let signer: P12Signer;
  try {
    signer = await P12Signer.create(p12, password);
  } catch (err) {
    const detail = err instanceof Error ? (password ? err.message.split(password).join('***') : err.message) : '';
    throw new CertificateError(`the PKCS#12 file cannot be opened (wrong password, or not a PKCS#12 file with a key and its certificate)${detail ? `: ${detail}` : ''}`);
  }
  return describe(signer, new X509Certificate(signer.certificate));
}

/** Throws unless the certificate is valid at `at` (a seal made outside its validity fails in every reader). */
export function assertUsableAt(certificate: SealCertificate, at: Date): void {
  if (at < certificate.notBefore) throw new CertificateError(`the sealing certificate is not valid before ${certificate.notBefore.toISOString()}`);
  if (at > certificate.notAfter) throw new CertificateError(`the sealing certificate expired at ${certificate.notAfter.toISOString()}`);
}

function describe(signer: Signer, facts: X509Certificate): SealCertificate {
  return {
    signer,
    subject: facts.subject.replace(/\n/g, ', '),
    issuer: facts.issuer.replace(/\n/g, ', '),
    notBefore: new Date(facts.validFrom),
    notAfter: new Date(facts.validTo),
    fingerprint: facts.fingerprint256,
    selfSigned: facts.subject === facts.issuer && facts.verify(facts.publicKey),
  };
}

const OID = {
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  basicConstraints: '2.5.29.19',
  keyUsage: '2.5.29.15',
  extKeyUsage: '2.5.29.37',
  subjectKeyIdentifier: '2.5.29.14',
  // id-kp-documentSigning (RFC 9336) and emailProtection, which NSS-based readers accept for signatures.
  documentSigning: '1.3.6.1.5.5.7.3.36',
  emailProtection: '1.3.6.1.5.5.7.3.4',
};

async function selfSigned(keys: CryptoKeyPair, commonName: string, organization: string | undefined, notBefore: Date, notAfter: Date): Promise<Buffer> {
  const crypto = new pkijs.CryptoEngine({ name: 'node', crypto: webcrypto as unknown as Crypto });
  const cert = new pkijs.Certificate();
  cert.version = 2;
  const serial = webcrypto.getRandomValues(new Uint8Array(16));
  serial[0] = (serial[0]! & 0x3f) | 0x40; // positive, and minimal in DER
  cert.serialNumber = new asn1js.Integer({ valueHex: serial });
  const attributes: Array<[string, string]> = [[OID.commonName, commonName], ...(organization ? [[OID.organization, organization] as [string, string]] : [])];
  // One RDN per attribute (pkijs alone would put them all in one multi-valued RDN, "CN=a+O=b").
  const rdns = new asn1js.Sequence({
    value: attributes.map(([type, value]) => new asn1js.Set({ value: [new pkijs.AttributeTypeAndValue({ type, value: new asn1js.Utf8String({ value }) }).toSchema()] })),
  });
  const name = () => new pkijs.RelativeDistinguishedNames({ schema: asn1js.fromBER(rdns.toBER(false)).result });
  cert.subject = name();
  cert.issuer = name();
  cert.notBefore.value = notBefore;
  cert.notAfter.value = notAfter;
  await cert.subjectPublicKeyInfo.importKey(keys.publicKey, crypto);
  const spki = cert.subjectPublicKeyInfo.subjectPublicKey.valueBlock.valueHexView;
  const keyId = new Uint8Array(await webcrypto.subtle.digest('SHA-1', spki));
  // keyUsage bits: digitalSignature (0) and nonRepudiation (1), i.e. 0b11000000 with 6 unused bits.
  const keyUsage = new asn1js.BitString({ valueHex: new Uint8Array([0xc0]).buffer, unusedBits: 6 });
  cert.extensions = [
    new pkijs.Extension({ extnID: OID.basicConstraints, critical: true, extnValue: new pkijs.BasicConstraints({ cA: false }).toSchema().toBER(false) }),
    new pkijs.Extension({ extnID: OID.keyUsage, critical: true, extnValue: keyUsage.toBER(false) }),
    new pkijs.Extension({ extnID: OID.extKeyUsage, critical: false, extnValue: new pkijs.ExtKeyUsage({ keyPurposes: [OID.documentSigning, OID.emailProtection] }).toSchema().toBER(false) }),
    new pkijs.Extension({ extnID: OID.subjectKeyIdentifier, critical: false, extnValue: new asn1js.OctetString({ valueHex: keyId }).toBER(false) }),
  ];
  await cert.sign(keys.privateKey, 'SHA-256', crypto);
  return Buffer.from(cert.toSchema(true).toBER(false));
}
