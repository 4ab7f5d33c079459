import type { ServiceModule } from '../../server/module.ts';
import { signingAuditWords } from './audit.ts';
import { signingHandlers } from './handlers.ts';
import { SIGNING_EVENT_KINDS } from './outboxEvents.ts';
import { type SigningSettings, signingSettings } from './settings.ts';
import { signingJobs } from './request/jobs.ts';
import { ARCHIVE_JOB } from './request/lifecycle.ts';
import { SIGN_PREFIX } from './signer/links.ts';
import { signerRoutes, viewerBrowserBundle } from './signer/signerPages.ts';
import { bankIdJobs, bankIdRoutes } from './bankid/flow.ts';
import { providerOf } from './bankid/provider.ts';
import { signingCreditAdmin } from './credit/creditAdmin.ts';
import { signingSettingsNavigation, signingSettingsRoutes } from './credit/settingsPage.ts';
import { archiveJob } from './archive/archiveJob.ts';
import { COMPLETED_MAIL_JOB, completedMailJob } from './archive/completedMail.ts';
import { DECLINED_MAIL_JOB, declinedMailJob } from './request/declinedMail.ts';
import { verifyRoutes } from './verify/verifyPage.ts';
import { SENDER_CSS, senderNavigation, senderRoutes } from './sender/senderPages.ts';

/**
 * Signing: the operations (requests over uploaded PDFs, invitations and reminders by e-mail, deadline,
 * cancel, history, documents), the signer's pages behind each recipient's link (`/sign/<token>`, cut
 * from the request log), the sealed archive job, bankid through a signing provider with the
 * workspace's credit, the "completed" mails with the archive's link, and the recurring expiry and
 * reminder jobs. Its history's main kinds are also outbox events (outboxEvents.ts) for rules and webhooks.
 *
 * The folders follow a request from its making to the check of its archive:
 *   handlers.ts, queries.ts, outboxEvents.ts, settings.ts, audit.ts, migrations/   the operations, the
 *                      SQL, the outbox event kinds, the settings, the audit log's words and the tables
 *                      (migration names never change)
 *   request/           a request's state moves (lifecycle.ts), its invitation, reminder and decline
 *                      mails (invitationMail.ts, declinedMail.ts, mail/), the invite, expiry and
 *                      reminder jobs (jobs.ts), templates that make requests (templates.ts), and
 *                      the fields' rules (fieldRules.ts) with the document's text tags (textTags.ts)
 *   signer/            the signer's links (links.ts) and pages behind them (signerPages.ts, pages/:
 *                      templates, CSS and the pdf.js viewer's browser script)
 *   bankid/            signing through a provider instead of a typed name: the provider interface and
 *                      registry (provider.ts), the signer's flow (flow.ts, pages/), personal numbers
 *                      (personalNumber.ts) and the test provider (testProvider.ts, loaded only when
 *                      BANKID_PROVIDER=test: not in the production import graph)
 *   credit/            what a workspace may spend on bankid: the balance and charges (credit.ts), the
 *                      operator's commands (creditAdmin.ts), the settings page (settingsPage.ts, pages/)
 *   archive/           the signed archive of a completed request: the job (archiveJob.ts), its evidence
 *                      pages (evidence.ts, drawn by pdfText.ts with fonts/), the seal (seal.ts) with its
 *                      RFC 3161 timestamp (timestamp.ts) and certificate (sealCertificate.ts: making and
 *                      opening one; sealSettings.ts: which one seals, and which TSA), the registration
 *                      of the file (registerArchive.ts) and the "completed" mails (completedMail.ts, mail/)
 *   sender/            the sender's Documents pages (senderPages.ts, templatePages.ts, pages/, send.js,
 *                      sender.css): the requests a member may see, sending a PDF, a request's timeline
 *                      and its actions, templates, all through the operations with the member's session
 *   verify/            anyone checks a file: the check (verifyDocument.ts, also the operation
 *                      signing.VerifySignedDocument) and the public /verify page (verifyPage.ts, pages/)
 */
export const signing: ServiceModule<'signing', SigningSettings> = {
  namespace: 'signing',
  handlers: signingHandlers,
  config: signingSettings,
  migrations: new URL('./migrations/', import.meta.url),
  secretPaths: [SIGN_PREFIX],
  browserBundles: [viewerBrowserBundle],
  events: SIGNING_EVENT_KINDS,
  jobs: (deps) => ({ ...signingJobs(deps), ...bankIdJobs(deps), [ARCHIVE_JOB]: archiveJob(deps, deps.settings.seal), [COMPLETED_MAIL_JOB]: completedMailJob(deps), [DECLINED_MAIL_JOB]: declinedMailJob(deps) }),
  routes: (deps) => {
    const router = signerRoutes(deps, { bankid: providerOf(deps.settings) });
    bankIdRoutes(router, deps);
    signingSettingsRoutes(router, deps);
    router.use(verifyRoutes(deps));
    router.use(senderRoutes(deps));
    return router;
  },
  navigation: () => [...senderNavigation, ...signingSettingsNavigation],
  stylesheet: SENDER_CSS,
  admin: signingCreditAdmin,
  audit: signingAuditWords,
};
