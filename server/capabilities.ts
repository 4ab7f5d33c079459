/**
 * Named capabilities of member roles, read from the document's `x-service-member-roles` (the generated
 * catalogue), so that "who may" is written once and the document says it.
 */
import { memberRoles } from '../generated/catalogue.ts';

/**
 * May manage the workspace's settings (approve and change webhooks, pause and resume rules, and the
 * settings pages to come): a role that writes every shared record type (`"*": [read, write]`), that
 * is owners and admins.
 */
export function mayManageSettings(role: string): boolean {
  return Object.hasOwn(memberRoles, role) && (memberRoles[role]!['*'] ?? []).includes('write');
}
