/** `npm run admin -- mail list | show`: operators read the whole development mailbox, every mail with its live links (the page `/mailbox` hides links in mail not addressed to its viewer). */
import type { Command } from 'commander';
import { AdminError } from '../../server/admin.ts';
import { limitOption } from '../../server/adminCli.ts';
import type { AdminDeps } from '../../server/module.ts';
import { listMailbox, readMailbox } from '../../server/mailer/mailbox.ts';

/** Adds the `mail` commands to the admin CLI. */
export function mailAdmin(program: Command, deps: AdminDeps): void {
  const mail = program.command('mail').description('the development mailbox: mail the service kept instead of sending (no SMTP_URL); links in it act for their recipients');
  mail
    .command('list')
    .option('--workspace <id>', 'only mail about this workspace (ws_...)')
    .option('--to <address>', 'only mail to this address')
    .option('--tag <tag>', 'only mail of this kind (e.g. signing.invitation)')
    .option('--limit <n>', 'at most this many, newest first (1-500)', '20')
    .description('mail in the development mailbox, newest first: id, time, recipients, subject (kept 7 days)')
    .action((o: { workspace?: string; to?: string; tag?: string; limit: string }) => {
      const limit = limitOption(o.limit);
      return deps.withDb((db) => listMailbox(db, { workspaceId: o.workspace, to: o.to?.trim(), tag: o.tag, limit }));
    });
  mail
    .command('show')
    .requiredOption('--id <id>', 'mail id (ml_..., from mail list)')
    .description('one mail of the development mailbox with its text and HTML bodies')
    .action((o: { id: string }) =>
      deps.withDb(async (db) => {
        const message = await readMailbox(db, o.id);
        if (!message) throw new AdminError(`no mail ${o.id} in the development mailbox (mail is kept 7 days; see mail list)`);
        return message;
      }),
    );
}
