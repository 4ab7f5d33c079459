/**
 * The shared-record kit: one implementation of the record operations (list with cursor and
 * `updated_at` window, get, create, upsert by a declared match key, update with `data` / `unset` /
 * `expected`, delete), parameterised by resource type. A type declares its table, its data schema in
 * the document, its match key and its rules as hooks; the kit does everything else, and it is the one
 * place that decides who may see and change a record:
 *
 * - the key's operation and resource grants were checked by the platform before the handler ran;
 * - a private record exists only for its owner: acting as another member, or with workspace access,
 *   it is indistinguishable from an absent one (404, `deleted: false`, not listed, not referable);
 * - when acting for a member, that member's role (`x-service-member-roles`) must allow the access on
 *   shared records (403); every member may read and write their own private records.
 *
 * Change events are written in the write's transaction: `resource.created`, `resource.updated` with
 * `changed_fields` in the record API's names (derived read-only fields included), `resource.deleted`.
 * An update that changes nothing writes nothing, no event, and keeps `updated_at`.
 */
import type { SqlValue } from '../db/database.ts';
import { deleteRecord, findByColumn, findRecord, findRecords, insertRecord, listRecordPage, type RecordTable, type RowLock, updateRecord } from '../db/queries/records.ts';
import type { DbRecordRow } from '../db/rows.ts';
import { type Access, type AnyOperationId, type CatalogueEntry, catalogue } from '../generated/catalogue.ts';
import { document } from '../generated/document.ts';
import { DEFAULT_PAGE_LIMIT, decodeCursor, encodeCursor, positionField } from './cursor.ts';
import { conflict, forbidden, invalidInput, notFound } from './errors.ts';
import { recordChanged } from './events.ts';
import { newId } from './ids.ts';
import type { Handler, OperationContext } from './operation.ts';
import { applyPatch, assertExpected, assertNotSetAndUnset, changedFields, isAbsentMarker } from './records.ts';
import { roleAllows } from './roles.ts';

/** The shared record envelope (seed 2.1). */
export interface RecordEnvelope<D> {
  id: string;
  created_at: number;
  updated_at: number;
  created_by: string | null;
  private: boolean;
  data: D;
}

/** A record as stored: its row and its parsed `data`. */
export interface StoredRecord<S, R extends DbRecordRow = DbRecordRow> {
  readonly row: R;
  readonly data: S;
}

/** One create or update, as the type's rules see it. */
export interface RecordWrite<S, R extends DbRecordRow = DbRecordRow> {
  readonly ctx: OperationContext;
  /** The record type written (the operation's `x-service-resource`). */
  readonly resource: string;
  readonly id: string;
  /** The record before this write; null when it is being created. */
  readonly before: StoredRecord<S, R> | null;
  /** The data to be stored: the request applied to `before`, normalised. */
  readonly next: S;
  /** The member a private record belongs to; null for a shared record. */
  readonly owner: string | null;
}

/** A type's own rules, as hooks the kit calls at fixed points. Each may throw a documented error. */
export interface RecordRules<S, V, R extends DbRecordRow> {
  /** Rules on the fields a request sets that need nothing but the request (400), checked before anything is read. */
  checkInput?(data: Partial<S>): void;
  /** Canonical form of fields (a normalised domain, money with the currency's decimals), for `data` and `expected` alike. */
  normalise?(data: Partial<S>, where: 'data' | 'expected'): Partial<S>;
  /**
   * Rules on the resulting record that need the database (references, members), before anything is
   * written; returns the data to store when it derives read-only stored fields (e.g. a deal's `closed_at`).
   */
  prepare?(w: RecordWrite<S, R>): Promise<S | void>;
  /** Just before the row is written (only when something changes): locks and side effects on other records. */
  beforeWrite?(w: RecordWrite<S, R>): Promise<void>;
  /** Just after the row is written: rows that follow it (a pipeline's stage rows). */
  afterWrite?(w: RecordWrite<S, R>): Promise<void>;
  /** Before a delete: refuse (409) while other records refer to it. */
  beforeDelete?(ctx: OperationContext, record: StoredRecord<S, R>): Promise<void>;
  /** The API's `data` of stored records, with fields derived at read time (a deal's `weighted_amount`); default: as stored. */
  view?(ctx: OperationContext, records: ReadonlyArray<StoredRecord<S, R>>): Promise<V[]>;
}

