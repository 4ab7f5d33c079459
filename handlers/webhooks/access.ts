/**
 * A subscription delivers with the access of the key that proposed it and the member that key acted
 * for (one added on the dashboard: the member who added it, by their role), judged when deliveries are made (seed 5.6: revocation reaches background callbacks). A revoked
 * key, a disabled member, a key that may no longer act for that member, or lost `read` on a
 * subscribed type (the key's grant or the member's role) stops it: it is disabled with the reason
 * recorded (`access_lost`, `disabled_reason`), and the workspace's owners and admins get an inbox
 * notice. A key replaced by a new one (`npm run admin -- key replace`) hands its subscriptions to the
 * replacement once it is revoked, so rotating a key never silently stops its webhooks.
 */
import { LRUCache } from 'lru-cache';
import type { Sql } from '../../db/database.ts';
import type { MemberRole } from '../../db/rows.ts';
import type { Access } from '../../generated/catalogue.ts';
import { notify } from '../../server/inbox.ts';
import { roleAllows } from '../../server/roles.ts';
import {
  type DbWebhookSubscriptionRow,
  handOver,
  keyActsFor,
  keyForAccess,
  memberForAccess,
  replacementOf,
  stopForLostAccess,
} from './queries.ts';

export type AccessLoss = 'key_revoked' | 'member_disabled' | 'delegation_lost' | 'read_lost';
export type AccessVerdict = { ok: true } | { ok: false; loss: AccessLoss; reason: string };

const MAX_REPLACEMENTS = 20;

type Subscription = Pick<DbWebhookSubscriptionRow, 'id' | 'workspace_id' | 'resource_types' | 'access_key_id' | 'access_member_id'>;

/** Whether the subscription's key and member still read every type; hands it to a replacing key on the way. */
export async function judgeAccess(sql: Sql, s: Subscription, now: number): Promise<AccessVerdict> {
  const lost = (loss: AccessLoss, reason: string): AccessVerdict => ({ ok: false, loss, reason });
  if (!s.access_key_id) {
    if (!s.access_member_id) return lost('key_revoked', 'the key that proposed it is no longer known');
    return judgeMemberAccess(s, s.access_member_id, lost, sql);
  }
  let key = await keyForAccess(sql, s.workspace_id, s.access_key_id);
  const original = key;
  for (let hop = 0; key && key.revoked_at !== null && hop < MAX_REPLACEMENTS; hop++) {
    const next = await replacementOf(sql, s.workspace_id, key.id);
    if (!next) break;
    key = await keyForAccess(sql, s.workspace_id, next.id);
  }
  if (!key || key.revoked_at !== null) {
    return lost('key_revoked', `the key ${original ? `"${original.name}" (${original.id})` : s.access_key_id} that proposed it was revoked`);
  }
  if (key.id !== s.access_key_id) await handOver(sql, s.id, s.access_key_id, key.id, now);
  const types = JSON.parse(s.resource_types) as string[];
  const grants = JSON.parse(key.resources) as Record<string, Access[]>;
  const unread = types.find((t) => !grants[t]?.includes('read'));
  if (unread) return lost('read_lost', `the key "${key.name}" (${key.id}) may no longer read ${unread}`);
  if (!s.access_member_id) return { ok: true };
  const member = await memberForAccess(sql, s.workspace_id, s.access_member_id);
  if (!member || member.disabled_at !== null) return lost('member_disabled', `member ${s.access_member_id}, for whom it was proposed, was disabled`);
  const delegated = key.delegation === 'all' || (key.delegation === 'selected' && (await keyActsFor(sql, key.id, member.id)));
  if (!delegated) return lost('delegation_lost', `the key "${key.name}" (${key.id}) may no longer act for member ${member.id}`);
  const roleUnread = types.find((t) => !roleAllows(member.role as MemberRole, t, 'read'));
  if (roleUnread) return lost('read_lost', `member ${member.id} (${member.role}) may no longer read ${roleUnread}`);
  return { ok: true };
}

/**
 * A subscription added on the dashboard (no key): it delivers with the access of the member who added
 * it, their role's `read` on every subscribed type, while they are an active member.
 */
async function judgeMemberAccess(s: Subscription, memberId: string, lost: (loss: AccessLoss, reason: string) => AccessVerdict, sql: Sql): Promise<AccessVerdict> {
  const member = await memberForAccess(sql, s.workspace_id, memberId);
  if (!member || member.disabled_at !== null) return lost('member_disabled', `member ${memberId}, who added it on the dashboard, was disabled or removed`);
  const types = JSON.parse(s.resource_types) as string[];
  const roleUnread = types.find((t) => !roleAllows(member.role as MemberRole, t, 'read'));
  if (roleUnread) return lost('read_lost', `member ${member.id} (${member.role}), who added it on the dashboard, may no longer read ${roleUnread}`);
  return { ok: true };
}

/** Stops a subscription whose access was lost and tells the workspace's owners and admins (once). */
export async function stopSubscription(sql: Sql, s: Pick<DbWebhookSubscriptionRow, 'id' | 'workspace_id' | 'url' | 'event'>, verdict: Extract<AccessVerdict, { ok: false }>, now: number): Promise<boolean> {
  const reason = `access lost: ${verdict.reason}`;
  if (!(await stopForLostAccess(sql, s.id, verdict.loss, reason, now))) return false;
  const host = new URL(s.url).host;
  await notify(sql, s.workspace_id, { ownersAndAdmins: true }, {
    kind: 'webhooks.access_lost',
    title: `Webhook to ${host} stopped: access lost`,
    body: `The webhook to ${host} (${s.event}) delivers with the access of the key that proposed it, and ${verdict.reason}. ` +
      'Nothing new is delivered for it. Propose it again with a key (and member) that may read its types, or restore that access and enable it in settings.',
    link: `/settings/webhooks/${encodeURIComponent(s.id)}`,
    sourceId: s.id,
  }, now);
  return true;
}

/**
 * Verdicts per subscription, kept while the workspace's auth version (moved by every change of keys,
 * grants and members) and the subscription's key stay the same: most attempts cost no extra query.
 */
export class AccessCache {
  private readonly verdicts = new LRUCache<string, { version: number; key: string | null; member: string | null; verdict: AccessVerdict }>({ max: 10_000 });

  async judge(sql: Sql, s: Subscription & { auth_version: number }, now: number): Promise<AccessVerdict> {
    const version = Number(s.auth_version);
    const hit = this.verdicts.get(s.id);
    if (hit && hit.version === version && hit.key === s.access_key_id && hit.member === s.access_member_id) return hit.verdict;
    const verdict = await judgeAccess(sql, s, now);
    this.verdicts.set(s.id, { version, key: s.access_key_id, member: s.access_member_id, verdict });
    return verdict;
  }
}
