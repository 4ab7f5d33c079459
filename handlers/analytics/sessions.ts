/**
 * Sessions (also written in the operation descriptions): per site and visitor, events are ordered by
 * (ts, pageviews before engagement pings, path, ...). A pageview starts a new session when the
 * previous event is 30 minutes or more earlier, when there is none, or when the previous event
 * belongs to no session; otherwise it continues the current one. An engagement ping continues the
 * current session when it is less than 30 minutes after the previous event, else it belongs to no
 * session. Hence consecutive sessions are at least 30 minutes apart, and a gap of 30 minutes or more
 * between two events resets the state: that is what makes a local repair exact.
 */
import type { DbAnalyticsSessionRow, NewAnalyticsEvent } from './rows.ts';
import { dayOf, SESSION_GAP_MS } from './input.ts';

export type SessionShape = Omit<DbAnalyticsSessionRow, 'bundle_id' | 'visitor'>;

/**
 * Sessions of one visitor's events, which must be sorted with compareEvents. `from` continues after
 * earlier events: the state they left is the session holding the latest of them (or null when that
 * event belongs to no session) and that event's time; the continued session is returned first.
 */
export function sessionize(
  events: readonly NewAnalyticsEvent[],
  from: { current: SessionShape | null; prevTs: number | null } = { current: null, prevTs: null },
): SessionShape[] {
  const sessions: SessionShape[] = [];
  // Continuing after earlier events: the session holding the latest of them (or none) and its time.
  let current: SessionShape | null = from.current ? { ...from.current } : null;
  if (current) sessions.push(current);
  let prevTs: number | null = from.prevTs;
  for (const e of events) {
    const gapOk = prevTs !== null && e.ts - prevTs < SESSION_GAP_MS;
    prevTs = e.ts;
    if (e.type === 'pageview') {
      if (current && gapOk) {
        current.end_ts = e.ts;
        current.pageviews++;
        current.engaged_ms += e.engaged_ms;
      } else {
        current = { start_ts: e.ts, end_ts: e.ts, day: dayOf(e.ts), pageviews: 1, entry_page: e.path, engaged_ms: e.engaged_ms };
        sessions.push(current);
      }
    } else if (current && gapOk) {
      current.end_ts = e.ts;
      current.engaged_ms += e.engaged_ms;
    } else {
      current = null; // an engagement ping outside any session
    }
  }
  return sessions;
}

export const sessionKey = (s: SessionShape) => `${s.start_ts}|${s.end_ts}|${s.pageviews}|${s.entry_page}|${s.engaged_ms}`;

/** A stored session row as numbers (PostgreSQL returns bigints as strings). */
export const toShape = (s: DbAnalyticsSessionRow): SessionShape => ({
  start_ts: Number(s.start_ts), end_ts: Number(s.end_ts), day: Number(s.day), pageviews: Number(s.pageviews), entry_page: s.entry_page, engaged_ms: Number(s.engaged_ms),
});

/** A stored event row as numbers. */
export const toEvent = (row: NewAnalyticsEvent): NewAnalyticsEvent => ({ ...row, ts: Number(row.ts), engaged_ms: Number(row.engaged_ms) });
