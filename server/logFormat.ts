/**
 * Log lines for a person at a terminal: pino's JSON line turned into one readable line, with the ISO
 * time, the level, the message, then the request id, the error answered and the other fields as
 * `key=value` (strings quoted when they hold spaces). Used when stdout is a terminal (or
 * LOG_FORMAT=pretty); anywhere else the service writes JSON lines for a log collector.
 */
const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const COLOURS: Record<number, string> = { 10: '90', 20: '90', 30: '32', 40: '33', 50: '31', 60: '35' };
/** Fields every line has or that the line's head already shows. */
const SKIP = new Set(['level', 'time', 'msg', 'service', 'pid', 'hostname', 'request_id', 'req', 'res', 'error', 'error_message', 'err']);

const quoted = (v: unknown): string => {
  if (v === null || v === undefined) return String(v);
  if (typeof v === 'string') return /[\s"=]/.test(v) || v === '' ? JSON.stringify(v) : v;
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
};

/** One pino JSON line as a readable line (colours when `colour`); a line that is not JSON is kept as it is. */
export function prettyLine(json: string, colour: boolean): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.replace(/\n$/, '');
  }
  const level = Number(o.level);
  const name = (LEVELS[level] ?? String(o.level)).padEnd(5);
  const paint = (code: string, text: string) => (colour ? `\u001b[${code}m${text}\u001b[0m` : text);
  const parts = [typeof o.time === 'number' ? new Date(o.time).toISOString() : String(o.time ?? ''), paint(COLOURS[level] ?? '0', name), String(o.msg ?? '')];
  const req = o.req as { method?: string; url?: string } | undefined;
  const res = o.res as { statusCode?: number } | undefined;
  if (req?.method) parts.push(`${req.method} ${req.url ?? ''}`);
  if (res?.statusCode !== undefined) parts.push(String(res.statusCode));
  if (o.error !== undefined) parts.push(paint('31', `${quoted(o.error)}: ${quoted(o.error_message)}`));
  if (o.request_id !== undefined) parts.push(`request_id=${quoted(o.request_id)}`);
  for (const [k, v] of Object.entries(o)) if (!SKIP.has(k) && v !== undefined) parts.push(`${k}=${quoted(v)}`);
  let line = parts.join('  ');
  const err = o.err as { type?: string; message?: string; stack?: string } | undefined;
  if (err) line += `\n${(err.stack ?? `${err.type ?? 'Error'}: ${err.message ?? ''}`).split('\n').map((l) => `    ${l}`).join('\n')}`;
  return line;
}

/** A destination for pino that writes readable lines to `out`. */
export function prettyDestination(out: NodeJS.WriteStream): { write(chunk: string): void } {
  const colour = Boolean(out.isTTY) && !process.env.NO_COLOR;
  return { write: (chunk: string) => void out.write(`${prettyLine(chunk, colour)}\n`) };
}

/** `pretty` or `json`: LOG_FORMAT when set, else pretty when stdout is a terminal. A bad value throws a readable error. */
export function logFormat(env: Readonly<Record<string, string | undefined>>, isTty: boolean): 'pretty' | 'json' {
  const set = env.LOG_FORMAT?.trim();
  if (!set) return isTty ? 'pretty' : 'json';
  if (set === 'pretty' || set === 'json') return set;
  throw new Error(`LOG_FORMAT must be pretty or json (got ${JSON.stringify(set)})`);
}
