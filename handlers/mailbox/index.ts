import type { ServiceEnv } from '../../server/config.ts';
import type { ServiceModule } from '../../server/module.ts';
import { mailAdmin } from './admin.ts';
import { MAILBOX_CSS, mailboxNavigation, mailboxRoutes } from './pages.ts';

/** The mailbox module's settings. */
export interface MailboxSettings {
  /**
   * Whether the development mailbox's page `/mailbox` may exist (MAILBOX_PAGE `on`/`off`): by default on
   * in development and off with NODE_ENV=production, where only an operator turns it on. It never exists
   * while mail is sent through SMTP (SMTP_URL): the mail left the service.
   */
  readonly page: boolean;
  /** Why the page is on or off, for the start log (`MAILBOX_PAGE=on`, `NODE_ENV=production`, …). */
  readonly pageBecause: string;
}

/** MAILBOX_PAGE: `on` or `off`; unset means on unless NODE_ENV=production. */
export function mailboxSettings(env: ServiceEnv): MailboxSettings {
  const production = env.NODE_ENV?.trim() === 'production';
  const raw = env.MAILBOX_PAGE?.trim();
  if (raw) {
    const set = raw.toLowerCase();
    if (set !== 'on' && set !== 'off') throw new Error(`MAILBOX_PAGE must be on or off (got "${raw}")`);
    return { page: set === 'on', pageBecause: `MAILBOX_PAGE=${set}${production && set === 'on' ? ' with NODE_ENV=production' : ''}` };
  }
  return { page: !production, pageBecause: production ? 'NODE_ENV=production' : 'NODE_ENV is not production' };
}

/** The start log's line about the page: whether it is on, why, and what it shows. */
export function mailboxStartupLine(settings: MailboxSettings, smtp: boolean): { level: 'info' | 'warn'; fields: Record<string, string>; message: string } {
  if (smtp) return { level: 'info', fields: { mailbox_page: 'off' }, message: 'mailbox: the page /mailbox is off (SMTP_URL is set: mail leaves the service)' };
  const page = settings.page
    ? `the page /mailbox is on (${settings.pageBecause}): owners and admins see their workspace’s mail (recipients, subjects, text) with links hidden, ` +
      'except mail addressed to themselves, whose links work; MAILBOX_PAGE=off turns it off'
    : `the page /mailbox is off (${settings.pageBecause}); MAILBOX_PAGE=on turns it on`;
  return {
    // A development page an operator turned on in production is said loudly.
    level: settings.page && settings.pageBecause.endsWith('with NODE_ENV=production') ? 'warn' : 'info',
    fields: { mailbox_page: settings.page ? 'on' : 'off' },
    message: `mailbox: operators read the development mailbox with \`npm run admin -- mail list\` and \`npm run admin -- mail show --id ml_...\`; ${page}`,
  };
}

/** Whether this process serves the page: the mail stays in the mailbox (no SMTP_URL) and MAILBOX_PAGE allows it. */
const served = (deps: { mailer: { kind: string }; settings: MailboxSettings }) => deps.mailer.kind === 'mailbox' && deps.settings.page;

/**
 * The development mailbox's reading side, a platform feature: the page `/mailbox` (owners and admins,
 * links live only in their own mail) and the operator's `mail list` / `mail show`. The mailbox itself
 * (where mail goes without SMTP_URL) is the kernel's mailer (server/mailer/mailbox.ts).
 */
export const mailbox: ServiceModule<'mailbox', MailboxSettings> = {
  namespace: 'mailbox',
  handlers: {},
  config: mailboxSettings,
  routes: (deps) => {
    // Said once per process, when the module's routes are made: whether the page is on, and why.
    const line = mailboxStartupLine(deps.settings, deps.mailer.kind !== 'mailbox');
    deps.logger[line.level](line.fields, line.message);
    return served(deps) ? mailboxRoutes(deps.pages, deps.db) : deps.pages.router();
  },
  navigation: (deps) => (served(deps) ? mailboxNavigation : []),
  stylesheet: MAILBOX_CSS,
  admin: mailAdmin,
  // A mail's id is cut from the request log like a sign-in link.
  secretPaths: ['/mailbox/'],
};
