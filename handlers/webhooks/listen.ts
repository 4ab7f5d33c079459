/**
 * `npm run webhooks:listen` (`npm run admin -- webhooks listen`): receives a workspace's webhook
 * deliveries on a developer's machine, as `stripe listen` does, with no public address, no CA and no
 * egress setting. Development only: refused when NODE_ENV is production.
 *
 * It adds a listener subscription (destination `listen://<host>/<pid>`, no proposal: the operator's
 * CLI holds the database already), delivering with a member's access like a webhook added on the
 * dashboard (access.ts), and runs a delivery worker of its own for that one subscription (worker.ts,
 * `DeliveryWorkerScope`): the service's fan-out makes its deliveries as for any subscription, the
 * service's workers leave them alone, and this process attempts them: each is signed exactly as a real
 * delivery, verified here with the client package's `verifyWebhook` (the receiver's own check), printed,
 * and, with `--forward-to`, posted to a local address (loopback only) whose answer is the attempt's
 * outcome (a failure is retried on the usual schedule). Attempts are recorded and shown on the
 * webhook's page like any other. Ctrl+C deletes the subscription and its deliveries; a listener left
 * behind by a killed process on this host is deleted by the next one.
 */
import os from 'node:os';
import type { Logger } from 'pino';
import { verifyWebhook, WebhookVerificationError } from '../../client/src/webhooks.ts';
import type { Database } from '../../db/database.ts';
import { resourceTypes } from '../../generated/catalogue.ts';
import { AdminError } from '../../server/admin.ts';
import type { Clock } from '../../server/clock.ts';
import type { ServiceConfig } from '../../server/config.ts';
import type { PostOutcome } from '../../server/egress.ts';
import { newId } from '../../server/ids.ts';
import { roleAllows } from '../../server/roles.ts';
import type { MemberRole } from '../../db/rows.ts';
import { OPERATOR, recordAudit } from '../../server/audit.ts';
import { findSubscription, insertSubscription, LISTENER_SCHEME, LISTENER_STALE_MS, touchListener, type WebhookEventName } from './queries.ts';
import { newSigningSecret, previousSecret } from './signatures.ts';
import { deleteSubscription, newSubscriptionRow } from './subscriptions.ts';
import { RESPONSE_BODY_BYTES } from './delivery.ts';
import { deliveryWorker } from './worker.ts';

export interface ListenOptions {
  workspaceId: string;
  /** Whose access it delivers with (default: the workspace's first active owner). */
  memberId?: string;
  event: string;
  types: string[];
  /** A loopback http(s) address the deliveries are also posted to. */
  forwardTo?: string;
}

export interface Listener {
  readonly webhookId: string;
  /** Attempts what is due now (the loop calls it; tests too); resolves when they are recorded. */
  poll(): Promise<void>;
  /** Stops, deletes the subscription and its deliveries; how many deliveries were printed. */
  stop(): Promise<{ webhook_id: string; received: number; forwarded_failed: number }>;
}

const RECORD_EVENTS = ['resource.created', 'resource.updated', 'resource.deleted'];
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);
const FORWARD_TIMEOUT_MS = 10_000;

/** At most `max` bytes of an answer's body (the rest is not read), as UTF-8 text. */
async function boundedText(res: Response, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  const reader = res.body?.getReader();
  if (!reader) return '';
  while (size < max) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(Buffer.from(value));
    size += value.byteLength;
  }
  await reader.cancel().catch(() => undefined);
  return Buffer.concat(chunks).subarray(0, max).toString('utf8');
}

