import crypto from 'node:crypto';
import { invalidInput } from './errors.ts';

type Shape = Record<string, 'string' | 'number'>;
/** The position a cursor carries, typed from its shape. */
export type Position<S extends Shape> = { [K in keyof S]: S[K] extends 'string' ? string : number };

const bind = (filters: unknown) => crypto.createHash('sha256').update(JSON.stringify(filters)).digest('base64url').slice(0, 12);

/** An opaque paging cursor: the position after the last row, bound to the filters of the listing. */
export function encodeCursor<S extends Shape>(position: Position<S>, filters: unknown): string {
  return Buffer.from(JSON.stringify({ ...position, f: bind(filters) })).toString('base64url');
}

/**
 * Reads a cursor issued by `encodeCursor` for a listing with the same filters; a malformed cursor or
 * one from other filters is `400 invalid_input` (`mismatch` says which filters must match).
 */
export function decodeCursor<S extends Shape>(cursor: string, shape: S, filters: unknown, mismatch: string): Position<S> {
  let state: Record<string, unknown> | null = null;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) state = { ...parsed };
  } catch {
    state = null;
  }
  if (!state || typeof state.f !== 'string' || Object.entries(shape).some(([k, type]) => typeof state![k] !== type)) {
    throw invalidInput('cursor is not a cursor this operation returned.');
  }
  if (state.f !== bind(filters)) throw invalidInput(mismatch);
  const position: Record<string, unknown> = {};
  for (const k of Object.keys(shape)) position[k] = state[k];
  return position as Position<S>;
}