export interface RecordTypeSpec<S, V, R extends DbRecordRow> {
  readonly table: RecordTable;
  /** Prefix of new ids, e.g. `co` for `co_...`. */
  readonly idPrefix: string;
  /** What one record is called in messages, e.g. `company`; and more than one. */
  readonly noun: string;
  readonly plural: string;
  /** The document's schema of the writable `data` (components/schemas): its `required` fields cannot be unset. */
  readonly dataSchema: string;
  /** The table's typed columns, from the data to store. */
  columns(data: S): Readonly<Record<string, SqlValue>>;
  /** The upsert key: a data field mirrored in a typed column; `unique` when the database keeps it unique per scope. */
  readonly match?: { readonly field: keyof S & string; readonly column: string; readonly unique: boolean };
  /** List request fields that filter on the typed column of the same name. */
  readonly filters?: readonly string[];
  readonly rules?: RecordRules<S, V, R>;
}

/** The operations of one record type, by role. */
export interface RecordOperationIds {
  readonly list: AnyOperationId;
  readonly get: AnyOperationId;
  readonly create: AnyOperationId;
  readonly update: AnyOperationId;
  readonly delete: AnyOperationId;
  readonly upsert?: AnyOperationId;
}

/** The handlers of those operations, typed from the generated operations. */
export type RecordHandlers<O extends RecordOperationIds> = {
  [K in keyof O as O[K] extends AnyOperationId ? O[K] : never]: O[K] extends AnyOperationId ? Handler<O[K]> : never;
};

type Json = Record<string, unknown>;
interface ListInput { limit?: number; cursor?: string; updated_since?: number; updated_before?: number; [filter: string]: unknown }
interface ChangeInput { data?: Json; unset?: readonly string[]; expected?: Json }

const CURSOR = { u: positionField.millis, i: positionField.recordId } as const;
const CURSOR_MISMATCH = 'cursor belongs to a listing with other filters (or another member); send the same filters.';

// ---- Who may see and do what: the one place ------------------------------------------------------

/** A private record exists only for its owner; a shared one for every credential that reached the handler. */
function visibleTo(ctx: OperationContext, owner: string | null): boolean {
  return owner === null || owner === ctx.member?.id;
}

/** Whether the acted-for member's role (if any) lets them read shared records of the type. */
function readsShared(ctx: OperationContext, resource: string): boolean {
  return !ctx.member || roleAllows(ctx.member.role, resource, 'read');
}

/** The acted-for member's own permission (403): anything on their private records, their role's access on shared ones. */
function assertMay(ctx: OperationContext, resource: string, owner: string | null, access: Access): void {
  const member = ctx.member;
  if (!member || (owner !== null && owner === member.id)) return;
  if (!roleAllows(member.role, resource, access)) {
    throw forbidden(`${member.name} (${member.role}) may not ${access === 'read' ? 'read' : 'change'} shared ${resource} records.`);
  }
}

/** The private owner of a record to be created: the member acted for with `private: true`, else null (shared). */
function ownerFor(ctx: OperationContext, wantsPrivate: boolean | undefined, noun: string): string | null {
  if (!wantsPrivate) return null;
  if (!ctx.member) throw invalidInput(`private: true needs Service-Act-As; a private ${noun} belongs to the member acted for.`);
  return ctx.member.id;
}

function isReferenceViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}

const schemas = (document as unknown as { components: { schemas: Record<string, { required?: string[]; properties?: Json }> } }).components.schemas;

/**
 * One record type on the kit. `operations()` binds it to its operations in the catalogue (their
 * common `x-service-resource` is the type) and returns their handlers.
 */
export class RecordType<S extends object, V extends object = S, R extends DbRecordRow = DbRecordRow> {
  /** Fields of `data` that every record has (the data schema's `required`): never unset. */
  readonly required: readonly string[];
  private bound: string | null = null;
  private readonly rules: RecordRules<S, V, R>;

