import type { Command } from 'commander';
import { AdminError } from '../../server/admin.ts';
import type { AdminDeps } from '../../server/module.ts';
import { loadConfig } from '../../server/config.ts';
import pino from 'pino';
import { startListener } from './listen.ts';
import { listSubscriptions } from './queries.ts';
import { OPERATOR } from '../../server/audit.ts';
import { changeSigningContract, deleteSubscription, disableSubscription, enableSubscription, recordMeetingCompleted, rotateSecret, WebhookActionError } from './subscriptions.ts';

const wrap = async <T>(work: () => Promise<T>): Promise<T> => {
  try {
    return await work();
  } catch (err) {
    if (err instanceof WebhookActionError) throw new AdminError(err.message);
    throw err;
  }
};

/**
 * `npm run admin -- webhooks list | listen | disable | enable | rotate-secret | signing-contract | delete |
 * meeting-completed` (`webhook` is the same group). Rotations and signing-contract moves are audited
 * with the operator as actor.
 */
export function webhooksAdmin(program: Command, { withDb, clock }: AdminDeps): void {
  const webhooks = program.command('webhooks').alias('webhook').description('webhook subscriptions (proposed with webhooks.PrepareWebhook, approved on the settings page)');
  const ws = '--workspace <id>';
  webhooks
    .command('listen')
    .requiredOption(ws, 'workspace id (ws_...)')
    .option('--event <name>', 'the event to receive', 'resource.updated')
    .option('--types <list>', 'record types, comma-separated (record events), e.g. core:Deal,core:Company')
    .option('--member <id>', "whose access it delivers with (default: the workspace's first active owner)")
    .option('--forward-to <url>', 'also post each delivery to this address on this machine (http://localhost:3000/webhooks)')
    .description('development only: receive, verify and print deliveries here (and forward them locally) until Ctrl+C; no public address or CA needed')
    .action((o: { workspace: string; event: string; types?: string; member?: string; forwardTo?: string }) =>
      withDb(async (db) => {
        const logger = pino({ level: 'warn' }, pino.destination(2));
        // Ctrl+C is taken from before the first line says to press it.
        const stopped = new Promise<void>((resolve) => {
          process.once('SIGINT', resolve);
          process.once('SIGTERM', resolve);
        });
        const listener = await wrap(() =>
          startListener({ db, clock, logger, config: loadConfig() }, { workspaceId: o.workspace, event: o.event, types: (o.types ?? '').split(',').map((t) => t.trim()).filter(Boolean), memberId: o.member, forwardTo: o.forwardTo }, (line) => process.stdout.write(`${line}\n`)),
        );
        let busy = false;
        const timer = setInterval(() => {
          if (busy) return;
          busy = true;
          listener.poll().catch((err: unknown) => logger.error({ err }, 'webhooks listen: an attempt could not be recorded')).finally(() => (busy = false));
        }, 500);
        await stopped;
        clearInterval(timer);
        return listener.stop();
      }),
    );
  webhooks
    .command('list')
    .requiredOption(ws, 'workspace id (ws_...)')
    .description("a workspace's subscriptions with their destination and the key (and member) whose access they deliver with (never the secret)")
    .action((o: { workspace: string }) =>
      withDb(async (db) =>
        (await listSubscriptions(db.sql, o.workspace, null, 1000)).map((s) => ({
          webhook_id: s.id,
          url: s.url,
          event: s.event,
          resource_types: JSON.parse(s.resource_types) as string[],
          enabled: Boolean(s.enabled),
          consecutive_failures: Number(s.consecutive_failures),
          disabled_reason: s.disabled_reason,
          delivers_as: { key: s.access_key_id, member: s.access_member_id },
          access_lost: s.access_lost,
          signing_contract: s.signing_contract,
        })),
      ),
    );
  webhooks
    .command('disable')
    .requiredOption(ws, 'workspace id')
    .requiredOption('--id <id>', 'webhook id (wh_...)')
    .description('stop delivering new events to a subscription')
    .action((o: { workspace: string; id: string }) => withDb((db) => wrap(async () => ({ webhook_id: o.id, disabled: await disableSubscription(db, clock, o.workspace, o.id, 'operator') }))));
  webhooks
    .command('enable')
    .requiredOption(ws, 'workspace id')
    .requiredOption('--id <id>', 'webhook id (wh_...)')
    .description('send a test delivery and, when it succeeds, enable the subscription again (failure count cleared)')
    .action((o: { workspace: string; id: string }) =>
      withDb((db) =>
        wrap(async () => {
          const test = await enableSubscription(db, clock, o.workspace, o.id, loadConfig().egress);
          if (!test.ok) throw new AdminError(`the test delivery failed (${test.error}); the subscription stays disabled`);
          return { webhook_id: o.id, enabled: true, test };
        }),
      ),
    );
  webhooks
    .command('rotate-secret')
    .requiredOption(ws, 'workspace id')
    .requiredOption('--id <id>', 'webhook id (wh_...)')
    .description('make a new signing secret (printed once); the old one still signs beside it for 24 h')
    .action((o: { workspace: string; id: string }) => withDb((db) => wrap(() => rotateSecret(db, clock, o.workspace, o.id, OPERATOR))));
  webhooks
    .command('signing-contract')
    .requiredOption('--id <id>', 'webhook id (wh_...)')
    .requiredOption('--to <contract>', 'v1: the timestamped signature (the only move; one-way)')
    .option(ws, 'workspace id (optional: when given, the webhook must belong to it)')
    .description(
      'move a legacy (bare HMAC) subscription to the timestamped v1 signature, for good: the receiver must first read X-Webhook-Timestamp, ' +
        'verify v1= HMAC-SHA256 over "<timestamp>.<body>", reject timestamps over 5 minutes off, and accept both formats until the move',
    )
    .action((o: { id: string; to: string; workspace?: string }) => withDb((db) => wrap(() => changeSigningContract(db, clock, o.workspace ?? null, o.id, o.to, OPERATOR))));
  webhooks
    .command('delete')
    .requiredOption(ws, 'workspace id')
    .requiredOption('--id <id>', 'webhook id (wh_...)')
    .description('delete a subscription and its delivery history')
    .action((o: { workspace: string; id: string }) => withDb((db) => wrap(async () => ({ webhook_id: o.id, deleted: await deleteSubscription(db, o.workspace, o.id) }))));
  webhooks
    .command('meeting-completed')
    .requiredOption(ws, 'workspace id')
    .requiredOption('--meeting <id>', 'the meeting id (from the meetings integration)')
    .description('record a completed meeting: a meeting.completed event for the legacy subscriptions (the meetings integration is outside this service)')
    .action((o: { workspace: string; meeting: string }) => withDb((db) => wrap(() => recordMeetingCompleted(db, clock, o.workspace, o.meeting))));
}
