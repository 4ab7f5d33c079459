/** What a subscription carries, for the approval page: each type's record fields, read from the API document. */
import { catalogue } from '../../../generated/catalogue.ts';
import { operationOf, type SchemaObject } from '../../../generated/dereferenced.ts';

/** A description as text and `code` segments (the document writes Markdown backticks). */
export type TextPart = { text: string; code: boolean };

export interface FieldInfo {
  name: string;
  description: TextPart[];
  required: boolean;
  readOnly: boolean;
}

export interface TypeInfo {
  type: string;
  schema: string;
  fields: FieldInfo[];
}

function firstSentence(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim().replace(/^Read-only: /, '');
  const m = /^(.+?[.!?])(\s|$)/.exec(flat);
  const first = m ? m[1]! : flat;
  return first.charAt(0).toUpperCase() + first.slice(1);
}

function parts(text: string): TextPart[] {
  return text.split(/(`[^`]+`)/).filter(Boolean).map((p) => (p.startsWith('`') && p.endsWith('`') ? { text: p.slice(1, -1), code: true } : { text: p, code: false }));
}

const typeInfos = new Map<string, TypeInfo>();

/**
 * The record fields of a resource type: the `data` schema of the `item` of its Get operation's 200
 * answer (the catalogue names the operation, the dereferenced document has the schema).
 */
export function typeInfo(type: string): TypeInfo {
  const known = typeInfos.get(type);
  if (known) return known;
  const entry = catalogue.find((e) => e.resource === type && e.kind === 'query' && e.name.startsWith('Get'));
  const answer = entry ? operationOf(entry).responses['200']?.content?.['application/json']?.schema : undefined;
  const data: SchemaObject | undefined = answer?.properties?.item?.properties?.data;
  const fields = Object.entries(data?.properties ?? {}).map(([name, s]): FieldInfo => {
    const own = s.description ?? s.allOf?.map((a) => a.description).find(Boolean) ?? '';
    const readOnly = Boolean(s.readOnly ?? s.allOf?.some((a) => a.readOnly));
    return { name, description: parts(firstSentence(own)), required: (data?.required ?? []).includes(name), readOnly };
  });
  const info = { type, schema: data?.['x-component'] ?? '', fields };
  typeInfos.set(type, info);
  return info;
}
