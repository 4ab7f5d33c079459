/**
 * The audit log: every security-relevant change of a workspace with who did it, when and what, never a
 * secret. Platform pages, the admin CLI and modules call `recordAudit` inside the transaction that makes
 * the change, so an entry exists exactly when the change does. Readable on `/settings/audit` (owners and
 * admins) and with `npm run admin -- audit list`; entries older than AUDIT_RETENTION_DAYS (default 400)
 * are pruned by the `audit.prune` job.
 *
 * Actions are `<subject>.<verb>` in the past tense (`key.created`, `member.role_changed`); `details`
 * holds what changed (names, grants, roles, before/after), never a secret, token or link.
 */
import type { Sql } from '../db/database.ts';
import { type DbAuditRow, deleteAuditRowsBefore, insertAuditRow, listAuditRows } from '../db/queries/audit.ts';
import { randomIdPart } from './ids.ts';

/** Who made a change. */
export type AuditActor =
  | { type: 'member'; id: string; label: string }
  | { type: 'key'; id: string; label: string }
  | { type: 'operator'; label?: string }
  | { type: 'system'; label?: string };

export interface AuditEntry {
  workspaceId: string;
  actor: AuditActor;
  /** `<subject>.<verb>`, e.g. `key.created`. */
  action: string;
  subject?: { type: string; id: string; label?: string };
  /** What changed; never a secret. */
  details?: Record<string, unknown>;
  /** Milliseconds (the caller's clock). */
  at: number;
}

export const AUDIT_RETENTION_DAYS_DEFAULT = 400;

/** The operator's admin CLI as an actor. */
export const OPERATOR: AuditActor = { type: 'operator', label: 'operator (admin CLI)' };

/** Entries written by this process so far: the middle of an entry id (fixed width, wraps after 10^8). */
let written = 0;

/**
 * A new entry id that sorts in write order: `au_` + the entry's time (ms, 15 digits) + this process's
 * count of entries (8 digits) + 12 random characters (`au_001795727768956000000421k3…`). Readers order by
 * (time, id), so entries of one millisecond read in the order they were written (within a process;
 * between processes the random part decides). Older random ids sort among them harmlessly.
 */
export function newAuditId(at: number): string {
  written = (written + 1) % 100_000_000;
  return `au_${String(Math.max(0, Math.trunc(at))).padStart(15, '0')}${String(written).padStart(8, '0')}${randomIdPart(12)}`;
}

/** Writes one entry, in the caller's transaction. */
export async function recordAudit(sql: Sql, entry: AuditEntry): Promise<void> {
  const a = entry.actor;
  const row: DbAuditRow = {
    id: newAuditId(entry.at),
    workspace_id: entry.workspaceId,
    at: entry.at,
    actor_type: a.type,
    actor_id: a.type === 'member' || a.type === 'key' ? a.id : null,
    actor_label: (a.label ?? (a.type === 'operator' ? 'operator (admin CLI)' : 'the service')).slice(0, 200),
    action: entry.action,
    subject_type: entry.subject?.type ?? null,
    subject_id: entry.subject?.id ?? null,
    subject_label: entry.subject?.label?.slice(0, 320) ?? null,
    details: JSON.stringify(entry.details ?? {}),
  };
  await insertAuditRow(sql, row);
}

// ---- Reading: an entry in words (the /settings/audit page and `npm run admin -- audit list`) ----------

/** Families of actions a reader filters by; each is a list of action prefixes. */
export const AUDIT_FAMILIES = {
  keys: ['key.', 'workspace.api_keys_changed'],
  members: ['member.', 'invitation.', 'session.'],
  webhooks: ['webhook.'],
  connections: ['connection.'],
} as const satisfies Record<string, readonly string[]>;
export type AuditFamily = keyof typeof AUDIT_FAMILIES;
export const isAuditFamily = (v: unknown): v is AuditFamily => typeof v === 'string' && Object.hasOwn(AUDIT_FAMILIES, v);

/** One entry as a reader sees it. */
export interface AuditView {
  id: string;
  /** Milliseconds. */
  at: number;
  /** `2026-12-28 14:03:07 UTC`. */
  when: string;
  /** Who, with what kind of actor: `Olga Owner (member)`, `CI integration (API key)`, `operator (admin CLI)`. */
  who: string;
  action: string;
  /** What happened, without who: `changed Ben Admin's role from member to admin`. */
  what: string;
  /** The subject as `type id` (`member mb_...`), or empty. */
  subject: string;
}

const ACTOR_KINDS: Record<string, string> = { member: 'member', key: 'API key', operator: '', system: '' };

