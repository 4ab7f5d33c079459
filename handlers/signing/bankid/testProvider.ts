/**
 * The test signing provider (BANKID_PROVIDER=test): it shows the bankid flow end to end without a real
 * eID, and is refused when NODE_ENV=production. Its page is served by this service under
 * `/sign/<token>/bankid/test/<order>` and says TEST in its title, its banner and its button: the signer
 * enters a test personal number (Swedish format, YYYYMMDDNNNN with a valid check digit; nothing is
 * looked up) and confirms. The provider then signs the working PDF with a certificate made for this
 * signer ("<name> (BankID TEST)", self-signed, issued by no one) through the service's seal
 * (seal.ts): one PAdES signature per signer, each an incremental update, so earlier signatures stay
 * valid and `pdfsig` lists one valid signature per signer.
 */
import { createHash } from 'node:crypto';
import { createServiceCertificate, loadStoredCertificate } from '../archive/sealCertificate.ts';
import { ProviderRefusal, type ProviderCompleteInput, type ProviderCompleteResult, type ProviderStartInput, type ProviderStartResult, type SigningProvider } from './provider.ts';
import { seal } from '../archive/seal.ts';

/** A personal number as the test page takes it: 12 digits, an optional `-` or `+` before the last four. */
const PERSONAL_NUMBER = /^(\d{8})[-+]?(\d{4})$/;

/** The Luhn check digit of the nine digits YYMMDDNNN (Swedish personal numbers). */
function checkDigit(nine: string): number {
  let sum = 0;
  for (let i = 0; i < 9; i++) {
    const d = Number(nine[i]) * (i % 2 === 0 ? 2 : 1);
    sum += d > 9 ? d - 9 : d;
  }
  return (10 - (sum % 10)) % 10;
}

/**
 * The personal number in its 12-digit form, or a ProviderRefusal saying what is wrong: a real date of
 * birth (or a coordination number, day + 60) not in the future, and the check digit.
 */
export function parsePersonalNumber(raw: string, now: number): string {
  const m = PERSONAL_NUMBER.exec(raw.trim());
  if (!m) throw new ProviderRefusal('personal_number', 'Enter a personal number of 12 digits: YYYYMMDDNNNN (for example 199001011239).');
  const [date, tail] = [m[1]!, m[2]!];
  const year = Number(date.slice(0, 4));
  const month = Number(date.slice(4, 6));
  const rawDay = Number(date.slice(6, 8));
  const day = rawDay > 60 ? rawDay - 60 : rawDay;
  const born = Date.UTC(year, month - 1, day);
  const valid = new Date(born);
  if (year < 1900 || valid.getUTCFullYear() !== year || valid.getUTCMonth() !== month - 1 || valid.getUTCDate() !== day || born > now) {
    throw new ProviderRefusal('personal_number', `The personal number does not start with a date of birth (YYYYMMDD): ${date.slice(0, 4)}-${date.slice(4, 6)}-${date.slice(6, 8)} is not one.`);
  }
  if (checkDigit(date.slice(2) + tail.slice(0, 3)) !== Number(tail[3])) throw new ProviderRefusal('personal_number', 'The personal number’s last digit (its check digit) is wrong. Check the number and try again.');
  return date + tail;
}

/** A valid test personal number for a date of birth and a serial (tests and the page's example). */
export function testPersonalNumber(yyyymmdd: string, serial = '123'): string {
  return `${yyyymmdd}${serial}${checkDigit(yyyymmdd.slice(2) + serial)}`;
}

export const TEST_PROVIDER_NAME = 'BankID (test)';

export const testProvider: SigningProvider = {
  id: 'test',
  name: TEST_PROVIDER_NAME,
  test: true,

  async start(input: ProviderStartInput): Promise<ProviderStartResult> {
    // The provider's page is one of this service's (bankidFlow.ts serves it from the order).
    return { redirect: `${input.pagesPath}/test/${input.orderId}` };
  },

  async complete(input: ProviderCompleteInput): Promise<ProviderCompleteResult> {
    const personalNumber = parsePersonalNumber(input.params.personal_number ?? '', input.now);
    const signedAt = new Date(input.now);
    const subject = `${input.signer.name} (BankID TEST)`;
    // One certificate per signature, so that a PDF reader names each signer; 2048-bit keys keep it quick.
    const certificate = await loadStoredCertificate(
      await createServiceCertificate({ commonName: subject, organization: 'TEST signing provider, not a real eID', now: signedAt, validYears: 2, modulusLength: 2048 }),
    );
    const pdf = await seal(input.document, {
      certificate,
      reason: `Signed with ${TEST_PROVIDER_NAME} by ${input.signer.name}: ${input.title} (request ${input.requestId})`,
      location: 'TEST provider',
      signedAt,
    });
    return {
      pdf,
      evidence: {
        provider: 'test',
        test: true,
        order_id: input.orderId,
        method: 'test personal number (no identity checked)',
        personal_number: personalNumber,
        name: input.signer.name,
        signed_at: input.now,
        certificate_subject: certificate.subject,
        certificate_fingerprint: certificate.fingerprint,
        document_sha256: createHash('sha256').update(input.document).digest('hex'),
        signed_sha256: createHash('sha256').update(pdf).digest('hex'),
      },
    };
  },
};
