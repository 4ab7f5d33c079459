import { isDeepStrictEqual } from 'node:util';
import { conflict, invalidInput } from './errors.ts';

/**
 * The value rules of shared records (compare-and-set, patches, what changed). Who may see and change a
 * record is decided in one place, the record kit (server/recordKit.ts), which every record operation
 * goes through.
 */

/** The `{"$absent": true}` marker of `expected`. */
export interface AbsentMarker {
  $absent: boolean;
}

export function isAbsentMarker(value: unknown): value is AbsentMarker {
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

/** Refuses (400) a request that both sets a key in `data` and lists it in `unset`. */
export function assertNotSetAndUnset(set: object | undefined, unset: readonly string[] | undefined): void {
  const both = (unset ?? []).filter((k) => set !== undefined && Object.prototype.hasOwnProperty.call(set, k));
  if (both.length) throw invalidInput(`${both.join(', ')} cannot be both set in data and listed in unset.`);
}

/** Applies `data` (set) and `unset` (remove) to a copy of the current fields (assertNotSetAndUnset ran first). */
export function applyPatch<T extends Record<string, unknown>>(current: T, set: Partial<T> | undefined, unset: readonly string[] | undefined): T {
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