  constructor(private readonly spec: RecordTypeSpec<S, V, R>) {
    const schema = schemas[spec.dataSchema];
    if (!schema?.properties) throw new Error(`the document has no object schema ${spec.dataSchema}`);
    this.required = schema.required ?? [];
    this.rules = spec.rules ?? {};
    if (spec.match && !spec.table.columns.includes(spec.match.column)) throw new Error(`${spec.table.name} has no column ${spec.match.column}`);
  }

  /** The resource type (`x-service-resource` of the bound operations). */
  get resource(): string {
    if (!this.bound) throw new Error(`${this.spec.noun}: operations() was never called`);
    return this.bound;
  }

  /** The handlers of this type's operations; checks against the catalogue that they are one type's record operations. */
  operations<const O extends RecordOperationIds>(ids: O): RecordHandlers<O> {
    const entries = Object.entries(ids).map(([role, id]) => [role, (catalogue as readonly CatalogueEntry[]).find((e) => e.id === id)] as const);
    const resources = new Set(entries.map(([, e]) => e?.resource));
    const [resource] = resources;
    if (entries.some(([, e]) => !e) || resources.size !== 1 || typeof resource !== 'string') {
      throw new Error(`${this.spec.noun}: ${Object.values(ids).join(', ')} are not record operations of one resource type`);
    }
    for (const [role, e] of entries) if ((e!.kind === 'query') !== (role === 'list' || role === 'get')) throw new Error(`${e!.id} has the wrong kind for ${role}`);
    this.bound = resource;
    const handlers: Record<string, (input: never, ctx: OperationContext) => Promise<unknown>> = {
      [ids.list]: (input: ListInput, ctx: OperationContext) => this.list(input, ctx),
      [ids.get]: (input: { id: string }, ctx: OperationContext) => this.get(input, ctx),
      [ids.create]: (input: { data: Json; private?: boolean }, ctx: OperationContext) => this.create(input, ctx),
      [ids.update]: (input: ChangeInput & { id: string }, ctx: OperationContext) => this.update(input, ctx),
      [ids.delete]: (input: { id: string; expected?: Json }, ctx: OperationContext) => this.delete(input, ctx),
    };
    if (ids.upsert) {
      if (!this.spec.match) throw new Error(`${this.spec.noun} declares no match key, so it has no upsert`);
      handlers[ids.upsert] = (input: ChangeInput & { data: Json; private?: boolean }, ctx: OperationContext) => this.upsert(input, ctx);
    }
    return handlers as unknown as RecordHandlers<O>;
  }

  // ---- For other types' rules ---------------------------------------------------------------------

  /**
   * A record the caller may read (visible, and the acted-for member's role reads shared ones), or
   * undefined: what a reference to this type may point at. `share` keeps it from changing or going
   * away until the transaction ends.
   */
  async readable(ctx: OperationContext, id: string, lock: RowLock = null): Promise<StoredRecord<S, R> | undefined> {
    // The key must be granted read on this type too (the platform checked only the operation's own type).
    if (!ctx.credential.resources.get(this.resource)?.has('read')) return undefined;
    const rec = await this.find(ctx, id, lock);
    if (!rec) return undefined;
    // Locked until the transaction ends, so it cannot change under this request: byIds reuses it.
    if (lock !== null) this.lockedFor(ctx).set(id, rec);
    return rec.row.private_owner_id !== null || readsShared(ctx, this.resource) ? rec : undefined;
  }

  /** Stored records by id, whatever their visibility: for fields derived from records the caller already reaches. */
  async byIds(ctx: OperationContext, ids: Iterable<string>): Promise<Map<string, StoredRecord<S, R>>> {
    const locked = this.locked.get(ctx);
    const out = new Map<string, StoredRecord<S, R>>();
    const missing: string[] = [];
    for (const id of new Set(ids)) {
      const held = locked?.get(id);
      if (held) out.set(id, held);
      else missing.push(id);
    }
    if (missing.length) for (const r of await findRecords<R>(ctx.sql, this.spec.table, ctx.workspaceId, missing)) out.set(r.id, this.stored(r));
    return out;
  }

  /** Records of this type read under a row lock by the request of `ctx` (the lock keeps them as read). */
  private readonly locked = new WeakMap<OperationContext, Map<string, StoredRecord<S, R>>>();

  private lockedFor(ctx: OperationContext): Map<string, StoredRecord<S, R>> {
    let map = this.locked.get(ctx);
    if (!map) this.locked.set(ctx, (map = new Map()));
    return map;
  }

