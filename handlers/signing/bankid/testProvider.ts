/**
 * The test signing provider (BANKID_PROVIDER=test): it shows the bankid flow end to end without a real
 * eID, and is refused when NODE_ENV=production. Its page is served by this service under
 * `/sign/<token>/bankid/test/<order>` and says TEST in its title, its banner and its button: the signer
 * enters a test personal number (Swedish format, YYYYMMDDNNNN with a valid check digit; nothing is
 * looked up, personalNumber.ts) and confirms. The provider then signs the working PDF with a
 * certificate made for this signer ("<name> (BankID TEST)", self-signed, issued by no one) through the
 * service's seal (archive/seal.ts): one PAdES signature per signer, each an incremental update, so
 * earlier signatures stay valid and `pdfsig` lists one valid signature per signer.
 *
 * Not part of the production import graph: nothing imports this file statically; provider.ts loads it
 * with a dynamic import the first time a signer starts or completes a bankid signature, which happens
 * only when BANKID_PROVIDER=test, itself refused at start when NODE_ENV=production
 * (test/signing/layout.test.ts checks the graph).
 */
import { createHash } from 'node:crypto';
import { createServiceCertificate, loadStoredCertificate } from '../archive/sealCertificate.ts';
import { seal } from '../archive/seal.ts';
import { parsePersonalNumber } from './personalNumber.ts';
import { type ProviderCompleteInput, type ProviderCompleteResult, type ProviderStartInput, type ProviderStartResult, type SigningProvider, TEST_PROVIDER } from './provider.ts';

export const testProvider: SigningProvider = {
  ...TEST_PROVIDER,

  async start(input: ProviderStartInput): Promise<ProviderStartResult> {
    // The provider's page is one of this service's (flow.ts serves it from the order).
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
      reason: `Signed with ${TEST_PROVIDER.name} by ${input.signer.name}: ${input.title} (request ${input.requestId})`,
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
