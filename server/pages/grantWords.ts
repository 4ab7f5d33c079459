/** A key's grants and delegation in words, for the API keys page (never a secret). */
import { type Access, type CatalogueEntry, catalogue, namespaces } from '../../generated/catalogue.ts';

const listed = (catalogue as readonly CatalogueEntry[]).filter((e) => e.listed);

/** `customers` → `Customers`. */
export const namespaceLabel = (ns: string) => ns.charAt(0).toUpperCase() + ns.slice(1);

const plural = (word: string) => (/[^aeiou]y$/.test(word) ? `${word.slice(0, -1)}ies` : /(s|x|ch|sh)$/.test(word) ? `${word}es` : `${word}s`);

/** `core:SalesPipeline` → `Sales pipelines`; an app's `tickets:Ticket` → `Tickets (app tickets)`. */
export function resourceLabel(type: string): string {
  const [owner, name = type] = type.includes(':') ? type.split(':') : ['core', type];
  const words = name.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase();
  const label = plural(words.charAt(0).toUpperCase() + words.slice(1));
  return owner === 'core' ? label : `${label} (app ${owner})`;
}

/** The operations of each namespace, as the create form lists them. */
export function operationChoices() {
  return namespaces
    .map((ns) => ({
      ns,
      label: namespaceLabel(ns),
      operations: listed.filter((e) => e.namespace === ns).map((e) => ({ id: e.id, name: e.name, summary: e.summary, changes: e.kind === 'command' })),
    }))
    .filter((n) => n.operations.length > 0);
}

/** "Customers — all operations (14)", "Analytics — 3 operations: A, B, C", one line per namespace. */
export function grantsInWords(operations: readonly string[]): string[] {
  const held = new Set(operations);
  const lines: string[] = [];
  for (const ns of namespaces) {
    const all = listed.filter((e) => e.namespace === ns);
    const mine = all.filter((e) => held.has(e.id));
    if (!mine.length) continue;
    lines.push(
      mine.length === all.length
        ? `${namespaceLabel(ns)} — all operations (${all.length})`
        : `${namespaceLabel(ns)} — ${mine.length} operation${mine.length === 1 ? '' : 's'}: ${mine.map((e) => e.name).join(', ')}`,
    );
  }
  const gone = operations.filter((id) => !listed.some((e) => e.id === id));
  if (gone.length) lines.push(`No longer in the API: ${gone.join(', ')}`);
  return lines;
}

/** The operations held, namespace by namespace, each by its summary ("List sales pipelines"), for a list people read. */
export function operationsInWords(operations: readonly string[]): Array<{ label: string; operations: string[] }> {
  const held = new Set(operations);
  return namespaces
    .map((ns) => ({ label: namespaceLabel(ns), operations: listed.filter((e) => e.namespace === ns && held.has(e.id)).map((e) => e.summary) }))
    .filter((n) => n.operations.length > 0);
}

/** "Deals: read, write", one line per resource type. */
export function resourcesInWords(resources: Record<string, Access[]>): string[] {
  return Object.entries(resources)
    .filter(([, access]) => access.length > 0)
    .map(([type, access]) => `${resourceLabel(type)}: ${access.join(', ')}`);
}

/** Whom a key may act for, in words, with what `Service-Act-As` then allows. */
export function delegationInWords(delegation: 'none' | 'all' | string[], names: ReadonlyMap<string, string>): string {
  if (delegation === 'none') return 'Acts for no member: a request with Service-Act-As is refused (403).';
  if (delegation === 'all') return 'May act for every current and future member: with Service-Act-As a request runs as that member, within both the key’s grants and the member’s own role.';
  const who = delegation.map((id) => names.get(id) ?? id);
  return `May act for ${who.length ? who.join(', ') : 'nobody'}: with Service-Act-As naming one of them a request runs as that member, within both the key’s grants and the member’s own role; naming anyone else is refused (403).`;
}
