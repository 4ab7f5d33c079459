/**
 * How the admin CLI prints a result for a person (JSON with `--json`): a list of records as aligned
 * columns, a record as `key: value` lines (a nested record indented below its key), a value nested
 * deeper than that as compact JSON, times (`*_at`, `*_until` in Unix ms) as UTC. Nothing is cut:
 * a secret printed once is in full.
 */

type Row = Record<string, unknown>;

const isRecord = (v: unknown): v is Row => typeof v === 'object' && v !== null && !Array.isArray(v);
const isTable = (v: unknown): v is Row[] => Array.isArray(v) && v.length > 0 && v.every(isRecord);

/** A time field's value in Unix ms (years 2001 to 2286), shown as UTC. */
const isTime = (key: string, v: unknown) => /(_at|_until)$/.test(key) && typeof v === 'number' && v >= 1e12 && v < 1e13;
const time = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** One value on one line: times as UTC, lists of plain values joined by commas, anything deeper as compact JSON. */
function cell(key: string, v: unknown): string {
  if (v === null || v === undefined) return '-';
  if (isTime(key, v)) return time(v as number);
  if (typeof v === 'string') return v === '' ? '""' : v.includes('\n') ? JSON.stringify(v) : v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v) && v.every((x) => x === null || ['string', 'number', 'boolean'].includes(typeof x))) return v.length ? v.map((x) => cell('', x)).join(', ') : '(none)';
  return JSON.stringify(v);
}

/** Display width of a string (code points; good enough for the ids, names and words printed here). */
const width = (s: string) => [...s].length;
const pad = (s: string, n: number) => s + ' '.repeat(Math.max(0, n - width(s)));

function table(rows: Row[], indent: string): string[] {
  const columns: string[] = [];
  for (const r of rows) for (const k of Object.keys(r)) if (!columns.includes(k)) columns.push(k);
  const cells = rows.map((r) => columns.map((c) => cell(c, r[c])));
  const widths = columns.map((c, i) => Math.max(width(c), ...cells.map((row) => width(row[i]!))));
  const line = (values: string[]) => indent + values.map((v, i) => (i === values.length - 1 ? v : pad(v, widths[i]!))).join('  ').trimEnd();
  return [line(columns), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)];
}

function record(value: Row, indent: string, depth: number): string[] {
  const keys = Object.keys(value);
  if (!keys.length) return [`${indent}(none)`];
  const keyWidth = Math.max(...keys.map((k) => width(k))) + 1;
  const out: string[] = [];
  for (const k of keys) {
    const v = value[k];
    if (depth < 3 && (isTable(v) || (isRecord(v) && Object.keys(v).length))) {
      out.push(`${indent}${k}:`, ...render(v, `${indent}  `, depth + 1));
    } else if (typeof v === 'string' && v.includes('\n')) {
      out.push(`${indent}${k}:`, ...v.replace(/\n$/, '').split('\n').map((l) => `${indent}  | ${l}`.trimEnd()));
    } else {
      out.push(`${indent}${pad(`${k}:`, keyWidth)} ${isRecord(v) ? '(none)' : cell(k, v)}`);
    }
  }
  return out;
}

function render(value: unknown, indent: string, depth: number): string[] {
  if (isTable(value)) return table(value, indent);
  if (Array.isArray(value)) return value.length ? value.map((v) => `${indent}${cell('', v)}`) : [`${indent}(none)`];
  if (isRecord(value)) return record(value, indent, depth);
  return [`${indent}${cell('', value)}`];
}

/** The text the CLI prints for a result (ends with a newline). */
export function formatTable(value: unknown): string {
  return render(value, '', 0).join('\n') + '\n';
}
