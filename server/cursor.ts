import crypto from 'node:crypto';
import type { Database } from '../db/database.ts';
import type { CatalogueEntry } from '../generated/catalogue.ts';
import { document } from '../generated/document.ts';
import { invalidInput } from './errors.ts';
import { type Claims, signedTokens, TokenRefused } from './signedToken.ts';
import { textProblem } from './validation.ts';

/**
 * What a position field holds. `integer`: a safe integer (|n| < 2^53); `string`: text under the
 * string rule, at most 2,000 characters; the object forms add bounds.
 */
export type FieldSpec =
  | 'integer'
  | 'string'
  | { readonly type: 'integer'; readonly minimum?: number; readonly maximum?: number }
  | { readonly type: 'string'; readonly maxLength?: number };
type Shape = Record<string, FieldSpec>;
type KindOf<F extends FieldSpec> = F extends 'string' | { type: 'string' } ? string : number;
/** The position a cursor carries, typed from its shape. */
export type Position<S extends Shape> = { [K in keyof S]: KindOf<S[K]> };

/** What a cursor is issued and read for: the operation (a cursor is bound to it) and the service's database (its secret). */
export interface CursorScope {
  readonly operation: Pick<CatalogueEntry, 'id'>;
  readonly db: Database;
}

const schemas = document.components.schemas;

/** Page size when a listing's request omits `limit` (components/schemas/PageLimit.yaml). */
export const DEFAULT_PAGE_LIMIT: number = schemas.PageLimit.default;

/** Position fields with the bounds of the document's schemas, for cursor shapes. */
export const positionField = {
  /** A UTC day index (UtcDay). */
  day: { type: 'integer', minimum: schemas.UtcDay.minimum, maximum: schemas.UtcDay.maximum },
  /** Unix milliseconds (UnixMillis). */
  millis: { type: 'integer', minimum: schemas.UnixMillis.minimum, maximum: schemas.UnixMillis.maximum },
  /** A record id (RecordId). */
  recordId: { type: 'string', maxLength: schemas.RecordId.maxLength },
} as const satisfies Record<string, FieldSpec>;

const MAX_STRING = 2000;

// The kernel's signed-token format under the `cursor` secret, for the purpose of the operation's id.
const cursors = signedTokens('cursor', { maxLength: schemas.PageCursor.maxLength, expires: false });

const bind = (filters: unknown) => crypto.createHash('sha256').update(JSON.stringify(filters)).digest('base64url').slice(0, 12);

const NOT_OURS = 'cursor is not a cursor this operation returned (it is malformed, was changed, or comes from another operation); send next_cursor exactly as received.';

function fieldProblem(name: string, spec: FieldSpec, value: unknown): string | null {
  const type = typeof spec === 'string' ? spec : spec.type;
  if (type === 'integer') {
    if (typeof value !== 'number' || !Number.isSafeInteger(value)) return `${name} is not a safe integer`;
    if (typeof spec === 'object' && 'minimum' in spec && spec.minimum !== undefined && value < spec.minimum) return `${name} is below its minimum`;
    if (typeof spec === 'object' && 'maximum' in spec && spec.maximum !== undefined && value > spec.maximum) return `${name} is above its maximum`;
    return null;
  }
  if (typeof value !== 'string') return `${name} is not a string`;
  const max = typeof spec === 'object' && 'maxLength' in spec && spec.maxLength !== undefined ? spec.maxLength : MAX_STRING;
  if (value.length > max) return `${name} is too long`;
  return textProblem(name, value);
}

/**
 * An opaque paging cursor: the position after the last row, bound to the operation and to the
 * filters of the listing, signed with the deployment's `cursor` secret (server/signedToken.ts), so a
 * client can hand it back but not make or change one.
 */
export async function encodeCursor<S extends Shape>(scope: CursorScope, shape: S, position: Position<S>, filters: unknown): Promise<string> {
  for (const [k, spec] of Object.entries(shape)) {
    const problem = fieldProblem(k, spec, (position as Record<string, unknown>)[k]);
    if (problem) throw new Error(`encodeCursor(${scope.operation.id}): ${problem}`);
  }
  return cursors.sign(scope.db, scope.operation.id, { ...(position as Record<string, string | number>), f: bind(filters) });
}

/**
 * Reads a cursor issued by `encodeCursor` for the same operation, in this deployment, and checks
 * what it carries like request input (`shape`). A malformed, edited or foreign cursor is `400
 * invalid_input`; one from a listing with other filters too (`mismatch` says which must match).
 */
export async function decodeCursor<S extends Shape>(scope: CursorScope, cursor: string, shape: S, filters: unknown, mismatch: string): Promise<Position<S>> {
  let state: Claims;
  try {
    state = await cursors.verify(scope.db, scope.operation.id, cursor);
  } catch (err) {
    if (err instanceof TokenRefused) throw invalidInput(NOT_OURS);
    throw err;
  }
  if (state.f !== bind(filters)) throw invalidInput(mismatch);
  const position: Record<string, unknown> = {};
  for (const [k, spec] of Object.entries(shape)) {
    // Only this service can have made it, so a bad value here is a bug or a leaked secret: refuse it all the same.
    if (fieldProblem(k, spec, state[k])) throw invalidInput(NOT_OURS);
    position[k] = state[k];
  }
  return position as Position<S>;
}
