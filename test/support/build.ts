/**
 * The compiled service (`npm run build`), built once per test process into a folder of its own
 * under test-output/ (inside the repository, so the compiled files find node_modules), removed when
 * the process exits. Tests start it with plain node, as the image does.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface CompiledBuild {
  /** A folder holding `dist/` (run the commands `node dist/...` with this as the working directory). */
  home: string;
  /** The compiled service. */
  dist: string;
}

let build: Promise<CompiledBuild> | undefined;

/** Builds the service with scripts/build.ts (about 20 s of CPU), once per process. */
export function compiledBuild(): Promise<CompiledBuild> {
  build ??= (async () => {
    fs.mkdirSync(path.join(root, 'test-output'), { recursive: true });
    const home = fs.mkdtempSync(path.join(root, 'test-output', `build-${process.pid}-`));
    process.once('exit', () => fs.rmSync(home, { recursive: true, force: true }));
    const dist = path.join(home, 'dist');
    await promisify(execFile)(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/build.ts'), '--out', dist], { cwd: root, maxBuffer: 16 * 1024 * 1024 }).catch((err: Error & { stdout?: string; stderr?: string }) => {
      throw new Error(`npm run build failed: ${err.message}\n${err.stdout ?? ''}${err.stderr ?? ''}`);
    });
    return { home, dist };
  })();
  return build;
}

/**
 * A module hook for `node --import`: a compiled process that resolves tsx or esbuild fails (the
 * runtime image has neither). Its path, written once into the build's folder.
 */
export function withoutTsxOrEsbuild(b: CompiledBuild): string {
  const hooks = path.join(b.home, 'no-tsx-hooks.mjs');
  const register = path.join(b.home, 'no-tsx.mjs');
  if (!fs.existsSync(register)) {
    fs.writeFileSync(
      hooks,
      `export async function resolve(specifier, context, next) {\n  if (/^(tsx|esbuild)(\\/|$)/.test(specifier)) throw new Error('the compiled service loaded ' + specifier);\n  return next(specifier, context);\n}\n`,
    );
    fs.writeFileSync(register, `import { register } from 'node:module';\nregister('./no-tsx-hooks.mjs', import.meta.url);\n`);
  }
  return register;
}