/** Bidirectional formatting characters: marks, embeddings, overrides, isolates (U+061C, U+200E–F, U+202A–E, U+2066–9). */
export const BIDI_CONTROLS = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/u;
const BIDI_CONTROLS_ALL = new RegExp(BIDI_CONTROLS.source, 'gu');
/** Right-to-left script characters (Hebrew, Arabic, Syriac, Thaana, N'Ko, … and their presentation forms). */
const RIGHT_TO_LEFT = /[\u0590-\u08FF\uFB1D-\uFDFF\uFE70-\uFEFE\u{10800}-\u{10FFF}\u{1E800}-\u{1EFFF}]/u;

/**
 * A user-provided label (a name, a key's name, a subject) as it goes into a sentence: bidirectional
 * controls are shown as `[U+202E]` (a label can never reorder the service's own words, nor close the
 * isolate around it), and a label with right-to-left letters is isolated in FSI (U+2068) … PDI (U+2069),
 * so it is laid out on its own and the sentence around it reads as written. A left-to-right label
 * needs no isolate (it cannot move the words around it) and is returned as is.
 */
export function isolateLabel(label: string): string {
  const shown = label.replace(BIDI_CONTROLS_ALL, (c) => `[U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}]`);
  return RIGHT_TO_LEFT.test(shown) ? `\u2068${shown}\u2069` : shown;
}

/** The actor in words: the label, and the kind unless the label says it. */
export function describeActor(row: Pick<DbAuditRow, 'actor_type' | 'actor_label'>): string {
  const kind = ACTOR_KINDS[row.actor_type] ?? row.actor_type;
  const label = isolateLabel(row.actor_label);
  return kind ? `${label} (${kind})` : label;
}

