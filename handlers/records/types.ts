/**
 * The record types the pages serve, read from the document rather than written per type: every
 * resource type (`x-service-resource`) whose list and get operations a member's session may call
 * (`security` lists `SessionCookie`), with its create, update and delete operations when it has them.
 * Names come from the operations (`customers.ListSalesPipelines` → "Sales pipelines", path
 * `/records/sales-pipelines`), fields from the schemas: the `data` of the get answer (read-only fields
 * included) and of the create request, and the list request's filters. A type added to the document
 * gets its pages without a line here.
 */
import { type CatalogueEntry, catalogue } from '../../generated/catalogue.ts';
import { operationOf, type SchemaObject } from '../../generated/dereferenced.ts';

/** How a field is shown and typed on a form. */
export type FieldKind = 'text' | 'date' | 'number' | 'integer' | 'boolean' | 'enum' | 'object' | 'json';

export interface RecordField {
  readonly name: string;
  readonly label: string;
  readonly kind: FieldKind;
  readonly required: boolean;
  /** Derived by the service: shown, never written. */
  readonly readOnly: boolean;
  /** `enum`: the values. */
  readonly options: readonly string[];
  /** `object`: its fields (scalars only). */
  readonly fields: readonly RecordField[];
  /** The first sentence of the schema's description. */
  readonly hint: string;
  readonly maxLength?: number;
  /** The schema's example (shown as a placeholder of JSON inputs). */
  readonly example?: unknown;
}

export interface RecordType {
  /** The path segment: `/records/<slug>`. */
  readonly slug: string;
  /** The qualified resource type, e.g. `core:Deal`. */
  readonly resource: string;
  /** "Deals", "deal". */
  readonly plural: string;
  readonly singular: string;
  readonly list: CatalogueEntry;
  readonly get: CatalogueEntry;
  readonly create: CatalogueEntry | undefined;
  readonly update: CatalogueEntry | undefined;
  readonly remove: CatalogueEntry | undefined;
  /** Every `data` field as read (read-only ones included). */
  readonly fields: readonly RecordField[];
  /** The list operation's filters (its request fields but paging and time windows). */
  readonly filters: readonly RecordField[];
  /** Whether a create may ask for a private record (the create request has `private`). */
  readonly canBePrivate: boolean;
  /** The field that names a record (the first required text field), shown as the link in lists. */
  readonly titleField: string | undefined;
}

/** "SalesPipelines" → "Sales pipelines". */
export const words = (camel: string): string => {
  const w = camel.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase();
  return w.charAt(0).toUpperCase() + w.slice(1);
};
const fieldLabel = (name: string): string => {
  const w = name.replace(/_id$/, '').replace(/_/g, ' ');
  return w.charAt(0).toUpperCase() + w.slice(1);
};
const firstSentence = (text: string | undefined): string => {
  const p = (text ?? '').split(/\n\s*\n/)[0]!.replace(/\s+/g, ' ').trim();
  const m = /^(.+?[.!?])(?=\s+[A-Z(`]|$)/.exec(p);
  return (m ? m[1]! : p).replace(/`/g, '');
};

/** A schema with its `allOf` members merged into it (the document wraps references to add descriptions). */
export function flat(schema: SchemaObject): SchemaObject {
  if (!schema.allOf) return schema;
  const { allOf, ...own } = schema;
  const merged: SchemaObject = {};
  for (const part of allOf) Object.assign(merged, flat(part));
  return { ...merged, ...own };
}

const isScalar = (s: SchemaObject) => ['string', 'number', 'integer', 'boolean'].includes(String(flat(s).type)) || Array.isArray(flat(s).enum);

function fieldOf(name: string, raw: SchemaObject, required: boolean): RecordField {
  const s = flat(raw);
  let kind: FieldKind;
  let fields: RecordField[] = [];
  if (Array.isArray(s.enum)) kind = 'enum';
  else if (s.type === 'string') kind = s.format === 'date' || String(s.pattern ?? '').startsWith('^[0-9]{4}-') ? 'date' : 'text';
  else if (s.type === 'integer') kind = 'integer';
  else if (s.type === 'number') kind = 'number';
  else if (s.type === 'boolean') kind = 'boolean';
  else if (s.type === 'object' && s.properties && Object.values(s.properties).every(isScalar)) {
    kind = 'object';
    const req = new Set(s.required ?? []);
    fields = Object.entries(s.properties).map(([n, p]) => fieldOf(n, p, req.has(n)));
  } else kind = 'json';
  return {
    name,
    label: fieldLabel(name),
    kind,
    required,
    readOnly: s.readOnly === true || raw.readOnly === true,
    options: Array.isArray(s.enum) ? s.enum.map(String) : [],
    fields,
    hint: firstSentence(raw.description ?? s.description),
    ...(typeof s.maxLength === 'number' ? { maxLength: s.maxLength } : {}),
    ...((raw.example ?? s.example) !== undefined ? { example: raw.example ?? s.example } : {}),
  };
}

function fieldsOf(schema: SchemaObject | undefined): RecordField[] {
  if (!schema) return [];
  const s = flat(schema);
  const req = new Set(s.required ?? []);
  return Object.entries(s.properties ?? {}).map(([n, p]) => fieldOf(n, p, req.has(n)));
}

const bodyOf = (entry: CatalogueEntry): SchemaObject | undefined => operationOf(entry).requestBody?.content['application/json']?.schema;
const answerOf = (entry: CatalogueEntry): SchemaObject | undefined => operationOf(entry).responses['200']?.content?.['application/json']?.schema;

/** The list request's fields that are paging or time windows, not filters a person picks. */
const NOT_FILTERS = new Set(['limit', 'cursor', 'updated_since', 'updated_before']);

function recordTypes(): RecordType[] {
  const byResource = new Map<string, CatalogueEntry[]>();
  for (const e of catalogue as readonly CatalogueEntry[]) {
    if (!e.resource || !e.sessions || !e.listed) continue;
    byResource.set(e.resource, [...(byResource.get(e.resource) ?? []), e]);
  }
  const out: RecordType[] = [];
  for (const [resource, entries] of byResource) {
    const find = (verb: string) => entries.find((e) => e.name.startsWith(verb));
    const list = find('List');
    const get = find('Get');
    if (!list || !get) continue;
    const noun = get.name.slice(3);
    const plural = words(list.name.slice(4));
    const item = answerOf(get)?.properties?.item;
    const fields = fieldsOf(item ? flat(item).properties?.data : undefined);
    const create = find('Create');
    const filters = fieldsOf(bodyOf(list)).filter((f) => !NOT_FILTERS.has(f.name) && f.kind !== 'json' && f.kind !== 'object');
    out.push({
      slug: list.name.slice(4).replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase(),
      resource,
      plural,
      singular: words(noun).toLowerCase(),
      list,
      get,
      create,
      update: find('Update'),
      remove: find('Delete'),
      fields,
      filters,
      canBePrivate: !!(create && flat(bodyOf(create) ?? {}).properties?.private),
      titleField: fields.find((f) => f.required && f.kind === 'text' && !f.readOnly)?.name,
    });
  }
  return out.sort((a, b) => (a.list.id < b.list.id ? -1 : 1));
}

/** Every record type with pages, in the catalogue's order. */
export const RECORD_TYPES: readonly RecordType[] = recordTypes();
export const recordTypeBySlug = new Map(RECORD_TYPES.map((t) => [t.slug, t]));
