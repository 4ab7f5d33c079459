/** What the contract changelog records: one classified change of one operation. */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/**
 * `breaking`: a client written against the released contract can fail (a request it sends is now
 * refused, or a response it reads lacks something or has a shape it did not expect).
 * `additive`: existing clients are unaffected. `note`: existing clients keep working but should know
 * (a response enum value or a looser response bound, a deprecation, a changed default, a raised version).
 */
export type Severity = 'breaking' | 'additive' | 'note';

export type ChangeKind =
  | 'operation-added'
  | 'operation-removed'
  | 'operation-moved'
  | 'operation-deprecated'
  | 'operation-undeprecated'
  | 'contract-version-raised'
  | 'contract-version-lowered'
  | 'kind-changed'
  | 'act-as-changed'
  | 'workspace-supported-changed'
  | 'resource-changed'
  | 'resource-access-changed'
  | 'security-changed'
  | 'listed-changed'
  | 'parameter-added'
  | 'parameter-removed'
  | 'request-body-changed'
  | 'media-type-added'
  | 'media-type-removed'
  | 'request-field-added'
  | 'request-field-removed'
  | 'response-field-added'
  | 'response-field-removed'
  | 'required-changed'
  | 'status-added'
  | 'status-removed'
  | 'response-header-added'
  | 'response-header-removed'
  | 'enum-value-added'
  | 'enum-value-removed'
  | 'type-changed'
  | 'nullable-changed'
  | 'constraint-changed'
  | 'default-changed'
  | 'field-deprecated'
  | 'alternatives-changed'
  | 'schema-changed';

export interface ContractChange {
  /** The operationId (or `METHOD /path` for an operation without one). */
  operation: string;
  kind: ChangeKind;
  severity: Severity;
  /** One sentence naming the place and the change, e.g. "new required request field `data.colour`". */
  text: string;
}

export interface Release {
  name: string;
  /** UTC day the release was recorded. */
  date: string;
  changes: ContractChange[];
}

/** Records a change (the differs share one list). */
export type AddChange = (operation: string, kind: ChangeKind, severity: Severity, text: string) => void;

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export const sortedKeys = (...objects: Array<JsonObject | undefined>): string[] =>
  [...new Set(objects.flatMap((o) => (o ? Object.keys(o) : [])))].sort();

export const show = (value: Json | undefined): string => (value === undefined ? 'none' : JSON.stringify(value));
