import type { Credential, MemberInfo } from '../../server/credentials.ts';
import { roleAllows } from '../../server/roles.ts';

/**
 * Whether a caller reads every type of a subscription or proposal: the credential's grant on each
 * (a member's session holds its role's access) and, acting for a member, that member's role. The one
 * rule of the API (ListWebhookSubscriptions and the operations on one subscription) and the pages.
 */
export function readsEveryType(credential: Pick<Credential, 'resources'>, member: Pick<MemberInfo, 'role'> | null, types: readonly string[]): boolean {
  return types.every((t) => Boolean(credential.resources.get(t)?.has('read')) && (!member || roleAllows(member.role, t, 'read')));
}
