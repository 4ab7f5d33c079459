/**
 * The signing module's layout (handlers/signing/index.ts has the map): the bankid test provider is outside
 * the production import graph (no static import reaches it from the service's entry points; only the
 * provider registry loads it, by a dynamic import, when BANKID_PROVIDER=test), and no two of the module's
 * files share a name. No database: the import graph is read from the sources with TypeScript's parser.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { bankIdSettings, type ProviderCompleteInput, providerOf, ProviderRefusal } from '../../handlers/signing/bankid/provider.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SIGNING = 'handlers/signing';
const TEST_PROVIDER = `${SIGNING}/bankid/testProvider.ts`;
/** What runs in production: the service, the worker and the admin CLI (scripts/build.ts compiles these). */
const ENTRIES = ['app.ts', 'scripts/start.ts', 'scripts/worker.ts', 'scripts/admin.ts'];

/** A file's imports as written: static ones that stay at run time (not `import type`), and dynamic `import('...')`s. */
function importsOf(rel: string): { static: string[]; dynamic: string[] } {
  const source = ts.createSourceFile(rel, fs.readFileSync(path.join(root, rel), 'utf8'), ts.ScriptTarget.Latest, true);
  const found = { static: [] as string[], dynamic: [] as string[] };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && !node.importClause?.isTypeOnly && ts.isStringLiteral(node.moduleSpecifier)) found.static.push(node.moduleSpecifier.text);
    else if (ts.isExportDeclaration(node) && !node.isTypeOnly && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) found.static.push(node.moduleSpecifier.text);
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) found.dynamic.push(node.arguments[0].text);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The repository's .ts files reached from `entries` by static imports (relative ones; packages are not followed). */
function staticGraph(entries: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const queue = [...entries];
  while (queue.length) {
    const rel = queue.pop()!;
    // A file that is not there is tsc's to report (and another engineer's edit in flight), not this test's.
    if (seen.has(rel) || !fs.existsSync(path.join(root, rel))) continue;
    seen.add(rel);
    for (const spec of importsOf(rel).static) {
      if (!spec.startsWith('.') || !spec.endsWith('.ts')) continue;
      queue.push(path.posix.normalize(path.posix.join(path.posix.dirname(rel), spec)));
    }
  }
  return seen;
}

const tsFilesUnder = (dir: string) =>
  (fs.readdirSync(path.join(root, dir), { recursive: true }) as string[]).filter((f) => f.endsWith('.ts')).map((f) => path.posix.join(dir, f.split(path.sep).join('/')));

describe('the signing module layout', () => {
  it('no static import reaches the bankid test provider from the service, the worker or the admin CLI', () => {
    const graph = staticGraph(ENTRIES);
    // Not vacuous: the walk does reach the module, the bankid flow and the provider registry.
    for (const rel of [`${SIGNING}/index.ts`, `${SIGNING}/bankid/flow.ts`, `${SIGNING}/bankid/provider.ts`, `${SIGNING}/archive/seal.ts`]) assert.ok(graph.has(rel), `${rel} is in the graph`);
    assert.ok(!graph.has(TEST_PROVIDER), `${TEST_PROVIDER} is imported statically by the production code`);
  });

  it('only the provider registry loads the test provider, with a dynamic import', () => {
    const importers = [...tsFilesUnder('handlers'), ...tsFilesUnder('server'), ...tsFilesUnder('db'), ...ENTRIES].filter((rel) => {
      const { static: s, dynamic: d } = importsOf(rel);
      const target = (spec: string) => path.posix.normalize(path.posix.join(path.posix.dirname(rel), spec));
      assert.ok(!s.map(target).includes(TEST_PROVIDER), `${rel} imports the test provider statically`);
      return d.map(target).includes(TEST_PROVIDER);
    });
    assert.deepEqual(importers, [`${SIGNING}/bankid/provider.ts`]);
  });

  it('the configured test provider loads on first use; none, production and unknown names load nothing', async () => {
    assert.equal(providerOf(bankIdSettings({})), null);
    assert.throws(() => bankIdSettings({ BANKID_PROVIDER: 'test', NODE_ENV: 'production' }), /refused when NODE_ENV=production/);
    // A name of Object.prototype is not a provider either (the registry is looked up by own keys).
    for (const name of ['constructor', 'toString', '__proto__']) {
      assert.throws(() => bankIdSettings({ BANKID_PROVIDER: name }), new RegExp(`one of: test \\(got "${name}"\\)`));
      assert.equal(providerOf({ bankidProvider: name }), null);
    }
    const known = providerOf(bankIdSettings({ BANKID_PROVIDER: 'test' }));
    assert.ok(known);
    assert.deepEqual({ id: known.id, name: known.name, test: known.test }, { id: 'test', name: 'BankID (test)', test: true });
    const provider = await known.load();
    assert.deepEqual({ id: provider.id, name: provider.name, test: provider.test }, { id: 'test', name: 'BankID (test)', test: true });
    assert.equal(typeof provider.start, 'function');
    assert.equal(typeof provider.complete, 'function');
    assert.equal(await known.load(), provider, 'loaded once: the same provider every time');
    // Its refusals are ProviderRefusals to the flow that imported provider.ts statically, even where the
    // dynamic import brought a second copy of provider.ts (these tests load the sources as CommonJS).
    const input: ProviderCompleteInput = {
      orderId: 'spo_x', providerRef: null, requestId: 'sr_x', title: 'T', signer: { recipientId: 'sr_r', name: 'N', email: 'n@example.com' },
      params: { personal_number: '199001011230' }, document: new Uint8Array(), now: Date.UTC(2026, 0, 1),
    };
    await assert.rejects(provider.complete(input), (err: unknown) => err instanceof ProviderRefusal && err.code === 'personal_number' && /check digit/.test(err.message));
    assert.ok(!(new Error('x') instanceof ProviderRefusal));
  });

  it('no two of its source files share a name, and nothing is left at the old flat paths', () => {
    const files = tsFilesUnder(SIGNING).filter((f) => !f.includes('/migrations/'));
    const byName = new Map<string, string[]>();
    for (const f of files) byName.set(path.posix.basename(f), [...(byName.get(path.posix.basename(f)) ?? []), f]);
    const twice = [...byName].filter(([, list]) => list.length > 1);
    assert.deepEqual(twice, [], 'file names used twice');
    const top = fs.readdirSync(path.join(root, SIGNING)).filter((f) => f.endsWith('.ts')).sort();
    assert.deepEqual(top, ['audit.ts', 'files.ts', 'handlers.ts', 'index.ts', 'outboxEvents.ts', 'queries.ts', 'settings.ts']);
  });
});
