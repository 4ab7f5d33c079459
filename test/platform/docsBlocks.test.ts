/**
 * Issue 22 §4: every shell block of README.md and of the guides in docs/ runs, as pasted, on a fresh
 * service (scripts/docs-check.ts, `npm run docs:check`), and their links lead somewhere; a block that
 * cannot run here is marked `no-run: <reason>`. The second suite checks the check: a failing block is
 * named by file and line, what a block defines reaches the next one, and unmarked, unexplained or
 * unlabelled blocks and broken links fail it. SQLite only: the blocks drive the service from outside,
 * as a reader does, with `npm start` on a new SQLite file.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type DocsReport, documentationFiles, runDocsCheck } from '../../scripts/docs-check.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

describe('the shell blocks of README.md and docs/ (npm run docs:check)', function () {
  // npm start compiles dist/ first when the sources are newer (up to a minute on a busy machine).
  this.timeout(300_000);
  let report: DocsReport;
  const lines: string[] = [];
  before(async () => {
    report = await runDocsCheck(documentationFiles(), (l) => lines.push(l));
  });

  it('runs every block that is not marked, and each passes', () => {
    assert.deepEqual(report.problems, [], lines.join('\n'));
    assert.ok(report.ran.length >= 9, `${report.ran.length} blocks ran`);
    assert.ok(report.ran.every((r) => r.ok));
    // The quick start's call and the guides' blocks are among them.
    assert.ok(report.ran.some((r) => r.file === 'README.md'));
    assert.ok(report.ran.some((r) => r.file === 'docs/documents-and-signing.md'));
  });

  it('reports the blocks marked not-run, each with its reason, and keeps them few', () => {
    assert.ok(report.notRun.every((n) => n.reason.length > 10), JSON.stringify(report.notRun));
    assert.ok(report.notRun.length <= report.ran.length, `${report.notRun.length} not run, ${report.ran.length} run`);
    const summary = lines.find((l) => /shell blocks run/.test(l)) ?? '';
    assert.match(summary, new RegExp(`${report.ran.length} shell blocks run \\(0 failed\\) in ${documentationFiles().length} files, ${report.notRun.length} marked not-run`));
    for (const n of report.notRun) assert.ok(lines.includes(`  ${n.file}:${n.line}: ${n.reason}`), `${n.file}:${n.line}`);
  });

  it('opens the README with the two commands of a fresh machine: start on SQLite, and the whole suite', () => {
    const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
    const blocks = [...readme.matchAll(/```sh[^\n]*\n([\s\S]*?)```/g)].map((m) => m[1]!.trim());
    assert.match(blocks[0]!, /^npm ci && npm start\b/);
    assert.equal(blocks[1], 'npm test');
    assert.ok(readme.split('\n').length <= 80, 'the README stays one screen and a map');
  });
});

describe('the docs check itself', function () {
  this.timeout(300_000);
  const dir = path.join(root, 'test-output', `docs-check-${process.pid}`);
  const rel = (name: string) => path.relative(root, path.join(dir, name));
  let report: DocsReport;
  before(async () => {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'other.md'), '# Other\n\n## A part\n');
    fs.writeFileSync(
      path.join(dir, 'good.md'),
      [
        '# Good', '', '[a part](other.md#a-part) [a site](https://example.com/)', '',
        '```sh', 'GREETING=hello; greet() { echo "$GREETING $1"; }; cd /tmp', '```', '',
        '```bash', 'test "$(greet there)" = "hello there"; test "$PWD" = /tmp; test -n "$PORT"', 'curl -sS --fail-with-body "http://localhost:$PORT/healthz"', '```', '',
        '```sh no-run: needs Docker', 'docker compose up', '```', '',
        '```text', 'output, never run', '```', '',
      ].join('\n'),
    );
    fs.writeFileSync(
      path.join(dir, 'bad.md'),
      [
        '# Bad', '', '[gone](missing.md) [no such part](other.md#nowhere)', '',
        '```sh', 'echo first', '```', '',
        '```sh', 'echo fine', 'echo "$UNDEFINED_IN_THIS_GUIDE"', '```', '',
        '```sh', 'echo never reached', '```', '',
        '```sh no-run', 'echo no reason', '```', '',
        '```', 'a block with no language', '```', '',
      ].join('\n'),
    );
    report = await runDocsCheck([rel('good.md'), rel('bad.md')], () => {});
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('carries what a block defines to the next blocks of its file, and gives them PORT', () => {
    const good = report.ran.filter((r) => r.file === rel('good.md'));
    assert.deepEqual(good.map((r) => [r.line, r.ok]), [[5, true], [9, true]]);
    assert.ok(!report.problems.some((p) => p.startsWith(rel('good.md'))), report.problems.join('\n'));
    assert.deepEqual(report.notRun, [{ file: rel('good.md'), line: 14, reason: 'needs Docker' }, { file: rel('bad.md'), line: 18, reason: '' }]);
  });

  it('names a failing block by file and line, shows the line bash stopped at, and runs no later block of that file', () => {
    const bad = report.ran.filter((r) => r.file === rel('bad.md'));
    assert.deepEqual(bad.map((r) => [r.line, r.ok]), [[5, true], [9, false]]);
    const failure = report.problems.find((p) => p.startsWith(`${rel('bad.md')}:9: the block failed`));
    assert.ok(failure, report.problems.join('\n'));
    assert.match(failure, new RegExp(`${rel('bad.md').replaceAll('.', '\\.')}:11: UNDEFINED_IN_THIS_GUIDE: unbound variable`));
    assert.ok(!report.ran.some((r) => r.line === 14 && r.file === rel('bad.md')));
  });

  it('fails on broken links, a no-run block without its reason and a block without a language', () => {
    const problems = report.problems.join('\n');
    assert.match(problems, new RegExp(`${rel('bad.md')}:3: the link missing.md names .*missing.md, which does not exist`));
    assert.match(problems, new RegExp(`${rel('bad.md')}:3: the link other.md#nowhere: .*other.md has no heading #nowhere`));
    assert.match(problems, new RegExp(`${rel('bad.md')}:18: a no-run block without its reason`));
    assert.match(problems, new RegExp(`${rel('bad.md')}:22: a fenced block without a language`));
    assert.equal(report.problems.length, 5, problems);
  });
});