  // ---- The operations -----------------------------------------------------------------------------

  private async list(input: ListInput, ctx: OperationContext) {
    const resource = this.resourceOf(ctx);
    const limit = input.limit ?? DEFAULT_PAGE_LIMIT;
    const where: Record<string, SqlValue> = {};
    for (const f of this.spec.filters ?? []) if (input[f] !== undefined) where[f] = input[f] as SqlValue;
    // A cursor is bound to who lists (private records differ per member) and to every filter.
    const filters = [ctx.workspaceId, ctx.member?.id ?? null, input.updated_since ?? null, input.updated_before ?? null, ...(this.spec.filters?.length ? [where] : [])];
    const after = input.cursor ? await decodeCursor(ctx, input.cursor, CURSOR, filters, CURSOR_MISMATCH) : null;
    const rows = await listRecordPage<R>(ctx.sql, this.spec.table, {
      workspaceId: ctx.workspaceId,
      memberId: ctx.member?.id ?? null,
      includeShared: readsShared(ctx, resource),
      where,
      updatedSince: input.updated_since ?? null,
      updatedBefore: input.updated_before ?? null,
      after: after ? { updatedAt: after.u, id: after.i } : null,
      limit,
    });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    const hasMore = rows.length > limit && last !== undefined;
    const nextCursor = hasMore ? await encodeCursor(ctx, CURSOR, { u: last.updated_at, i: last.id }, filters) : null;
    return { items: await this.envelopes(ctx, page.map((r) => this.stored(r))), has_more: hasMore, next_cursor: nextCursor };
  }

  private async get(input: { id: string }, ctx: OperationContext) {
    const resource = this.resourceOf(ctx);
    const rec = await this.find(ctx, input.id, null);
    if (!rec) throw this.notVisible(input.id);
    assertMay(ctx, resource, rec.row.private_owner_id, 'read');
    return { item: (await this.envelopes(ctx, [rec]))[0]! };
  }

  private async create(input: { data: Json; private?: boolean }, ctx: OperationContext) {
    const resource = this.resourceOf(ctx);
    this.checkChange(input);
    const owner = ownerFor(ctx, input.private, this.spec.noun);
    assertMay(ctx, resource, owner, 'write');
    return { item: await this.insert(ctx, resource, this.normalise(input.data, 'data'), owner) };
  }

  private async update(input: ChangeInput & { id: string }, ctx: OperationContext) {
    const resource = this.resourceOf(ctx);
    this.checkChange(input);
    const rec = await this.find(ctx, input.id, 'update');
    if (!rec) throw this.notVisible(input.id);
    return { item: await this.change(ctx, resource, rec, input.data && this.normalise(input.data, 'data'), input) };
  }

  private async upsert(input: ChangeInput & { data: Json; private?: boolean }, ctx: OperationContext) {
    const resource = this.resourceOf(ctx);
    const match = this.spec.match!;
    this.checkChange(input);
    const owner = ownerFor(ctx, input.private, this.spec.noun);
    const data = this.normalise(input.data, 'data');
    const value = data[match.field] as SqlValue;
    if (value === undefined || value === null) throw invalidInput(`data.${match.field} is required: upsert matches on it.`);
    // Concurrent upserts of one key are serialized, so they never create two records.
    await ctx.db.lock(ctx.sql, this.matchLock(resource, ctx.workspaceId, owner, value));
    const matches = await findByColumn<R>(ctx.sql, this.spec.table, ctx.workspaceId, match.column, value, owner);
    const [first, ...others] = matches;
    if (others.length) throw conflict(`${matches.length} ${this.spec.plural} have ${match.field} "${String(value)}"; update one by id instead. Nothing was written.`);
    if (!first) {
      assertExpected({}, this.normaliseExpected(input.expected));
      assertMay(ctx, resource, owner, 'write');
      return { item: await this.insert(ctx, resource, data, owner), created: true };
    }
    return { item: await this.change(ctx, resource, this.stored(first), data, input), created: false };
  }

