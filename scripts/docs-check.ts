/**
 * `npm run docs:check`: every shell block of README.md and of the guides in docs/ runs, as pasted,
 * against a fresh service, so none can break silently; and every relative link between them leads to
 * a file that exists (and to a heading that exists, when it names one).
 *
 * - The blocks are the fenced ```sh, ```bash and ```shell blocks. A block that cannot run here says so
 *   in its info string with the reason, e.g. ```sh no-run: needs Docker (GitHub shows it as sh); it
 *   is counted and its reason reported. Output and other languages use another tag (```text, ```ts).
 * - One service for the whole check, started as a reader starts it (`npm start`, which compiles dist/
 *   when it is stale) on a new SQLite file in a temporary folder and a free port. Every block gets the
 *   environment a reader who started it so would have: `PORT` and `DATABASE_URL` exported, the working
 *   folder this repository's root.
 * - Each file's blocks run in order, each with `bash -euo pipefail` (an unset variable or a failing
 *   command fails the block); what a block defines (variables, functions, the folder it went to) is
 *   there for the file's next blocks, as in one terminal. Files do not share anything: a guide defines
 *   what it uses.
 * - A failing block is named by file and line, with its output; the check goes on with the next file
 *   and exits 1 at the end. The last lines say how many blocks ran and how many were marked not-run,
 *   with the reasons.
 *
 *   npm run docs:check [-- [--verbose] FILE.md ...]     (default: README.md and docs/*.md; --verbose prints each block's output)
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { fencesOf, headingsOf, linksOf, parse } from '../handlers/discovery/markdown.ts';
import { freePort } from './ports.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SHELL = new Set(['sh', 'bash', 'shell']);
const BLOCK_TIMEOUT_MS = 120_000;
const START_TIMEOUT_MS = 240_000;

/** README.md and the guides, as paths relative to the repository. */
export function documentationFiles(): string[] {
  const docs = fs
    .readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

export interface BlockResult {
  file: string;
  line: number;
  ms: number;
  ok: boolean;
  output?: string;
}

export interface DocsReport {
  ran: BlockResult[];
  notRun: { file: string; line: number; reason: string }[];
  /** Problems that fail the check: failing blocks, broken links, unmarked or unexplained blocks. */
  problems: string[];
  ms: number;
}

/** Links from `file` to files that do not exist, or to headings the target does not have. */
export function brokenLinks(files: string[]): string[] {
  const problems: string[] = [];
  const anchors = new Map<string, Set<string>>();
  const anchorsOf = (abs: string) => {
    let set = anchors.get(abs);
    if (!set) {
      set = new Set(headingsOf(parse(fs.readFileSync(abs, 'utf8'))).map((h) => h.slug));
      anchors.set(abs, set);
    }
    return set;
  };
  for (const file of files) {
    const abs = path.join(root, file);
    for (const link of linksOf(parse(fs.readFileSync(abs, 'utf8')))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link.href) || link.href.startsWith('//')) continue; // another site, mailto:
      const [target = '', anchor] = link.href.split('#', 2) as [string, string | undefined];
      const to = target ? path.resolve(path.dirname(abs), decodeURIComponent(target)) : abs;
      if (!to.startsWith(root + path.sep)) problems.push(`${file}:${link.line}: the link ${link.href} leaves the repository`);
      else if (!fs.existsSync(to)) problems.push(`${file}:${link.line}: the link ${link.href} names ${path.relative(root, to)}, which does not exist`);
      else if (anchor && to.endsWith('.md') && !anchorsOf(to).has(anchor)) problems.push(`${file}:${link.line}: the link ${link.href}: ${path.relative(root, to)} has no heading #${anchor}`);
    }
  }
  return problems;
}

/** The environment of the service and of the blocks: the caller's, without what the check sets and what tests set. */
function readerEnvironment(port: number, databaseUrl: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(DATABASE_URL|PORT|PUBLIC_URL|BASE_URL|NODE_ENV|JOBS|SMTP_URL|MAIL_FROM|LOG_LEVEL|LOG_FORMAT|TEST_.*|MOCHA.*|npm_.*)$/.test(k)) continue;
    env[k] = v;
  }
  return { ...env, PORT: String(port), DATABASE_URL: databaseUrl };
}

