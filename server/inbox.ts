/**
 * The member inbox: service notices to people (automation notices, webhook disabling, signing
 * progress), written in the transaction of what caused them, so a rolled-back cause leaves none.
 * Members read them on the inbox page after signing in.
 */
import type { Sql } from '../db/database.ts';
import { memberRoleNames } from '../generated/catalogue.ts';
import { mayManageSettings } from './capabilities.ts';
import { activeMembersWithRoles, insertNotification, isActiveMember } from '../db/queries/inbox.ts';
import { newId } from './ids.ts';

export interface Notice {
  /** What kind of notice (`automation.notice`, `webhooks.disabled`, ...). */
  readonly kind: string;
  readonly title: string;
  readonly body: string;
  /** A path on this service to act on the notice. */
  readonly link?: string | null;
  /** The id of what caused it (a run, a subscription). */
  readonly sourceId?: string | null;
}

/** The roles that may manage the workspace's settings (owners and admins): who `ownersAndAdmins` reaches. */
const SETTINGS_ROLES = memberRoleNames.filter(mayManageSettings);

/** Who receives a notice: the workspace's active owners and admins, or named members (inactive ones are left out). */
export type Recipients = { readonly ownersAndAdmins: true } | { readonly members: readonly string[] };

/** Writes the notice to each recipient's inbox in `sql`; returns the member ids that received it. */
export async function notify(sql: Sql, workspaceId: string, to: Recipients, notice: Notice, now: number): Promise<string[]> {
  let members: string[];
  if ('ownersAndAdmins' in to) members = await activeMembersWithRoles(sql, workspaceId, SETTINGS_ROLES);
  else {
    members = [];
    for (const id of new Set(to.members)) if (await isActiveMember(sql, workspaceId, id)) members.push(id);
  }
  for (const member of members) {
    await insertNotification(sql, {
      id: newId('nt'),
      workspace_id: workspaceId,
      member_id: member,
      kind: notice.kind,
      title: notice.title.slice(0, 300),
      body: notice.body,
      link: notice.link ?? null,
      source_id: notice.sourceId ?? null,
      created_at: now,
      read_at: null,
    });
  }
  return members;
}
