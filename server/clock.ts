/** Source of the current time; tests inject a fake one. */
export interface Clock {
  /** Unix milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that moves only when told to (tests). */
export class FakeClock implements Clock {
  constructor(private current: number = Date.UTC(2026, 10, 22, 12, 0, 0)) {}
  now(): number {
    return this.current;
  }
  advance(ms: number): void {
    this.current += ms;
  }
  set(ms: number): void {
    this.current = ms;
  }
}