/** The service as a reader starts it, answering /healthz; `stop` ends its process group. */
async function startService(env: NodeJS.ProcessEnv, logFile: string): Promise<{ stop(): Promise<void> }> {
  const log = fs.openSync(logFile, 'a');
  const child = spawn('npm', ['start'], { cwd: root, env: { ...env, LOG_FORMAT: 'json' }, stdio: ['ignore', log, log], detached: true });
  fs.closeSync(log);
  let exited: number | null | undefined;
  child.on('exit', (code) => {
    exited = code;
  });
  const stop = async () => {
    if (exited !== undefined || child.pid === undefined) return;
    const done = new Promise((resolve) => child.once('exit', resolve));
    process.kill(-child.pid, 'SIGTERM');
    const timer = setTimeout(() => child.pid !== undefined && exited === undefined && process.kill(-child.pid, 'SIGKILL'), 20_000);
    await done;
    clearTimeout(timer);
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (exited !== undefined) throw new Error(`npm start exited (${exited}) before answering /healthz:\n${tail(fs.readFileSync(logFile, 'utf8'))}`);
    try {
      const res = await fetch(`http://127.0.0.1:${env.PORT}/healthz`);
      if (res.ok) return { stop };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`npm start did not answer /healthz within ${START_TIMEOUT_MS / 1000} s:\n${tail(fs.readFileSync(logFile, 'utf8'))}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

const tail = (text: string, lines = 40) => text.trimEnd().split('\n').slice(-lines).join('\n');

/**
 * Runs one block in its file's session: the state of the earlier blocks (`state`) is sourced first,
 * and what this block leaves (variables and functions it made, its folder) is written back on exit.
 */
function runBlock(source: string, state: string, work: string, env: NodeJS.ProcessEnv): { code: number | null; output: string; prelude: number } {
  const prelude = [
    `__docs_baseline=$(compgen -v)`,
    `__docs_save() { local rc=$?; { for v in $(compgen -v | grep -vxF -e "$__docs_baseline" | grep -vE '^(__docs|BASH|FUNCNAME|PIPESTATUS|_$)'); do declare -p "$v" 2>/dev/null || true; done; declare -f; printf 'cd %q\\n' "$PWD"; } > ${quote(state)}.next; mv ${quote(state)}.next ${quote(state)}; exit $rc; }`,
    `trap __docs_save EXIT`,
    `source ${quote(state)}`,
  ];
  const script = path.join(work, 'block.sh');
  fs.writeFileSync(script, `${prelude.join('\n')}\n${source}`);
  const run = spawnSync('bash', ['-euo', 'pipefail', script], { cwd: root, env, encoding: 'utf8', timeout: BLOCK_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 32 * 1024 * 1024 });
  const output = `${run.stdout ?? ''}${run.stderr ?? ''}${run.error ? `\n${run.error.message}` : ''}`;
  return { code: run.status, output, prelude: prelude.length };
}

const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

export async function runDocsCheck(
  files: string[] = documentationFiles(),
  log: (line: string) => void = (l) => process.stdout.write(`${l}\n`),
  verbose = false,
): Promise<DocsReport> {
  const started = Date.now();
  const report: DocsReport = { ran: [], notRun: [], problems: brokenLinks(files), ms: 0 };
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'docs-check-'));
  const port = await freePort();
  const env = readerEnvironment(port, `sqlite:${path.join(work, 'service.sqlite')}`);
  const service = await startService(env, path.join(work, 'service.log'));
  log(`docs check: the service answers on port ${port} (npm start, ${path.join(work, 'service.sqlite')}), ${((Date.now() - started) / 1000).toFixed(1)} s`);
  try {
    for (const file of files) {
      const state = path.join(work, `${file.replaceAll('/', '_')}.state`);
      fs.writeFileSync(state, '');
      let failed = false; // later blocks of a file build on the earlier ones: after a failure they are checked, not run
      for (const fence of fencesOf(parse(fs.readFileSync(path.join(root, file), 'utf8')))) {
        const where = `${file}:${fence.line}`;
        if (!fence.lang) {
          report.problems.push(`${where}: a fenced block without a language: tag it (\`\`\`sh, or \`\`\`text for output)`);
          continue;
        }
        if (!SHELL.has(fence.lang)) continue;
        if (fence.noRun !== undefined) {
          if (!fence.noRun) report.problems.push(`${where}: a no-run block without its reason (\`\`\`${fence.lang} no-run: <why it cannot run here>)`);
          report.notRun.push({ file, line: fence.line, reason: fence.noRun });
          continue;
        }
        if (failed) continue;
        const t0 = Date.now();
        const { code, output, prelude } = runBlock(fence.source, state, work, env);
        const ms = Date.now() - t0;
        // bash names the script's lines: name the document's instead.
        const text = output.replaceAll(/^\S*block\.sh: line (\d+): /gm, (_m, n: string) => `${file}:${fence.line + Number(n) - prelude}: `);
        const ok = code === 0;
        report.ran.push({ file, line: fence.line, ms, ok, ...(ok ? {} : { output: text }) });
        log(`${ok ? 'ok  ' : 'FAIL'} ${where} (${(ms / 1000).toFixed(1)} s)`);
        if (verbose && ok && text.trim()) log(text.trimEnd().replace(/^/gm, '  > '));
        if (!ok) {
          report.problems.push(`${where}: the block failed (exit ${code ?? 'killed'}):\n${fence.source.replace(/^/gm, '  | ')}\n${tail(text).replace(/^/gm, '  > ')}`);
          failed = true;
        }
      }
    }
  } finally {
    await service.stop();
    if (report.problems.length === 0) fs.rmSync(work, { recursive: true, force: true });
    else log(`docs check: the service's log and the database are kept in ${work}`);
  }
  report.ms = Date.now() - started;
  const reasons = report.notRun.map((n) => `  ${n.file}:${n.line}: ${n.reason || '(no reason given)'}`);
  log(`docs check: ${report.ran.length} shell blocks run (${report.ran.filter((r) => !r.ok).length} failed) in ${files.length} files, ${report.notRun.length} marked not-run${reasons.length ? ':' : ''}`);
  for (const r of reasons) log(r);
  for (const p of report.problems) log(`PROBLEM ${p}`);
  log(`docs check: ${report.problems.length === 0 ? 'passed' : `${report.problems.length} problems`}, ${(report.ms / 1000).toFixed(1)} s`);
  return report;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const named = args.filter((a) => a !== '--verbose');
  const report = await runDocsCheck(named.length ? named.map((f) => path.relative(root, path.resolve(f))) : undefined, undefined, args.includes('--verbose'));
  process.exit(report.problems.length === 0 ? 0 : 1);
}