  private async delete(input: { id: string; expected?: Json }, ctx: OperationContext) {
    const resource = this.resourceOf(ctx);
    const rec = await this.find(ctx, input.id, 'update');
    // Absent and invisible look the same: a repeated delete is harmless and tells nobody about private records.
    if (!rec) return { id: input.id, deleted: false };
    assertMay(ctx, resource, rec.row.private_owner_id, 'write');
    assertExpected(rec.data as unknown as Json, this.normaliseExpected(input.expected));
    await this.rules.beforeDelete?.(ctx, rec);
    try {
      await deleteRecord(ctx.sql, this.spec.table, rec.row.id);
      this.locked.get(ctx)?.delete(rec.row.id);
    } catch (err) {
      // The rules count references under row locks first; the database's foreign keys are the backstop.
      if (isReferenceViolation(err)) throw conflict(`Other records refer to this ${this.spec.noun}; change or delete them first. Nothing was written.`);
      throw err;
    }
    await recordChanged(ctx, { type: 'resource.deleted', resourceType: resource, recordId: rec.row.id, private: rec.row.private_owner_id !== null });
    return { id: rec.row.id, deleted: true };
  }

  // ---- Writes ---------------------------------------------------------------------------------------

  private async insert(ctx: OperationContext, resource: string, data: S, owner: string | null): Promise<RecordEnvelope<V>> {
    const missing = this.required.find((k) => (data as unknown as Json)[k] === undefined);
    if (missing) throw invalidInput(`data.${missing} is required to create a ${this.spec.noun}.`);
    const id = newId(this.spec.idPrefix);
    const draft: RecordWrite<S, R> = { ctx, resource, id, before: null, next: data, owner };
    const w: RecordWrite<S, R> = { ...draft, next: (await this.rules.prepare?.(draft)) ?? data };
    await this.assertUnique(w);
    await this.rules.beforeWrite?.(w);
    const base: DbRecordRow = {
      id,
      workspace_id: ctx.workspaceId,
      private_owner_id: owner,
      data: JSON.stringify(w.next),
      created_by: ctx.member?.id ?? null,
      created_at: ctx.now,
      updated_at: ctx.now,
    };
    const typed = this.columns(w.next);
    await insertRecord(ctx.sql, this.spec.table, base, typed);
    await this.rules.afterWrite?.(w);
    await recordChanged(ctx, { type: 'resource.created', resourceType: resource, recordId: id, private: owner !== null });
    return (await this.envelopes(ctx, [{ row: { ...base, ...typed } as R, data: w.next }]))[0]!;
  }

  /** Applies `data` (already normalised), `unset` and `expected` to a visible record, locked for update. */
  private async change(ctx: OperationContext, resource: string, rec: StoredRecord<S, R>, data: S | undefined, input: ChangeInput): Promise<RecordEnvelope<V>> {
    assertMay(ctx, resource, rec.row.private_owner_id, 'write');
    assertExpected(rec.data as unknown as Json, this.normaliseExpected(input.expected));
    const merged = applyPatch(rec.data as unknown as Json, data as unknown as Json | undefined, input.unset) as unknown as S;
    const draft: RecordWrite<S, R> = { ctx, resource, id: rec.row.id, before: rec, next: merged, owner: rec.row.private_owner_id };
    const w: RecordWrite<S, R> = { ...draft, next: (await this.rules.prepare?.(draft)) ?? merged };
    if (!changedFields(rec.data as unknown as Json, w.next as unknown as Json).length) return (await this.envelopes(ctx, [rec]))[0]!;
    await this.assertUnique(w);
    await this.rules.beforeWrite?.(w);
    const updatedAt = Math.max(ctx.now, rec.row.updated_at);
    const typed = this.columns(w.next);
    const json = JSON.stringify(w.next);
    await updateRecord(ctx.sql, this.spec.table, rec.row.id, json, updatedAt, typed);
    await this.rules.afterWrite?.(w);
    const after: StoredRecord<S, R> = { row: { ...rec.row, ...typed, data: json, updated_at: updatedAt }, data: w.next };
    if (this.locked.get(ctx)?.has(rec.row.id)) this.locked.get(ctx)!.set(rec.row.id, after);
    const [before, now] = await this.views(ctx, [rec, after]);
    await recordChanged(ctx, {
      type: 'resource.updated',
      resourceType: resource,
      recordId: rec.row.id,
      private: rec.row.private_owner_id !== null,
      changedFields: changedFields(before as unknown as Json, now as unknown as Json),
    });
    return this.envelope(after, now!);
  }

