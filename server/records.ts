import { isDeepStrictEqual } from 'node:util';
import type { Access } from '../generated/catalogue.ts';
import { roleAllows } from './roles.ts';
import { conflict, forbidden, invalidInput } from './errors.ts';
import type { OperationContext } from './operation.ts';

/** The `{"$absent": true}` marker of `expected`. */
export interface AbsentMarker {
  $absent: boolean;
}

function isAbsentMarker(value: unknown): value is AbsentMarker {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 1 && (value as AbsentMarker).$absent === true;
}

/**
 * Compare-and-set check: every key of `expected` must equal the current field (deep equality) or,
 * for the absence marker, the field must be missing. Throws 409 conflict naming the first mismatch.
 */
export function assertExpected(current: Record<string, unknown>, expected: Record<string, unknown> | undefined): void {
  if (!expected) return;
  for (const [key, want] of Object.entries(expected)) {
    const present = Object.prototype.hasOwnProperty.call(current, key);
    const ok = isAbsentMarker(want) ? !present : present && isDeepStrictEqual(current[key], want);
    if (!ok) throw conflict(`expected.${key} does not match the current record; re-read it and decide again. Nothing was written.`);
  }
}

/** Applies `data` (set) and `unset` (remove) to a copy of the current fields. */
export function applyPatch<T extends Record<string, unknown>>(current: T, set: Partial<T> | undefined, unset: readonly string[] | undefined): T {
  const both = (unset ?? []).filter((k) => set && Object.prototype.hasOwnProperty.call(set, k));
  if (both.length) throw invalidInput(`${both.join(', ')} cannot be both set in data and listed in unset.`);
  const next: Record<string, unknown> = { ...current };
  for (const [key, value] of Object.entries(set ?? {})) if (value !== undefined) next[key] = value;
  for (const key of unset ?? []) delete next[key];
  return next as T;
}

/** Keys whose values differ between two versions of `data`, sorted. */
export function changedFields(before: Record<string, unknown>, after: Record<string, unknown>): string[] {
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...keys].filter((k) => !isDeepStrictEqual(before[k], after[k])).sort();
}

export type Visibility = 'visible' | 'invisible';

/**
 * Whether the caller sees a record: a private record only when acting as its owner; a shared record
 * always (the key's resource grant was checked before the handler ran).
 */
export function visibility(ctx: OperationContext, ownerMemberId: string | null): Visibility {
  if (ownerMemberId === null) return 'visible';
  return ctx.member?.id === ownerMemberId ? 'visible' : 'invisible';
}

/**
 * The acted-for member's own permission on a record (403 when missing). Owners of private records
 * may do anything with them; shared records follow the member's role (x-service-member-roles).
 */
export function assertMemberMay(ctx: OperationContext, resourceType: string, ownerMemberId: string | null, access: Access): void {
  const member = ctx.member;
  if (!member || (ownerMemberId !== null && ownerMemberId === member.id)) return;
  if (!roleAllows(member.role, resourceType, access)) {
    throw forbidden(`${member.name} (${member.role}) may not ${access === 'read' ? 'read' : 'change'} shared ${resourceType} records.`);
  }
}

/** Whether the acted-for member (if any) may read shared records of this type. */
export function memberReadsShared(ctx: OperationContext, resourceType: string): boolean {
  return !ctx.member || roleAllows(ctx.member.role, resourceType, 'read');
}
