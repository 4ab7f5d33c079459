import { unreadCount } from '../../db/queries/inbox.ts';
import type { ServiceModule } from '../../server/module.ts';
import { inboxRoutes } from './pages.ts';

/**
 * The member inbox: the page where a signed-in member reads the service's notices to them
 * (automation notices now; webhook and signing notices later). It has no operations: notices are
 * written by the platform's `notify()` (server/inbox.ts) in the transaction of their cause.
 */
export const inbox: ServiceModule<'inbox'> = {
  namespace: 'inbox',
  handlers: {},
  routes: (deps) => inboxRoutes(deps),
  navigation: ({ db }) => [{ label: 'Inbox', path: '/inbox', order: 40, badge: (viewer) => unreadCount(db.sql, viewer.id), badgeLabel: 'unread' }],
  stylesheet: new URL('./pages/inbox.css', import.meta.url),
};
