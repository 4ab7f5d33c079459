/** Formatting shared by every page: times in words and the `?before=` positions of paged lists. */

/** A Unix-ms time as `2026-11-24 19:54:14 UTC` (pages show UTC, as the API does). */
export function timeInWords(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** How long until a moment, roughly: `in 71 h 59 min`, `in 5 min`, `now`. */
export function untilInWords(ms: number): string {
  if (ms <= 0) return 'now';
  const hours = ms / 3_600_000;
  if (hours >= 1) return `in ${Math.floor(hours)} h${hours % 1 >= 1 / 60 ? ` ${Math.floor((hours % 1) * 60)} min` : ''}`;
  return `in ${Math.max(1, Math.floor(ms / 60_000))} min`;
}

/** A position in a list paged newest first: the time of the last row shown and its id. */
export interface PagePosition {
  at: number;
  id: string;
  /** The position as written in the address (`<at>.<id>`). */
  text: string;
}

const POSITION = /^(\d{1,16})\.([a-z]{1,8}_[0-9a-z]{1,40})$/;

/**
 * `?before=<Unix ms>.<row id>` as the pages write it: absent or empty (null), valid, or 'invalid'
 * (anything else, a repeated parameter included: the page answers 400).
 */
export function parsePagePosition(value: unknown): PagePosition | null | 'invalid' {
  if (value === undefined || value === '') return null;
  if (typeof value !== 'string') return 'invalid';
  const m = POSITION.exec(value);
  if (!m) return 'invalid';
  const at = Number(m[1]);
  return Number.isSafeInteger(at) ? { at, id: m[2]!, text: value } : 'invalid';
}

/** The position after a row, to put in the next page's address. */
export const positionOf = (at: number | string, id: string): string => `${Number(at)}.${id}`;