  /** A unique match key stays unique in its scope: 409 naming the record that holds it. */
  private async assertUnique(w: RecordWrite<S, R>): Promise<void> {
    const match = this.spec.match;
    if (!match?.unique) return;
    const value = (w.next as unknown as Json)[match.field] as SqlValue;
    if (value === undefined || value === null || (w.before && (w.before.data as unknown as Json)[match.field] === value)) return;
    await w.ctx.db.lock(w.ctx.sql, this.matchLock(w.resource, w.ctx.workspaceId, w.owner, value));
    const holder = (await findByColumn<R>(w.ctx.sql, this.spec.table, w.ctx.workspaceId, match.column, value, w.owner)).find((r) => r.id !== w.id);
    if (holder) {
      throw conflict(
        `${match.field} "${String(value)}" already belongs to ${this.spec.noun} ${holder.id} in this scope (${w.owner === null ? 'the shared records' : 'your private records'}); ` +
          `update that one instead. Nothing was written.`,
      );
    }
  }

  // ---- Helpers ----------------------------------------------------------------------------------------

  private resourceOf(ctx: OperationContext): string {
    const resource = ctx.operation.resource;
    if (resource === null || resource !== this.bound) throw new Error(`${ctx.operation.id} is not an operation of ${this.bound ?? this.spec.noun}`);
    return resource;
  }

  /** A record visible to the caller (private ones only to their owner), or undefined. */
  private async find(ctx: OperationContext, id: string, lock: RowLock): Promise<StoredRecord<S, R> | undefined> {
    const row = await findRecord<R>(ctx.sql, this.spec.table, ctx.workspaceId, id, lock);
    return row && visibleTo(ctx, row.private_owner_id) ? this.stored(row) : undefined;
  }

  private stored(row: R): StoredRecord<S, R> {
    return { row, data: JSON.parse(row.data) as S };
  }

  private notVisible(id: string) {
    return notFound(`No ${this.spec.noun} ${id} is visible to this credential.`);
  }

  private checkChange(input: { data?: Json; unset?: readonly string[] }): void {
    const required = input.unset?.find((k) => this.required.includes(k));
    if (required) throw invalidInput(`unset: ${required} is required in every ${this.spec.noun} and cannot be removed.`);
    assertNotSetAndUnset(input.data, input.unset);
    if (input.data) this.rules.checkInput?.(input.data as Partial<S>);
  }

  private normalise(data: Json, where: 'data' | 'expected'): S {
    return (this.rules.normalise ? this.rules.normalise(data as Partial<S>, where) : data) as S;
  }

  /** `expected` values in canonical form, so they compare with what is stored; absence markers stay. */
  private normaliseExpected(expected: Json | undefined): Json | undefined {
    if (!expected || !this.rules.normalise) return expected;
    const values = Object.fromEntries(Object.entries(expected).filter(([, v]) => !isAbsentMarker(v)));
    return { ...expected, ...(this.normalise(values, 'expected') as Json) };
  }

  private columns(data: S): Readonly<Record<string, SqlValue>> {
    return this.spec.columns(data);
  }

  private matchLock(resource: string, workspaceId: string, owner: string | null, value: SqlValue): string {
    return `match:${resource}:${workspaceId}:${owner ?? ''}:${String(value)}`;
  }

  private async views(ctx: OperationContext, records: ReadonlyArray<StoredRecord<S, R>>): Promise<V[]> {
    return this.rules.view ? this.rules.view(ctx, records) : records.map((r) => r.data as unknown as V);
  }

  private envelope(rec: StoredRecord<S, R>, data: V): RecordEnvelope<V> {
    const { row } = rec;
    return { id: row.id, created_at: row.created_at, updated_at: row.updated_at, created_by: row.created_by, private: row.private_owner_id !== null, data };
  }

  private async envelopes(ctx: OperationContext, records: ReadonlyArray<StoredRecord<S, R>>): Promise<Array<RecordEnvelope<V>>> {
    const views = await this.views(ctx, records);
    return records.map((r, i) => this.envelope(r, views[i]!));
  }
}
