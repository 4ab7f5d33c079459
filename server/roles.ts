import type { MemberRole } from '../db/rows.ts';
import { type Access, memberRoles } from '../generated/catalogue.ts';

/** The access a member role has on a resource type (x-service-member-roles; `*` covers the rest). */
export function roleAccess(role: MemberRole, resourceType: string): readonly Access[] {
  const grants = memberRoles[role];
  return grants?.[resourceType] ?? grants?.['*'] ?? [];
}

/** Whether a member role grants access to a resource type (x-service-member-roles). */
export function roleAllows(role: MemberRole, resourceType: string, access: Access): boolean {
  return roleAccess(role, resourceType).includes(access);
}