const quoted = (s: string) => `“${s}”`;
const possessive = (name: string) => `${name}'s`;
const list = (items: string[]) => (items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`);

/** Member names by id, for ids in `details` (a delegation's members); filled by `readAudit`. */
export type AuditNames = ReadonlyMap<string, string>;

/** The words for values of `details`, with member ids said by name. */
function wordsFor(names: AuditNames) {
  /** A value of `details` in words (names before ids; lists joined; objects as `key: value`). */
  function valueWords(value: unknown): string {
    if (value === null || value === undefined || value === '') return 'nothing';
    if (typeof value === 'string') return isolateLabel(names.get(value) ?? value);
    if (typeof value === 'number' || typeof value === 'boolean') return String(value);
    if (Array.isArray(value)) return value.length ? list(value.map(valueWords)) : 'none';
    if (typeof value === 'object') {
      const o = value as Record<string, unknown>;
      for (const k of ['name', 'label', 'email']) if (typeof o[k] === 'string' && o[k]) return o.id ? `${isolateLabel(o[k] as string)} (${String(o.id)})` : isolateLabel(o[k] as string);
      if (typeof o.id === 'string') return o.id;
      const parts = Object.entries(o).map(([k, v]) => `${k.replace(/_/g, ' ')}: ${valueWords(v)}`);
      return parts.length ? parts.join('; ') : 'nothing';
    }
    return String(value);
  }

  /** A key's delegation in words: `nobody`, `every member (now and later)`, `Ada and Olga`. */
  function delegationWords(value: unknown): string {
    if (value === 'none' || value === null || value === undefined || (Array.isArray(value) && !value.length)) return 'nobody';
    if (value === 'all') return 'every member (now and later)';
    if (typeof value === 'object' && !Array.isArray(value)) {
      const o = value as Record<string, unknown>;
      const mode = o.mode ?? o.delegation ?? o.kind;
      if (mode === 'none' || mode === 'all') return delegationWords(mode);
      const who = o.members ?? o.delegates ?? o.member_names;
      if (Array.isArray(who)) return delegationWords(who);
    }
    return valueWords(value);
  }

  /** A workspace's API-key availability in words. */
  function keyAccessWords(value: unknown): string {
    if (value === 'on') return 'on';
    if (value === 'off') return 'off (no new keys; existing keys keep working)';
    if (value === 'stopped') return 'stopped (no key works)';
    return valueWords(value);
  }

  /** A webhook signing contract in words. */
  function contractWords(value: unknown): string {
    if (value === 'v1') return 'the timestamped v1= signature';
    if (value === 'legacy' || value === 'bare' || value === 'hmac' || value === 'bare_hmac') return 'the bare HMAC signature';
    return valueWords(value);
  }
  return { valueWords, delegationWords, keyAccessWords, contractWords };
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/**
 * What an entry did, in words and without the actor ("changed Ben Admin's role from member to admin").
 * Every action of the design has its sentence; an unknown action is said generically with its details.
 */
export function describeAction(row: Pick<DbAuditRow, 'action' | 'subject_type' | 'subject_id' | 'subject_label' | 'details'>, memberNames: AuditNames = new Map()): string {
  return describeWith(row, wordsFor(memberNames));
}

function describeWith(row: Pick<DbAuditRow, 'action' | 'subject_type' | 'subject_id' | 'subject_label' | 'details'>, words: ReturnType<typeof wordsFor>): string {
  const { valueWords, delegationWords, keyAccessWords, contractWords } = words;
  let d: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(row.details || '{}') as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) d = parsed as Record<string, unknown>;
  } catch {
    // A row that is not JSON is described without its details.
  }
  // Every user-provided label is isolated (isolateLabel): no name can garble the sentence around it.
  const label = isolateLabel(row.subject_label ?? '');
  const id = row.subject_id ?? '';
  const email = typeof d.email === 'string' ? isolateLabel(d.email) : '';
  const idNote = id ? ` (${id})` : '';
  /** The subject by name when it has one, else by kind and id. */
  const named = (kind: string) => (label ? `${label}` : `${kind} ${id}`.trim());
  const key = () => (label ? `the API key ${quoted(label)}${idNote}` : `the API key ${id}`.trim());
  const webhook = () => (label ? `the webhook subscription ${quoted(label)}${idNote}` : `the webhook subscription ${id}`.trim());
  const member = () => named('member');
  const change = (words: (v: unknown) => string) => {
    const before = d.before ?? d.from;
    const after = d.after ?? d.to;
    if (before === undefined && after === undefined) return '';
    return before === undefined ? ` to ${words(after)}` : ` from ${words(before)} to ${words(after)}`;
  };
  const role = typeof d.role === 'string' ? d.role : '';
  const sessionsEnded = typeof d.sessions_ended === 'number' && d.sessions_ended > 0 ? `; ${plural(d.sessions_ended, 'sign-in session')} ended` : '';

  switch (row.action) {
    case 'key.created': {
      const ops = Array.isArray(d.operations) ? ` with ${plural(d.operations.length, 'operation')}` : '';
      const acts = d.delegation === undefined ? '' : `, acting for ${delegationWords(d.delegation)}`;
      return `created ${key()}${ops}${acts}`;
    }
    case 'key.revoked':
      return `revoked ${key()}: it no longer works`;
    case 'key.replaced': {
      const old = d.replaces ?? d.replaced;
      return `made ${key()} to replace ${old ? valueWords(old) : 'an older key'} (both work until the old one is revoked)`;
    }
    case 'key.delegation_changed':
      return `changed whom ${key()} may act for${change(delegationWords)}`;
    case 'workspace.api_keys_changed':
      return `changed API keys for the workspace${change(keyAccessWords) || ` to ${keyAccessWords(d.access)}`}`;
    case 'workspace.created': {
      const counts = [['members', 'member'], ['sites', 'site'], ['apps', 'app'], ['keys', 'API key']] as const;
      const parts = counts.flatMap(([k, one]) => {
        const n = d[k];
        return typeof n === 'number' && n > 0 ? [plural(n, one)] : [];
      });
      return `created the workspace ${label ? quoted(label) : id}${label ? idNote : ''}${parts.length ? ` with ${list(parts)}` : ''}`;
    }
    case 'member.added':
      return `added ${member()}${email ? ` <${email}>` : ''}${role ? ` as ${role}` : ''}${d.disabled === true ? ' (disabled)' : ''}`;
    case 'member.invited':
      return `invited ${label || email || 'someone'}${role ? ` as ${role}` : ''}${Array.isArray(d.replaces) && d.replaces.length ? `, which replaces the earlier open invitation${d.replaces.length > 1 ? 's' : ''} of the address (${list(d.replaces.map(String))})` : ''}`;
    case 'invitation.revoked':
      return `revoked the invitation for ${label || email || id}${role ? ` (as ${role})` : ''}`;
    case 'member.joined':
      return `joined${role ? ` as ${role}` : ''} through an invitation${typeof d.invited_by === 'string' ? ` from ${isolateLabel(d.invited_by)}` : ''}`;
    case 'member.role_changed':
      return `changed ${possessive(member())} role${change(valueWords)}${sessionsEnded}`;
    case 'member.disabled':
      return `disabled ${member()}${sessionsEnded}`;
    case 'member.enabled':
      return `enabled ${member()}`;
    case 'session.revoked': {
      if (row.subject_type === 'member') {
        const n = typeof d.sessions === 'number' ? d.sessions : undefined;
        return n === 1 ? `ended ${possessive(member())} one sign-in session` : `ended all ${n === undefined ? '' : `${n} `}of ${possessive(member())} sign-in sessions`;
      }
      const whose = typeof d.member_name === 'string' ? `${possessive(isolateLabel(d.member_name))} ` : '';
      return `ended ${whose}sign-in session ${id}`.replace(/\s+$/, '');
    }
    case 'connection.approved': {
      const conn = label ? `the MCP connection ${quoted(label)}${idNote}` : `the MCP connection ${id}`.trim();
      const ops = Array.isArray(d.operations) ? plural(d.operations.length, 'operation') : '';
      const how = d.access === 'personal'
        ? ` with personal access${typeof d.acts_as === 'string' ? ` (acting as ${valueWords(d.acts_as)})` : ''}${ops ? `: ${ops}` : ''}`
        : ` with workspace access${ops ? `: ${ops}` : ''}${d.delegation === undefined ? '' : `, acting for ${delegationWords(d.delegation)}`}`;
      const sets = Array.isArray(d.toolsets) && d.toolsets.length ? `; toolsets ${valueWords(d.toolsets)}` : '';
      return `approved ${conn}${how}${sets}${d.read_only === true ? '; read only' : ''}`;
    }
    case 'connection.revoked': {
      const conn = label ? `the MCP connection ${quoted(label)}${idNote}` : `the MCP connection ${id}`.trim();
      const whose = d.access === 'personal' && typeof d.acts_as === 'string' ? ` (personal, acting as ${valueWords(d.acts_as)})` : d.access === 'workspace' ? ' (workspace access)' : '';
      return `revoked ${conn}${whose}: its tokens no longer work`;
    }
    case 'webhook.approved':
      return `approved ${webhook()}`;
    case 'webhook.rejected':
      return id.startsWith('whp_') ? `rejected the proposed webhook ${label ? `${quoted(label)} (${id})` : id}` : `rejected ${webhook()}`;
    case 'webhook.secret_rotated':
      return `rotated the signing secret of ${webhook()}`;
    case 'webhook.signing_contract_changed':
      return `moved ${webhook()}${change(contractWords) || ' to another signing contract'}`;
    default: {
      const subject = row.subject_type ? ` on ${row.subject_type} ${label ? quoted(label) : ''}${label ? idNote : id}`.trimEnd() : '';
      const shown = Object.keys(d).length ? ` (${valueWords(d)})` : '';
      return `${row.action}${subject}${shown}`;
    }
  }
}

/** `YYYY-MM-DD HH:MM:SS UTC`. */
export const auditTime = (ms: number) => `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;

/** An entry for a reader: when, who, what in words, subject. */
export function viewAudit(row: DbAuditRow, memberNames: AuditNames = new Map()): AuditView {
  return {
    id: row.id,
    at: row.at,
    when: auditTime(row.at),
    who: describeActor(row),
    action: row.action,
    what: describeAction(row, memberNames),
    subject: row.subject_type ? `${row.subject_type} ${row.subject_id ?? ''}`.trim() : '',
  };
}

/** A whole sentence: `Olga Owner changed Ben Admin's role from member to admin`. */
export const auditSentence = (row: DbAuditRow) => `${isolateLabel(row.actor_label)} ${describeAction(row)}`;

/**
 * A page of a workspace's entries (newest first) and the id to continue from, if older ones exist.
 * `before` is an entry id (the last one shown); unknown ids are the caller's to refuse.
 */
export async function readAudit(
  sql: Sql,
  workspaceId: string,
  options: { limit: number; before?: { at: number; id: string }; actions?: readonly string[] },
): Promise<{ entries: AuditView[]; older: string | null }> {
  const rows = await listAuditRows(sql, workspaceId, { ...options, limit: options.limit + 1 });
  const shown = rows.slice(0, options.limit);
  // Member ids in details (a key's delegation) are shown by name.
  const ids = [...new Set(shown.flatMap((r) => r.details.match(/"mb_[0-9A-Za-z]{1,40}"/g) ?? []).map((s) => s.slice(1, -1)))];
  const found = ids.length
    ? await sql.all<{ id: string; name: string }>(`SELECT id, name FROM members WHERE workspace_id = ? AND id IN (${ids.map(() => '?').join(', ')})`, [workspaceId, ...ids])
    : [];
  const memberNames = new Map(found.map((m) => [m.id, m.name]));
  return { entries: shown.map((r) => viewAudit(r, memberNames)), older: rows.length > options.limit ? shown.at(-1)!.id : null };
}

/** Deletes entries older than the retention; what the daily `audit.prune` job runs. Returns how many. */
export function pruneAudit(sql: Sql, now: number, retentionDays: number): Promise<number> {
  return deleteAuditRowsBefore(sql, now - retentionDays * 86_400_000);
}
