import { catalogued, type DocOperation, ID_PATTERN, unknownIdPrefixes, withRealIds } from '../requestSchema.ts';
import type { TestService } from '../service.ts';
import { call } from './calls.ts';
import type { Fixture } from './fixture.ts';

/** Records made from the document's Create and Upsert examples, with real ids by prefix. */

export const prefixOf = (id: string): string | null => ID_PATTERN.exec(id)?.[1] ?? null;

/** The first id-like string of a response body (`item.id` of a create), for the id map. */
function firstId(body: unknown): string | null {
  if (typeof body === 'string') return ID_PATTERN.test(body) ? body : null;
  if (typeof body !== 'object' || body === null) return null;
  const record = body as Record<string, unknown>;
  if (typeof record.id === 'string' && ID_PATTERN.test(record.id)) return record.id;
  for (const v of Object.values(record)) {
    const id = firstId(v);
    if (id) return id;
  }
  return null;
}

/** Which Create operation makes records of an id prefix (learnt from the answers: e.g. `pl` from customers.CreateSalesPipeline). */
const makers = new Map<string, DocOperation>();

/** Id prefixes a value names (e.g. `pl` for `pl_8d2k...`). */
function idPrefixes(value: unknown): string[] {
  const out = new Set<string>();
  const visit = (v: unknown) => {
    if (typeof v === 'string') {
      const p = prefixOf(v);
      if (p) out.add(p);
    } else if (Array.isArray(v)) v.forEach(visit);
    else if (typeof v === 'object' && v !== null) Object.values(v).forEach(visit);
  };
  visit(value);
  return [...out];
}

/**
 * Makes one record of every type a Create example can make (in as many rounds as the examples'
 * references need: a record that names another is made after it), twice, then runs every Upsert
 * example once (a second record where a unique key refuses the second create), so that listings have
 * a second page. Sets real ids by prefix in `ids`; returns why a Create example made nothing.
 */
export async function createRecords(svc: TestService, fx: Fixture, ids: Map<string, string>): Promise<string[]> {
  const creates = catalogued.filter((o) => o.kind === 'command' && /\.Create[A-Z]/.test(o.id) && o.example !== undefined);
  const pending = new Map(creates.map((o) => [o.id, o]));
  const why = new Map<string, string>();
  for (let round = 0; round < creates.length && pending.size; round++) {
    for (const op of [...pending.values()]) {
      const body = withRealIds(op.example, ids);
      const missing = unknownIdPrefixes(body, ids);
      if (missing.length) {
        why.set(op.id, `${op.id}: its example names ids of unknown prefixes ${missing.join(', ')}`);
        continue;
      }
      const res = await call(svc, fx, op, body);
      const id = res.status === 200 ? firstId(res.body) : null;
      pending.delete(op.id);
      if (!id || !prefixOf(id)) {
        why.set(op.id, `${op.id}: its example answered ${res.status} ${res.text.slice(0, 200)}`);
        continue;
      }
      why.delete(op.id);
      ids.set(prefixOf(id)!, id);
      makers.set(prefixOf(id)!, op);
      await call(svc, fx, op, body); // a second record of the type, for a second page
    }
  }
  for (const op of catalogued.filter((o) => o.kind === 'command' && /\.Upsert[A-Z]/.test(o.id) && o.example !== undefined)) {
    const body = withRealIds(op.example, ids);
    if (!unknownIdPrefixes(body, ids).length) await call(svc, fx, op, body);
  }
  return [...why.values()];
}

/**
 * Fresh records for exactly what `value` names (and what those need, e.g. a deal's pipeline), in a
 * workspace that may hold nothing else: real ids by prefix. Needs the Create operations learnt by a
 * full fixture (`makeFixture`) first.
 */
export async function recordsFor(svc: TestService, fx: Fixture, value: unknown): Promise<Map<string, string>> {
  const ids = new Map([...fx.ids].filter(([prefix]) => !makers.has(prefix)));
  const ensure = async (prefix: string, depth: number): Promise<void> => {
    const op = makers.get(prefix);
    if (ids.has(prefix) || !op || depth > 8) return;
    for (const needed of idPrefixes(op.example)) await ensure(needed, depth + 1);
    const res = await call(svc, fx, op, withRealIds(op.example, ids));
    const id = res.status === 200 ? firstId(res.body) : null;
    if (!id) throw new Error(`${op.id}: its example answered ${res.status} ${res.text.slice(0, 200)}`);
    ids.set(prefix, id);
  };
  for (const prefix of idPrefixes(value)) await ensure(prefix, 0);
  return ids;
}
