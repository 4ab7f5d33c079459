/**
 * The grants chooser of the page kit (the API keys page, the MCP consent page):
 * operations per namespace (none, all of it, or single operations), access per resource type, and
 * whom the credential may act for (`Service-Act-As`: nobody, selected members, every member). Its
 * markup is `pages/_grants.eta` and `pages/_delegation.eta`; what a posted form chose is read by the
 * functions below, which refuse bad input with a `ChooserRefusal` in words for the page.
 */
import { fileURLToPath } from 'node:url';
import { Eta } from 'eta';
import type { Access } from '../../generated/catalogue.ts';
import type { DelegationSpec } from '../admin.ts';
import { operationChoices, resourceLabel } from './grantWords.ts';

/** A form's choice the page refuses, in words (shown on the page, never a 500). */
export class ChooserRefusal extends Error {}

const MEMBER_ID = /^mb_[0-9A-Za-z]{1,40}$/;
type Body = Record<string, unknown>;

export const formStrings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : typeof v === 'string' ? [v] : []);

/**
 * The operation grants a form chose: `<ns>.*` for "all operations" of a namespace, else the single
 * operations ticked in namespaces set to "the operations chosen below". Unknown ids are refused; an
 * empty choice is returned empty (the caller says what is missing).
 */
export function operationsFromForm(body: Body): string[] {
  const chosen = new Set(formStrings(body.op));
  const choices = operationChoices();
  const grants: string[] = [];
  for (const n of choices) {
    const mode = body[`ns_${n.ns}`];
    if (mode === 'all') grants.push(`${n.ns}.*`);
    else for (const o of n.operations) if (chosen.has(o.id)) grants.push(o.id);
  }
  for (const id of chosen) if (!choices.some((n) => n.operations.some((o) => o.id === id))) throw new ChooserRefusal(`Unknown operation ${id}.`);
  return grants;
}

/** The resource access a form chose (`res` values `<type>=read|write`). */
export function resourcesFromForm(body: Body): Record<string, Access[]> {
  const resources: Record<string, Access[]> = {};
  for (const r of formStrings(body.res)) {
    const m = /^(.+)=(read|write)$/.exec(r);
    if (!m) throw new ChooserRefusal('Resource access is read or write of a resource type.');
    (resources[m[1]!] ??= []).push(m[2] as Access);
  }
  return resources;
}

/** The delegation a form chose: `delegation` none / selected / all, and `delegate` member ids; `what` names the credential ("the key"). */
export function delegationFromForm(body: Body, what = 'the key'): DelegationSpec {
  const mode = body.delegation ?? 'none';
  if (mode === 'none' || mode === 'all') return mode;
  if (mode !== 'selected') throw new ChooserRefusal(`Choose whom ${what} may act for: nobody, selected members, or every member.`);
  const ids = formStrings(body.delegate);
  if (!ids.length) throw new ChooserRefusal(`Choose at least one member ${what} may act for, or choose “nobody”.`);
  for (const id of ids) if (!MEMBER_ID.test(id)) throw new ChooserRefusal('One of the chosen members is not a member of this workspace.');
  return ids;
}

/** What the chooser shows ticked (a form sent back with a problem keeps its choices). */
export interface ChooserSelection {
  modes: Record<string, 'none' | 'all' | 'some'>;
  ops: string[];
  res: string[];
}

/** The selection a posted form made, to show it again. */
export function selectionFromForm(body: Body): ChooserSelection {
  const modes: ChooserSelection['modes'] = {};
  for (const n of operationChoices()) {
    const mode = body[`ns_${n.ns}`];
    if (mode === 'all' || mode === 'some' || mode === 'none') modes[n.ns] = mode;
  }
  return { modes, ops: formStrings(body.op), res: formStrings(body.res) };
}

const eta = new Eta({ views: fileURLToPath(new URL('./templates', import.meta.url)), autoEscape: true, autoTrim: false });

/** The operations and resources fieldsets (one per namespace, then the resource table), for a form of another page. */
export function grantsChooserHtml(data: { resourceTypes: readonly string[]; selected?: ChooserSelection; namespaces?: ReadonlyArray<ReturnType<typeof operationChoices>[number]> }): string {
  return eta.render('./_grants', {
    namespaces: data.namespaces ?? operationChoices(),
    resourceTypes: data.resourceTypes.map((t) => ({ type: t, label: resourceLabel(t) })),
    selected: data.selected,
  });
}

/** The delegation choice (nobody / selected members / every member), for a form of another page. */
export function delegationChooserHtml(data: { prefix?: string; members: ReadonlyArray<{ id: string; name: string; role: string }>; mode?: 'none' | 'selected' | 'all'; delegates?: readonly string[]; noun?: string }): string {
  return eta.render('./_delegation', { prefix: data.prefix ?? 'chooser', mode: data.mode ?? 'none', delegates: data.delegates ?? [], members: data.members, noun: data.noun ?? 'key' });
}
