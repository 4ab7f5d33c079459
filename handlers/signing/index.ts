import type { ServiceModule } from '../../server/module.ts';
import { archiveJob } from './archive/archiveJob.ts';
import { COMPLETED_MAIL_JOB, completedMailJob } from './archive/completedMail.ts';
import { bankIdJobs, bankIdRoutes } from './bankid/flow.ts';
import { providerOf } from './bankid/provider.ts';
import { signingCreditAdmin } from './credit/creditAdmin.ts';
import { signingSettingsNavigation, signingSettingsRoutes } from './credit/settingsPage.ts';
import { signingHandlers } from './handlers.ts';
import { signingJobs } from './request/jobs.ts';
import { SIGN_PREFIX } from './signer/links.ts';
import { SIGNING_EVENT_KINDS } from './outboxEvents.ts';
import { ARCHIVE_JOB } from './request/lifecycle.ts';
import { type SigningSettings, signingSettings } from './settings.ts';
import { signerRoutes, viewerBrowserBundle } from './signer/signerPages.ts';
import { verifyRoutes } from './verify/verifyPage.ts';

/**
 * Signing: the operations (requests over uploaded PDFs, invitations and reminders by e-mail, deadline,
 * cancel, history, documents), the signer's pages behind each recipient's link (`/sign/<token>`, cut
 * from the request log), the sealed archive job, bankid through a signing provider with the
 * workspace's credit, the "completed" mails with the archive's link, and the recurring expiry and
 * reminder jobs. Its history's main kinds are also outbox events (outboxEvents.ts) for rules and webhooks.
 */
export const signing: ServiceModule<'signing', SigningSettings> = {
  namespace: 'signing',
  handlers: signingHandlers,
  config: signingSettings,
  migrations: new URL('./migrations/', import.meta.url),
  secretPaths: [SIGN_PREFIX],
  browserBundles: [viewerBrowserBundle],
  events: SIGNING_EVENT_KINDS,
  jobs: (deps) => ({ ...signingJobs(deps), ...bankIdJobs(deps), [ARCHIVE_JOB]: archiveJob(deps, deps.settings.seal), [COMPLETED_MAIL_JOB]: completedMailJob(deps) }),
  routes: (deps) => {
    const router = signerRoutes(deps, { bankid: providerOf(deps.settings) });
    bankIdRoutes(router, deps);
    signingSettingsRoutes(router, deps);
    router.use(verifyRoutes(deps));
    return router;
  },
  navigation: () => signingSettingsNavigation,
  admin: signingCreditAdmin,
};
