import type { CatalogueEntry } from '../generated/catalogue.ts';
import type { Credential, MemberInfo } from './credentials.ts';
import { forbidden, invalidInput } from './errors.ts';

/** Whether the key's grants cover the operation (and, for record operations, the access it declares). */
export function keyMayCall(credential: Credential, entry: CatalogueEntry): boolean {
  if (!entry.listed) return true;
  if (!credential.operations.has(entry.id)) return false;
  return entry.resource === null || entry.access.every((a) => credential.resources.get(entry.resource!)?.has(a) ?? false);
}

/** The members the key may act for: active members inside its delegation grant. */
export function delegableMembers(credential: Credential): MemberInfo[] {
  const out: MemberInfo[] = [];
  for (const member of credential.members.values()) {
    if (member.disabled) continue;
    if (credential.delegation === 'all' || (credential.delegation === 'selected' && credential.delegates.has(member.id))) out.push(member);
  }
  return out.sort((a, b) => (a.name === b.name ? (a.id < b.id ? -1 : 1) : a.name < b.name ? -1 : 1));
}

/**
 * Checks the key's operation and resource grants and resolves `Service-Act-As`. Returns the member
 * acted for, or null for workspace access. Throws 400 / 403 with the reason.
 */
export function authorize(credential: Credential, entry: CatalogueEntry, actAsHeader: string | undefined): MemberInfo | null {
  const session = credential.kind === 'session';
  // A module's kind of credential is named in refusals by its noun (`This connection`), a personal one by its member's role.
  const noun = credential.noun ?? 'key';
  const holder = `This ${noun}`;
  if (session && !entry.sessions) throw forbidden(`A sign-in session may not call ${entry.id}: only operations whose security lists SessionCookie.`);
  if (entry.listed && !credential.operations.has(entry.id)) throw forbidden(`${holder} is not granted ${entry.id}.`);
  if (entry.resource !== null) {
    const held = credential.resources.get(entry.resource);
    const missing = entry.access.filter((a) => !held?.has(a));
    if (missing.length) throw forbidden(`${session || credential.personal ? "The member's role" : holder} lacks ${missing.join(' and ')} access on ${entry.resource}.`);
  }
  if (actAsHeader === undefined) {
    if (entry.actAs === 'required') throw invalidInput(`${entry.id} runs as a member: send Service-Act-As.`);
    return null;
  }
  if (entry.actAs === 'none') throw invalidInput('Service-Act-As is not accepted here.');
  const member = credential.members.get(actAsHeader);
  const delegated = credential.delegation === 'all' || (credential.delegation === 'selected' && credential.delegates.has(actAsHeader));
  if (!member || member.disabled || !delegated) {
    // One message for all three causes, so the header cannot probe other workspaces' member ids.
    if (credential.personal) throw forbidden(`A personal ${noun} acts only as the member who approved it: send no Service-Act-As, or that member.`);
    throw forbidden(`Service-Act-As names a member this ${noun} may not act for (see GET /v1/delegation/members).`);
  }
  return member;
}