const listenerUrl = (pid: number) => `${LISTENER_SCHEME}//${os.hostname().toLowerCase().replace(/[^a-z0-9.-]/g, '-')}/${pid}`;
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** Checks the options, adds the listener subscription and returns the listener (not yet polling). */
export async function startListener(
  deps: { db: Database; clock: Clock; logger: Logger; config: ServiceConfig; env?: NodeJS.ProcessEnv },
  o: ListenOptions,
  print: (line: string) => void,
): Promise<Listener> {
  const { db, clock } = deps;
  if ((deps.env ?? process.env).NODE_ENV === 'production') throw new AdminError('webhooks listen is for development only: NODE_ENV is production here');
  // The service it listens to must be a local one: PUBLIC_URL on this machine (a deployment's is public).
  if (!LOOPBACK.has(new URL(deps.config.publicUrl).hostname)) throw new AdminError(`webhooks listen is for development only: PUBLIC_URL (${deps.config.publicUrl}) is not an address on this machine`);
  if (!(RECORD_EVENTS.includes(o.event) || o.event.startsWith('signing.') || o.event === 'documents.upload.completed')) throw new AdminError(`--event: ${o.event} is not an event webhooks deliver`);
  const record = RECORD_EVENTS.includes(o.event);
  if (record && !o.types.length) throw new AdminError(`--types: ${o.event} needs at least one record type (${resourceTypes.join(', ')})`);
  if (!record && o.types.length) throw new AdminError(`--types: ${o.event} is not a record change; leave --types out`);
  const unknown = o.types.find((t) => !(resourceTypes as readonly string[]).includes(t));
  if (unknown) throw new AdminError(`--types: ${unknown} is not a record type (${resourceTypes.join(', ')})`);
  let forward: URL | undefined;
  if (o.forwardTo) {
    try {
      forward = new URL(o.forwardTo);
    } catch {
      throw new AdminError(`--forward-to: ${o.forwardTo} is not a URL`);
    }
    if (!/^https?:$/.test(forward.protocol) || !LOOPBACK.has(forward.hostname)) throw new AdminError('--forward-to: only an http(s) address on this machine (localhost, 127.0.0.1 or [::1])');
  }
  const ws = await db.sql.one<{ id: string }>(`SELECT id FROM workspaces WHERE id = ?`, [o.workspaceId]);
  if (!ws) throw new AdminError(`no workspace ${o.workspaceId}`);
  const members = await db.sql.all<{ id: string; role: MemberRole; name: string }>(`SELECT id, role, name FROM members WHERE workspace_id = ? AND disabled_at IS NULL ORDER BY created_at, id`, [o.workspaceId]);
  const member = o.memberId ? members.find((m) => m.id === o.memberId) : members.find((m) => m.role === 'owner');
  if (!member) throw new AdminError(o.memberId ? `--member: ${o.memberId} is not an active member of ${o.workspaceId}` : `${o.workspaceId} has no active owner: name the member whose access it delivers with (--member)`);
  const unread = o.types.find((t) => !roleAllows(member.role, t, 'read'));
  if (unread) throw new AdminError(`--member: ${member.name} (${member.role}) may not read ${unread}`);

  // A listener of this host whose process is gone: its subscription is deleted.
  const prefix = listenerUrl(0).replace(/0$/, '');
  for (const left of await db.sql.all<{ id: string; url: string }>(`SELECT id, url FROM webhook_subscriptions WHERE workspace_id = ? AND url LIKE ?`, [o.workspaceId, `${prefix}%`])) {
    const pid = Number(left.url.slice(prefix.length));
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && !alive(pid)) {
      await deleteSubscription(db, o.workspaceId, left.id);
      print(`Deleted the listener ${left.id} left by process ${pid}, which is gone.`);
    }
  }

  const now = clock.now();
  const secret = newSigningSecret();
  // No proposal: the operator's CLI adds it (delivering with the member's access, signed by v1).
  const row = newSubscriptionRow({
    id: newId('wh'),
    workspaceId: o.workspaceId,
    url: listenerUrl(process.pid),
    event: o.event as WebhookEventName,
    resourceTypes: JSON.stringify(o.types),
    secret,
    proposalId: '',
    approvedBy: 'operator',
    accessKeyId: null,
    accessMemberId: member.id,
    now,
  });
  await db.tx(async (sql) => {
    await insertSubscription(sql, row);
    await recordAudit(sql, { workspaceId: o.workspaceId, actor: OPERATOR, action: 'webhook.approved', subject: { type: 'webhook', id: row.id, label: `${o.event} to ${row.url}` }, details: { listener: true, event: o.event, resource_types: o.types, delivers_as_member: member.id }, at: now });
  });

  let received = 0;
  let forwardFailed = 0;
  const egress = {
    async post(_url: string, init: { headers: Record<string, string>; body: string | Buffer }): Promise<PostOutcome> {
      const started = performance.now();
      const body = typeof init.body === 'string' ? init.body : init.body.toString('utf8');
      let line: string;
      // The subscription's secrets as they are now (a rotation on the webhook's page signs with the new one).
      const current = await findSubscription(db.sql, o.workspaceId, row.id);
      const previous = current && previousSecret(current, clock.now());
      const secrets = current ? [current.secret, ...(previous ? [previous] : [])] : [secret];
      try {
        const event = verifyWebhook(secrets, init.headers, body, { now: clock.now() }) as unknown as Record<string, unknown>;
        received += 1;
        const what = event.record_id ? `${String(event.resource_type)} ${String(event.record_id)}${Array.isArray(event.changed_fields) ? ` changed: ${event.changed_fields.join(', ')}` : ''}` : event.data ? JSON.stringify(event.data) : `webhook ${String(event.webhook_id)}`;
        line = `${new Date(clock.now()).toISOString()}  ${String(event.event)}  ${what}  (event ${String(event.event_id)}, signature verified)`;
      } catch (err) {
        if (!(err instanceof WebhookVerificationError)) throw err;
        print(`A delivery failed verification: ${err.message}`);
        return { kind: 'response', status: 400, headers: {}, body: `verification failed: ${err.message}`, truncated: false, durationMs: performance.now() - started, address: 'listener' };
      }
      if (!forward) {
        print(line);
        return { kind: 'response', status: 200, headers: {}, body: 'printed by webhooks listen', truncated: false, durationMs: performance.now() - started, address: 'listener' };
      }
      try {
        const res = await fetch(forward, { method: 'POST', headers: init.headers, body, redirect: 'manual', signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS) });
        const answer = await boundedText(res, RESPONSE_BODY_BYTES);
        const ms = Math.round(performance.now() - started);
        if (res.status < 200 || res.status >= 300) forwardFailed += 1;
        print(`${line}\n  → ${forward.href}: HTTP ${res.status} in ${ms} ms`);
        return { kind: 'response', status: res.status, headers: {}, body: answer, truncated: false, durationMs: ms, address: forward.host };
      } catch (err) {
        forwardFailed += 1;
        const message = err instanceof Error ? err.message : String(err);
        print(`${line}\n  → ${forward.href}: not delivered (${message}); retried on the usual schedule`);
        return { kind: 'error', error: `forward to ${forward.host} failed: ${message}`, durationMs: performance.now() - started, address: forward.host };
      }
    },
  };
  const worker = deliveryWorker({ db, clock, logger: deps.logger, config: deps.config, workers: { wake: () => {} }, egress: undefined as never, eventKinds: new Map() }, { only: row.id, egress });
  print(`Listening for ${o.event}${o.types.length ? ` of ${o.types.join(', ')}` : ''} in ${o.workspaceId} as ${member.name} (${member.role}): webhook ${row.id}${forward ? `, forwarding to ${forward.href}` : ''}.`);
  print('Deliveries are made by the running service (npm start, or its worker). Press Ctrl+C to stop; the listener is deleted then.');
  let polling: Promise<void> = Promise.resolve();
  let lastBeat = now;
  return {
    webhookId: row.id,
    poll() {
      polling = (async () => {
        // The heartbeat: without it (a killed process) the service stops making deliveries for it.
        if (clock.now() - lastBeat >= LISTENER_STALE_MS / 4) {
          lastBeat = clock.now();
          await touchListener(db.sql, row.id, lastBeat);
        }
        while ((await worker.runOnce()) > 0) await worker.drain();
        await worker.drain();
      })();
      return polling;
    },
    async stop() {
      // A poll still running finishes first: nothing is claimed while the subscription is deleted.
      await polling.catch(() => undefined);
      await worker.drain();
      await deleteSubscription(db, o.workspaceId, row.id).catch(() => false);
      return { webhook_id: row.id, received, forwarded_failed: forwardFailed };
    },
  };
}
