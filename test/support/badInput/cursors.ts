import { catalogued, type DocOperation, flatten, sampleOf, withRealIds } from '../requestSchema.ts';
import type { TestService } from '../service.ts';
import { call } from './calls.ts';
import { baseBody, type Fixture } from './fixture.ts';

/** Real cursors of every listing that pages, and edited versions of them that must be refused. */

const long = (n: number, c = 'x') => c.repeat(n);

/** The top-level body fields of `op` whose schema is the shared component `name` (e.g. PageCursor). */
export function fieldsOf(op: DocOperation, name: string): string[] {
  if (!op.body) return [];
  return Object.entries((flatten(op.body).properties ?? {}) as Record<string, { 'x-ref'?: string }>)
    .filter(([, s]) => s['x-ref'] === name)
    .map(([k]) => k);
}

/** A real cursor of one listing, with the body (filters) it continues. */
export interface RealCursor {
  op: DocOperation;
  /** The body of the first page, without the cursor. */
  body: Record<string, unknown>;
  /** The field that takes the cursor. */
  field: string;
  cursor: string;
}

/**
 * A real `next_cursor` of every operation that pages (a PageCursor field), from its first page of
 * one row: the base body first, else the smallest body (the example's interval may hold no data).
 * Operations the fixture gives no second page are listed in `without`.
 */
export async function realCursors(svc: TestService, fx: Fixture): Promise<{ cursors: RealCursor[]; without: string[] }> {
  const cursors: RealCursor[] = [];
  const without: string[] = [];
  for (const op of catalogued) {
    const [field] = fieldsOf(op, 'PageCursor');
    if (!field || !op.body) continue;
    // `cursor` answers `next_cursor` and takes `limit`; a named listing inside a read (`runs_cursor`) answers `runs_next_cursor` and takes `runs_limit`.
    const prefix = field.slice(0, -'cursor'.length);
    const nextField = `${prefix}next_cursor`;
    const limits = prefix ? [`${prefix}limit`] : fieldsOf(op, 'PageLimit');
    const candidates = [baseBody(op, fx.ids), withRealIds(sampleOf(op.body), fx.ids)] as Array<Record<string, unknown>>;
    let found: RealCursor | null = null;
    for (const candidate of candidates) {
      const body: Record<string, unknown> = { ...candidate };
      delete body[field];
      for (const l of limits) body[l] = 1;
      const res = await call(svc, fx, op, body);
      const next = (res.body as Record<string, unknown> | undefined)?.[nextField];
      if (res.status === 200 && typeof next === 'string') {
        found = { op, body, field, cursor: next };
        break;
      }
    }
    if (found) cursors.push(found);
    else without.push(op.id);
  }
  return { cursors, without };
}

/** Splits a cursor into its position (decoded JSON) and signature, or null when it is not `payload.tag`. */
export function openCursor(cursor: string): { position: Record<string, unknown>; payload: string; tag: string } | null {
  const [payload, tag, ...rest] = cursor.split('.');
  if (!payload || !tag || rest.length) return null;
  try {
    return { position: JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')), payload, tag };
  } catch {
    return null;
  }
}

/** The same signature on an edited position (what a client that decodes cursors might try). */
export const reseal = (position: Record<string, unknown>, tag: string): string => `${Buffer.from(JSON.stringify(position)).toString('base64url')}.${tag}`;

/** Edited versions of a real cursor, each of which must be refused: positions out of range, changed text, a broken or missing signature. */
export function cursorEdits(real: RealCursor, others: readonly RealCursor[]): Array<[string, string]> {
  const opened = openCursor(real.cursor);
  if (!opened) throw new Error(`${real.op.id}: next_cursor is not payload.signature: ${real.cursor}`);
  const { position, payload, tag } = opened;
  const out: Array<[string, string]> = [];
  for (const [k, v] of Object.entries(position)) {
    if (typeof v === 'number') {
      for (const n of [1e308, 1.5, 2 ** 63, -(2 ** 63), -1, v + 1]) out.push([`position ${k} edited to ${n}`, reseal({ ...position, [k]: n }, tag)]);
    } else if (typeof v === 'string') {
      for (const [what, s] of [['empty', ''], ['with U+0000', `${v}\u0000`], ['of 3000 characters', long(3000)], ['changed', `${v}x`]] as const) {
        out.push([`position ${k} ${what}`, reseal({ ...position, [k]: s }, tag)]);
      }
    }
    out.push([`position ${k} removed`, reseal(Object.fromEntries(Object.entries(position).filter(([key]) => key !== k)), tag)]);
  }
  out.push(['an extra position field', reseal({ ...position, zz: 1 }, tag)]);
  out.push(['without its signature', payload]);
  out.push(['with an empty signature', `${payload}.`]);
  out.push(['with its signature truncated', real.cursor.slice(0, -1)]);
  out.push(['with a changed signature', `${payload}.${tag[0] === 'A' ? 'B' : 'A'}${tag.slice(1)}`]);
  out.push(['with junk appended', `${real.cursor}.x`]);
  out.push(['with its payload truncated', `${payload.slice(0, -2)}.${tag}`]);
  for (const other of others) if (other.op.id !== real.op.id) out.push([`of another operation (${other.op.id})`, other.cursor]);
  return out;
}
