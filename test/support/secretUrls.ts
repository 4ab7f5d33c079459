import { modules } from '../../app.ts';
import { SIGNIN_PREFIX, type SecretUrlParts } from '../../server/logger.ts';
import type { AnyServiceModule } from '../../server/module.ts';

/** What the service's request log cuts (server/logger.ts `redactUrl`): the sign-in prefix and every module's secret paths and queries. */
export const serviceSecretUrls: SecretUrlParts = {
  paths: [SIGNIN_PREFIX, ...modules.flatMap((m: AnyServiceModule) => m.secretPaths ?? [])],
  queries: modules.flatMap((m: AnyServiceModule) => m.secretQueries ?? []),
};
