/**
 * Token buckets of the collection path (per collect key, per client address), in this process's
 * memory: the hot path does no database round trip per event, so neither does its limit. With
 * several API processes each has its own buckets (documented on collection.Track).
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../../server/clock.ts';

/** Buckets kept per limiter; the least recently used is forgotten (it refills to full). */
const BUCKETS_MAX = 100_000;

export class TokenBuckets {
  private readonly buckets = new LRUCache<string, { tokens: number; at: number }>({ max: BUCKETS_MAX });

  constructor(
    private readonly clock: Clock,
    private readonly perSecond: number,
    private readonly burst: number,
  ) {}

  /** Takes one token of `key`'s bucket: 0 when taken, else the whole seconds until one is there (at least 1). */
  take(key: string): number {
    const now = this.clock.now();
    let b = this.buckets.get(key);
    if (!b) this.buckets.set(key, (b = { tokens: this.burst, at: now }));
    else {
      b.tokens = Math.min(this.burst, b.tokens + (Math.max(0, now - b.at) / 1000) * this.perSecond); // a clock set back refills nothing
      b.at = now;
    }
    if (b.tokens >= 1) {
      b.tokens--;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / this.perSecond));
  }
}
