/**
 * Visitor ids of the collection path: a keyed hash of the site, the client address and the
 * User-Agent under the UTC day's salt (shared through the database), and the midnight carry-over
 * (a session that continues across midnight keeps yesterday's id).
 */
import crypto from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Database } from '../../db/database.ts';
import type { Clock } from '../../server/clock.ts';
import { daySalt, existingSalt } from './collectQueries.ts';
import { dayOf, SESSION_GAP_MS } from './input.ts';
import { lastEventOfVisitors } from './queries.ts';
import type { NewAnalyticsEvent } from './rows.ts';

/** Carry-over decisions kept per process (one per visitor seen around midnight). */
const CARRIED_MAX = 200_000;

/** What the queue knows of events not yet in the database. */
export interface UnwrittenEvents {
  /** The latest queued (or being written) event time of a visitor on a site. */
  lastTs(bundleId: string, visitor: string): number | undefined;
  /** Moves a queued event to another visitor id. */
  rekey(event: NewAnalyticsEvent, visitor: string): void;
}

const hash = (salt: string, bundleId: string, ip: string, ua: string) =>
  crypto.createHmac('sha256', salt).update(`${bundleId}\n${ip}\n${ua}`).digest('base64url').slice(0, 22);

export class VisitorIds {
  private readonly salts = new Map<number, Promise<string | null>>();
  // Today's id -> the id under yesterday's salt when the visitor's session continues across midnight,
  // or false once it is known not to (then it never will: yesterday's id only gets events through here).
  private carryDay = -1;
  private readonly carried = new LRUCache<string, { id: string; lastTs: number } | false>({ max: CARRIED_MAX });
  /** Events whose visitor is decided when their batch is written: today's id, or yesterday's if still active. */
  private readonly undecided = new WeakMap<NewAnalyticsEvent, { today: string; previous: string }>();

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly unwritten: UnwrittenEvents,
  ) {}

  private saltOf(day: number, create: boolean): Promise<string | null> {
    let salt = this.salts.get(day);
    if (!salt) {
      for (const d of this.salts.keys()) if (d < day - 1) this.salts.delete(d);
      salt = create ? daySalt(this.db.sql, day, crypto.randomBytes(32).toString('hex'), this.clock.now()) : existingSalt(this.db.sql, day);
      this.salts.set(day, salt);
      salt.catch(() => this.salts.delete(day));
    }
    return salt;
  }

  /** The visitor id when it is known now; else today's id with yesterday's as the candidate, decided in decide(). */
  async visitorOf(bundleId: string, ip: string, ua: string, now: number): Promise<{ id: string; previous?: string }> {
    const day = dayOf(now);
    const today = hash((await this.saltOf(day, true))!, bundleId, ip, ua);
    if (this.carryDay !== day) {
      this.carried.clear();
      this.carryDay = day;
    }
    const known = this.carried.get(today);
    if (known === false) return { id: today };
    if (known && now - known.lastTs < SESSION_GAP_MS) {
      known.lastTs = now;
      return { id: known.id };
    }
    const yesterdaySalt = await this.saltOf(day - 1, false);
    return yesterdaySalt ? { id: today, previous: hash(yesterdaySalt, bundleId, ip, ua) } : { id: today };
  }

  /** Marks a queued event's visitor as undecided between today's id and yesterday's. */
  hold(event: NewAnalyticsEvent, previous: string): void {
    this.undecided.set(event, { today: event.visitor, previous });
  }

  /**
   * Decides the visitor of a batch's undecided events, in order, with one set-based read: an
   * event keeps yesterday's id when that id has an event on the site less than 30 minutes earlier
   * (stored, queued, or earlier in this batch). No database read per request.
   */
  async decide(batch: readonly NewAnalyticsEvent[]): Promise<void> {
    const open = batch.filter((e) => this.undecided.has(e));
    if (!open.length) return;
    const pairs = new Map<string, readonly [string, string]>();
    for (const e of open) {
      const previous = this.undecided.get(e)!.previous;
      pairs.set(`${e.bundle_id}\n${previous}`, [e.bundle_id, previous]);
    }
    const latest = new Map<string, number>();
    for (const row of await lastEventOfVisitors(this.db.sql, [...pairs.values()])) {
      if (row.last !== null) latest.set(`${row.bundle_id}\n${row.visitor}`, Number(row.last));
    }
    for (const e of open) {
      const { today, previous } = this.undecided.get(e)!;
      this.undecided.delete(e);
      let id = today;
      const known = this.carried.get(today);
      if (known && e.ts - known.lastTs < SESSION_GAP_MS) {
        known.lastTs = e.ts;
        id = known.id;
      } else if (known !== false) {
        const last = Math.max(latest.get(`${e.bundle_id}\n${previous}`) ?? -Infinity, this.unwritten.lastTs(e.bundle_id, previous) ?? -Infinity);
        const active = last >= e.ts - SESSION_GAP_MS;
        this.carried.set(today, active ? { id: previous, lastTs: e.ts } : false);
        if (active) id = previous;
      }
      if (id !== e.visitor) this.unwritten.rekey(e, id);
    }
  }
}
