import crypto from 'node:crypto';
import type { Database } from '../db/database.ts';
import { serviceSecret } from '../db/queries/secrets.ts';
import type { CatalogueEntry } from '../generated/catalogue.ts';
import { document } from '../generated/document.ts';
import { invalidInput } from './errors.ts';
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
const MAC_BYTES = 16;
const SECRET_NAME = 'cursor';

// One secret per database (several services in one process each have theirs), read once.
const keys = new WeakMap<Database, Promise<Buffer>>();
function keyOf(db: Database): Promise<Buffer> {
  let key = keys.get(db);
  if (!key) {
    key = serviceSecret(db.sql, SECRET_NAME, crypto.randomBytes(32).toString('base64url'), Date.now()).then((s) => Buffer.from(s, 'base64url'));
    keys.set(db, key);
    key.catch(() => keys.delete(db));
  }
  return key;
}

const bind = (filters: unknown) => crypto.createHash('sha256').update(JSON.stringify(filters)).digest('base64url').slice(0, 12);
const mac = (key: Buffer, operationId: string, payload: string) =>
  crypto.createHmac('sha256', key).update(`${operationId}\n${payload}`).digest().subarray(0, MAC_BYTES);

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
 * filters of the listing, authenticated with the deployment's secret (HMAC-SHA256), so a client can
 * hand it back but not make or change one.
 */
export async function encodeCursor<S extends Shape>(scope: CursorScope, shape: S, position: Position<S>, filters: unknown): Promise<string> {
  for (const [k, spec] of Object.entries(shape)) {
    const problem = fieldProblem(k, spec, (position as Record<string, unknown>)[k]);
    if (problem) throw new Error(`encodeCursor(${scope.operation.id}): ${problem}`);
  }
  const payload = Buffer.from(JSON.stringify({ ...position, f: bind(filters) })).toString('base64url');
  return `${payload}.${mac(await keyOf(scope.db), scope.operation.id, payload).toString('base64url')}`;
}

/**
 * Reads a cursor issued by `encodeCursor` for the same operation, in this deployment, and checks
 * what it carries like request input (`shape`). A malformed, edited or foreign cursor is `400
 * invalid_input`; one from a listing with other filters too (`mismatch` says which must match).
 */
export async function decodeCursor<S extends Shape>(scope: CursorScope, cursor: string, shape: S, filters: unknown, mismatch: string): Promise<Position<S>> {
  const parts = cursor.split('.');
  const [payload, tag] = parts;
  if (parts.length !== 2 || !payload || !tag || !/^[A-Za-z0-9_-]+$/.test(payload) || !/^[A-Za-z0-9_-]+$/.test(tag)) throw invalidInput(NOT_OURS);
  const given = Buffer.from(tag, 'base64url');
  const expected = mac(await keyOf(scope.db), scope.operation.id, payload);
  // Canonical text only: base64url ignores a last character's spare bits, so two tags could read alike.
  if (given.length !== expected.length || given.toString('base64url') !== tag || !crypto.timingSafeEqual(given, expected)) throw invalidInput(NOT_OURS);
  let state: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
    state = parsed as Record<string, unknown>;
  } catch {
    throw invalidInput(NOT_OURS);
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
