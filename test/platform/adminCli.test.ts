/**
 * The admin CLI as an operator reads it, in its own process: tables by default (a list as aligned
 * columns, a record as `key: value` lines, secrets printed once in full), JSON with `--json` anywhere
 * on the line, and refusals of a workspace file or an option in words.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { formatTable } from '../../scripts/adminTable.ts';
import { forEachDatabase } from '../support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** `npm run admin -- ...` exactly as typed (no `--json` added). */
async function cli(databaseUrl: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(path.join(root, 'node_modules/.bin/tsx'), [path.join(root, 'scripts/admin.ts'), ...args], { env: { ...process.env, DATABASE_URL: databaseUrl }, cwd: root });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const file = (name: string, text: string) => {
  const p = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-cli-')), name);
  fs.writeFileSync(p, text);
  return p;
};

const SPEC = `workspace: {name: Tables}
members:
  olga: {name: Olga Owner, email: olga@tables.test, role: owner}
  ada: {name: Ada, email: ada@tables.test, role: member}
keys:
  ci: {name: CI, operations: ['workspace.*'], delegation: [ada]}
`;

describe('admin CLI output (in-process formatting)', () => {
  it('prints lists as aligned columns, records as key: value lines, nested records indented, deeper values as compact JSON, times in UTC', () => {
    assert.equal(
      formatTable([
        { id: 'mb_1', name: 'Olga Owner', role: 'owner', created_at: Date.UTC(2026, 10, 26, 9, 30), tags: ['a', 'b'], extra: { x: 1 } },
        { id: 'mb_22', name: 'Ada', role: 'member', created_at: null, tags: [], extra: null },
      ]),
      [
        'id     name        role    created_at            tags    extra',
        '-----  ----------  ------  --------------------  ------  -------',
        'mb_1   Olga Owner  owner   2026-11-26T09:30:00Z  a, b    {"x":1}',
        'mb_22  Ada         member  -                     (none)  -',
        '',
      ].join('\n'),
    );
    assert.equal(
      formatTable({ workspace_id: 'ws_1', members: { olga: 'mb_1' }, keys: { ci: { id: 'ak_1', secret: 'wso_secret' } }, apps: {} }),
      ['workspace_id: ws_1', 'members:', '  olga: mb_1', 'keys:', '  ci:', '    id:     ak_1', '    secret: wso_secret', 'apps:         (none)', ''].join('\n'),
    );
    assert.equal(formatTable([]), '(none)\n');
    assert.equal(formatTable({ text: 'line one\nline two\n' }), 'text:\n  | line one\n  | line two\n');
  });
});

forEachDatabase('the admin CLI in its own process', (svc) => {
  it('prints tables by default and JSON with --json anywhere; a secret printed once stays whole in the table', async function () {
    this.timeout(120_000);
    const applied = await cli(svc().databaseUrl, 'apply', file('tables.yaml', SPEC));
    assert.equal(applied.code, 0, applied.stderr);
    const secret = /^ {4}secret: (wso_\S+)$/m.exec(applied.stdout)?.[1];
    assert.ok(secret, applied.stdout);
    const ws = /^workspace_id: (ws_\S+)$/m.exec(applied.stdout)![1]!;
    assert.match(applied.stdout, /^members:\n {2}olga: mb_\w+\n {2}ada: {2}mb_\w+$/m);
    assert.equal((await svc().client(secret).workspace.ListBundles({})).response.status, 200, 'the secret in the table works');

    const table = await cli(svc().databaseUrl, 'member', 'list', '--workspace', ws);
    assert.equal(table.code, 0, table.stderr);
    const lines = table.stdout.trimEnd().split('\n');
    assert.match(lines[0]!, /^id +name +email +role +/);
    assert.match(lines[1]!, /^-+ +-+ +-+/);
    assert.equal(lines.length, 4);
    const column = lines[0]!.indexOf('role');
    for (const line of lines.slice(2)) assert.match(line.slice(column), /^(owner|member) /, `columns line up: ${line}`);
    assert.match(table.stdout, /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/, 'times in UTC');

    for (const args of [['--json', 'member', 'list', '--workspace', ws], ['member', 'list', '--workspace', ws, '--json'], ['member', '--json', 'list', '--workspace', ws]]) {
      const out = await cli(svc().databaseUrl, ...args);
      assert.equal(out.code, 0, out.stderr);
      const members = JSON.parse(out.stdout) as Array<{ name: string; role: string }>;
      assert.deepEqual(members.map((m) => [m.name, m.role]).sort(), [['Ada', 'member'], ['Olga Owner', 'owner']], args.join(' '));
    }
    const keys = await cli(svc().databaseUrl, 'key', 'list', '--workspace', ws);
    assert.match(keys.stdout, /^id +name +operations +/);
    assert.ok(!keys.stdout.includes(secret), 'never a secret in a list');
  });

  it('refuses a workspace file and options in words, on one line', async function () {
    this.timeout(120_000);
    const bad = await cli(svc().databaseUrl, 'apply', file('bad.yaml', 'workspace: {name: Bad, colour: red}\nmembers:\n  ada: {name: Ada, email: ada@bad.test, role: boss}\n  "two words": {name: T, email: t@bad.test, role: member}\nkeys:\n  k: {name: K, operations: [], delegation: sometimes}\n'));
    assert.equal(bad.code, 1);
    assert.equal(bad.stdout, '');
    assert.equal(bad.stderr.split('\n').filter(Boolean).length, 1);
    assert.match(bad.stderr, /^admin: invalid workspace file: /);
    assert.match(bad.stderr, /members\.ada\.role must be one of owner, admin, member \(got "boss"\)/);
    assert.match(bad.stderr, /workspace\.colour is not a known field/);
    assert.match(bad.stderr, /members: the name "two words" must be 1 to 64 letters, digits, _ or -/);
    assert.match(bad.stderr, /keys\.k\.delegation must be "all", "none" or a list \(got "sometimes"\)/);
    assert.doesNotMatch(bad.stderr, /must be equal to one of the allowed values|\/members\/ada/);

    const applied = await cli(svc().databaseUrl, '--json', 'apply', file('tables.yaml', SPEC.replace('Tables', 'Words')));
    const ws = (JSON.parse(applied.stdout) as { workspace_id: string }).workspace_id;
    for (const [args, message] of [
      [['member', 'add', '--workspace', ws, '--name', 'Bo', '--email', 'bo@words.test', '--role', 'boss'], 'admin: --role must be one of owner, admin, member (got "boss")'],
      [['member', 'add', '--workspace', ws, '--name', 'Bo', '--email', 'bo.words.test'], 'admin: --email must be an e-mail address such as ada@example.com (got "bo.words.test")'],
      [['bundle', 'add', '--workspace', ws, '--name', 'Shop', '--domain', 'Shop.Example'], 'admin: --domain must be a host name in lower case, such as docs.example.com (got "Shop.Example")'],
      [['key', 'create', '--workspace', ws, '--name', 'K', '--operations', 'customers.*', '--resource', 'core:Deal=reed'], 'admin: --resource core:Deal: access must be read, write or read,write (got "reed")'],
    ] as Array<[string[], string]>) {
      const out = await cli(svc().databaseUrl, ...args);
      assert.equal(out.code, 1, args.join(' '));
      assert.equal(out.stderr.trim(), message);
    }
  });
});
