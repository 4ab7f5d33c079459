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

/** A family of actions a reader filters by (`?family=keys`): its label and the action prefixes it covers. */
export interface AuditFamily {
  readonly label: string;
  readonly prefixes: readonly string[];
}

/**
 * What a module says of the audit entries it records (`ServiceModule.audit`): the families a reader
 * filters by, and a sentence for each action. The kernel names no module's actions: an action no
 * module describes is said generically with its details.
 */
export interface AuditWords {
  readonly families?: Readonly<Record<string, AuditFamily>>;
  readonly actions?: Readonly<Record<string, AuditSentence>>;
}

/** An action's sentence, without the actor ("changed Ben Admin's role from member to admin"), from its parts. */
export type AuditSentence = (entry: AuditSentenceParts) => string;

/** What a sentence is made from: the entry (labels already isolated) and the shared words. */
export interface AuditSentenceParts {
  /** `details`, parsed (`{}` when it is not a JSON object). */
  readonly d: Record<string, unknown>;
  readonly subjectType: string | null;
  /** The subject's id, or empty. */
  readonly id: string;
  /** The subject's label (isolated), or empty. */
  readonly label: string;
  /** ` (id)` when there is an id. */
  readonly idNote: string;
  /** `details.email` (isolated), or empty. */
  readonly email: string;
  /** `details.role`, or empty. */
  readonly role: string;
  /** `; N sign-in sessions ended` when `details.sessions_ended` is positive. */
  readonly sessionsEnded: string;
  /** The subject by name when it has one, else by kind and id. */
  named(kind: string): string;
  /** ` from <before> to <after>` (or ` to <after>`) of `details.before/after` (or from/to), in `words`; empty without them. */
  change(words: (v: unknown) => string): string;
  /** A value of `details` in words (member ids by name, lists joined, objects as `key: value`). */
  valueWords(value: unknown): string;
  /** A delegation in words: `nobody`, `every member (now and later)`, `Ada and Olga`. */
  delegationWords(value: unknown): string;
  quoted(s: string): string;
  possessive(name: string): string;
  plural(n: number, one: string, many?: string): string;
  list(items: string[]): string;
}

let families = new Map<string, AuditFamily>();
const sentences = new Map<string, AuditSentence>();

/** Adds the modules' audit words (app.ts, once per process); two modules describing one action or family is an error. */
export function registerAuditWords(all: readonly AuditWords[]): void {
  for (const words of all) {
    for (const [name, family] of Object.entries(words.families ?? {})) {
      if (families.has(name) && families.get(name) !== family) throw new Error(`two modules declare the audit family ${name}`);
      families.set(name, family);
    }
    for (const [action, sentence] of Object.entries(words.actions ?? {})) {
      if (sentences.has(action) && sentences.get(action) !== sentence) throw new Error(`two modules describe the audit action ${action}`);
      sentences.set(action, sentence);
    }
  }
  // Kept by label (the order of the modules in app.ts does not show), sorted here rather than at each read.
  families = new Map([...families].sort(([, a], [, b]) => a.label.localeCompare(b.label, 'en')));
}

/** The families a reader filters by, by label. */
export const auditFamilies = (): ReadonlyMap<string, AuditFamily> => families;

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

  return { valueWords, delegationWords };
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/**
 * What an entry did, in words and without the actor ("changed Ben Admin's role from member to admin").
 * Each module says its own actions (`ServiceModule.audit`); an action nobody describes is said generically with its details.
 */
export function describeAction(row: Pick<DbAuditRow, 'action' | 'subject_type' | 'subject_id' | 'subject_label' | 'details'>, memberNames: AuditNames = new Map()): string {
  return describeWith(row, wordsFor(memberNames));
}

function describeWith(row: Pick<DbAuditRow, 'action' | 'subject_type' | 'subject_id' | 'subject_label' | 'details'>, words: ReturnType<typeof wordsFor>): string {
  const { valueWords, delegationWords } = words;
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
  const change = (words: (v: unknown) => string) => {
    const before = d.before ?? d.from;
    const after = d.after ?? d.to;
    if (before === undefined && after === undefined) return '';
    return before === undefined ? ` to ${words(after)}` : ` from ${words(before)} to ${words(after)}`;
  };
  const role = typeof d.role === 'string' ? d.role : '';
  const sessionsEnded = typeof d.sessions_ended === 'number' && d.sessions_ended > 0 ? `; ${plural(d.sessions_ended, 'sign-in session')} ended` : '';

  const sentence = sentences.get(row.action) ?? KERNEL_SENTENCES[row.action];
  if (sentence) {
    return sentence({ d, subjectType: row.subject_type, id, label, idNote, email, role, sessionsEnded, named, change, valueWords, delegationWords, quoted, possessive, plural, list });
  }
  const subject = row.subject_type ? ` on ${row.subject_type} ${label ? quoted(label) : ''}${label ? idNote : id}`.trimEnd() : '';
  const shown = Object.keys(d).length ? ` (${valueWords(d)})` : '';
  return `${row.action}${subject}${shown}`;
}

/** The kernel's own actions: a workspace made by the operator (server/admin.ts). */
const KERNEL_SENTENCES: Record<string, AuditSentence> = {
  'workspace.created': ({ d, label, id, idNote, quoted, plural, list }) => {
    const counts = [['members', 'member'], ['sites', 'site'], ['apps', 'app'], ['keys', 'API key']] as const;
    const parts = counts.flatMap(([k, one]) => {
      const n = d[k];
      return typeof n === 'number' && n > 0 ? [plural(n, one)] : [];
    });
    return `created the workspace ${label ? quoted(label) : id}${label ? idNote : ''}${parts.length ? ` with ${list(parts)}` : ''}`;
  },
};

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
