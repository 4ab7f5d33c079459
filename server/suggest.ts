/** "Did you mean ...?": the nearest known name to what a caller wrote (operation ids, fields). */

/** Edit distance (Levenshtein). */
export function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/**
 * The candidate nearest to `asked` (compared without case) when it is close enough to be a slip: at
 * most max(2, a quarter of its length) edits, or the one name that differs only in case or
 * separators (`pageSize` for `page_size`). Null when none is.
 */
export function nearest(asked: string, candidates: Iterable<string>): string | null {
  const plain = (s: string) => s.toLowerCase().replace(/[-_\s]/g, '');
  let best: { name: string; d: number } | null = null;
  for (const c of candidates) {
    const d = plain(c) === plain(asked) ? 0 : distance(asked.toLowerCase(), c.toLowerCase());
    if (!best || d < best.d) best = { name: c, d };
  }
  return best && best.d <= Math.max(2, Math.floor(asked.length / 4)) ? best.name : null;
}
