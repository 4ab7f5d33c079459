import type { ServiceModule } from '../../server/module.ts';
import { keysAdmin } from './admin.ts';
import { keysAuditWords } from './audit.ts';
import { KEYS_CSS, keysNavigation, keysRoutes } from './pages.ts';

/**
 * API keys, a platform feature: the API keys settings page (`/settings/keys`) and the operator's
 * key commands (`key access`, `key delegation`, `workspace api-keys`). The key credential itself (how a
 * request's key is checked) is the kernel's credential registry; what a key may be is server/admin.ts.
 */
export const keys: ServiceModule<'keys'> = {
  namespace: 'keys',
  handlers: {},
  routes: (deps) => keysRoutes(deps),
  navigation: () => keysNavigation,
  stylesheet: KEYS_CSS,
  admin: keysAdmin,
  audit: keysAuditWords,
};
