/** Small parts the sender's pages share: what a post holds for the next view, form fields, times in forms. */

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** What a post holds for the next view of the page it redirects to. */
export interface Held {
  flash?: string;
  problem?: string;
}

/** A refusal worded for the page: the operation's message, with a first capital and a full stop. */
export function sentence(message: string): string {
  const m = message.trim();
  return m.charAt(0).toUpperCase() + m.slice(1) + (/[.!?]$/.test(m) ? '' : '.');
}

export const field = (body: Record<string, unknown>, name: string): string => (typeof body[name] === 'string' ? (body[name] as string) : '');

/** `YYYY-MM-DD` as the Unix ms of that day's start (or end) in UTC, or null. */
export function dayMs(value: string, end: boolean): number | null {
  if (!DAY.test(value)) return null;
  const ms = Date.parse(`${value}T${end ? '23:59:59.999' : '00:00:00.000'}Z`);
  return Number.isFinite(ms) && ms >= 0 ? ms : null;
}

/** `YYYY-MM-DDTHH:MM` (a datetime-local input, read as UTC) as Unix ms, or null. */
export function minuteMs(value: string): number | null {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$/.test(value)) return null;
  const ms = Date.parse(`${value}:00.000Z`);
  return Number.isFinite(ms) ? ms : null;
}

export const toMinute = (ms: number) => new Date(ms).toISOString().slice(0, 16);
