import type { ServiceModule } from '../../server/module.ts';
import { membersAuditWords } from './audit.ts';
import { MEMBERS_CSS, membersNavigation, membersRoutes } from './pages.ts';

/**
 * Members and invitations, a platform feature: the Members settings page (`/settings/members`), the
 * invitation links (`/signin/invite/<token>`) and their mail. It has no operations of its own.
 */
export const members: ServiceModule<'members'> = {
  namespace: 'members',
  handlers: {},
  migrations: new URL('./migrations/', import.meta.url),
  routes: (deps) => membersRoutes({ ...deps, baseUrl: deps.config.publicUrl }),
  navigation: () => membersNavigation,
  stylesheet: MEMBERS_CSS,
  audit: membersAuditWords,
};
