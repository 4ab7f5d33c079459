/**
 * Issue 22: one kind of module, and a kernel that knows none. Read from the sources (every static and
 * dynamic import of every .ts file): the kernel (server/) imports no module; a module imports no other
 * module's files (what one needs of another is a service: handlers/interfaces/ holds the references and
 * types, no code of any module); every module app.ts lists lives in a folder of its own name.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { modules } from '../../app.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const INTERFACES = 'handlers/interfaces';

function sources(folder: string): string[] {
  return (fs.readdirSync(path.join(root, folder), { recursive: true }) as string[])
    .filter((f) => /\.(c|m)?ts$/.test(f) && !f.endsWith('.d.ts'))
    .map((f) => path.join(folder, f).split(path.sep).join('/'));
}

/** The repository paths a file imports (relative imports only), resolved. */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  const specifiers = [...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)'(\.[^']+)'/g)].map((m) => m[1]!);
  return specifiers.map((s) => path.posix.normalize(path.posix.join(path.posix.dirname(file), s)));
}

/** The module folder a path is in (`handlers/<name>`), or null. */
const moduleOf = (p: string): string | null => (p.startsWith('handlers/') ? p.split('/').slice(0, 2).join('/') : null);

describe('module boundaries (issue 22)', () => {
  it('the kernel (server/) imports no module and not the composition root', () => {
    const found = sources('server').flatMap((f) => importsOf(f).filter((i) => i.startsWith('handlers/') || i === 'app.ts').map((i) => `${f} imports ${i}`));
    assert.deepEqual(found, []);
  });

  it("no module imports another module's files; handlers/interfaces/ is the only shared folder, and it imports no module", () => {
    const found: string[] = [];
    for (const f of sources('handlers')) {
      const own = moduleOf(f)!;
      for (const i of importsOf(f)) {
        const other = moduleOf(i);
        if (!other || other === own) continue;
        if (other === INTERFACES && own !== INTERFACES) continue;
        found.push(`${f} imports ${i}`);
      }
    }
    assert.deepEqual(found, []);
  });

  it('handlers/interfaces/ holds types and service references only', () => {
    for (const f of sources(INTERFACES)) {
      const file = ts.createSourceFile(f, fs.readFileSync(path.join(root, f), 'utf8'), ts.ScriptTarget.Latest);
      for (const statement of file.statements) {
        const declaration = ts.isImportDeclaration(statement) || ts.isInterfaceDeclaration(statement) || ts.isTypeAliasDeclaration(statement) || (ts.isExportDeclaration(statement) && statement.isTypeOnly);
        // Besides declarations, only `export const x = serviceRef<T>('module.what')`.
        const reference =
          ts.isVariableStatement(statement) &&
          statement.declarationList.declarations.every((d) => d.initializer !== undefined && ts.isCallExpression(d.initializer) && d.initializer.expression.getText(file) === 'serviceRef');
        assert.ok(declaration || reference, `${f}: ${statement.getText(file).slice(0, 80)}`);
      }
    }
  });

  it('every module app.ts lists lives in handlers/<its name>/ with an index.ts', () => {
    for (const m of modules) assert.ok(fs.existsSync(path.join(root, 'handlers', m.namespace, 'index.ts')), `handlers/${m.namespace}/index.ts`);
  });
});
