/**
 * `npm run build`: the service compiled to JavaScript in dist/, which `npm start`, `npm run worker`,
 * `npm run admin` and the image run with plain node (no tsx, no esbuild at run time):
 *   1. tsc with tsconfig.build.json (ESM, `./x.ts` imports rewritten to `./x.js`);
 *   2. every other file of the service's folders beside the compiled files (templates, CSS, fonts,
 *      guides, the workers' `.mjs` entries, `.cjs` modules, generated/'s JSON and YAML), since the
 *      code reads them by `new URL('./...', import.meta.url)`;
 *   3. each module's browser bundles (server/bundle.ts) into its compiled folder, read from the
 *      compiled app (which loads it once: a file left out fails the build, not the start).
 * The build is made in a new folder and then takes the place of the previous one.
 *
 *   --out DIR    another folder than dist/ (inside this repository, so node_modules is found)
 *   --if-stale   nothing to do when the last build is newer than every source file
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import esbuild from 'esbuild';
import type { AnyServiceModule } from '../server/module.ts';
import { bundleOptions } from '../server/bundle.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** What tsconfig.build.json compiles, and the folders whose other files are copied beside (docs/: the guides /docs/guides serves). */
const FOLDERS = ['db', 'server', 'handlers', 'generated', 'docs'];
/** Browser code: bundled, not compiled or copied. */
const BROWSER_ONLY = ['handlers/analytics/dashboard-app'];
const CONFIG = ['app.ts', 'tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json', 'scripts/build.ts', 'scripts/start.ts', 'scripts/worker.ts', 'scripts/admin.ts', 'scripts/adminTable.ts'];
const STAMP = '.build.json';

function usage(message: string): never {
  process.stderr.write(`build: ${message}\nusage: npm run build [-- --out DIR] [--if-stale]\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
let out = path.join(root, 'dist');
let ifStale = false;
for (let i = 0; i < args.length; i++) {
  const a = args[i]!;
  if (a === '--if-stale') ifStale = true;
  else if (a === '--out') out = path.resolve(args[++i] ?? usage('--out needs a folder'));
  else usage(`unknown argument ${a}`);
}

/** The newest modification time of the sources (files and folders: a removed file changes its folder's). */
function newestSource(): number {
  let newest = 0;
  const visit = (p: string) => {
    const st = fs.statSync(p);
    newest = Math.max(newest, st.mtimeMs);
    if (st.isDirectory()) for (const name of fs.readdirSync(p)) visit(path.join(p, name));
  };
  for (const p of [...FOLDERS, ...CONFIG]) visit(path.join(root, p));
  return newest;
}

if (ifStale) {
  const stamp = path.join(out, STAMP);
  if (fs.existsSync(stamp) && fs.statSync(stamp).mtimeMs >= newestSource()) process.exit(0);
  process.stderr.write(`build: ${path.relative(root, out) || out} is ${fs.existsSync(stamp) ? 'older than the sources' : 'not built yet'}; compiling (npm run build)\n`);
}

const started = Date.now();
fs.mkdirSync(out, { recursive: true });
const next = fs.mkdtempSync(path.join(out, '.next-'));
try {
  // 1. Compile.
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const compiled = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', next], { cwd: root, stdio: 'inherit' });
  if (compiled.status !== 0) throw new Error(`tsc failed (exit ${compiled.status ?? compiled.signal}); nothing was changed in ${out}`);

  // 2. Copy the files the code reads beside it.
  const copy = (rel: string) => {
    if (BROWSER_ONLY.includes(rel)) return;
    const from = path.join(root, rel);
    if (fs.statSync(from).isDirectory()) {
      for (const name of fs.readdirSync(from)) copy(path.join(rel, name));
    } else if (!/\.[cm]?ts$/.test(rel)) {
      fs.mkdirSync(path.dirname(path.join(next, rel)), { recursive: true });
      fs.copyFileSync(from, path.join(next, rel));
    }
  };
  for (const folder of FOLDERS) copy(folder);

  // 3. The modules' browser bundles, from their sources into the compiled module's folder.
  const { modules } = (await import(pathToFileURL(path.join(next, 'app.js')).href)) as { modules: readonly AnyServiceModule[] };
  const source = (url: URL) => path.join(root, path.relative(next, fileURLToPath(url)));
  for (const bundle of modules.flatMap((m) => m.browserBundles ?? [])) {
    await esbuild.build({ ...bundleOptions({ ...bundle, entry: pathToFileURL(source(bundle.entry)) }, fileURLToPath(bundle.out)), write: true });
  }

  // Take the place of the previous build (its own entries only: dist/ also receives `npm run pack:client`'s archive).
  const entries = fs.readdirSync(next);
  const stamp = path.join(out, STAMP);
  const previous: string[] = fs.existsSync(stamp) ? (JSON.parse(fs.readFileSync(stamp, 'utf8')) as { entries: string[] }).entries : [];
  fs.rmSync(stamp, { force: true });
  for (const name of new Set([...previous, ...entries])) fs.rmSync(path.join(out, name), { recursive: true, force: true });
  for (const name of entries) fs.renameSync(path.join(next, name), path.join(out, name));
  fs.writeFileSync(stamp, `${JSON.stringify({ entries, built: new Date().toISOString() }, null, 2)}\n`);
  process.stderr.write(`build: compiled into ${path.relative(root, out) || out} in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
} catch (err) {
  process.stderr.write(`build: ${(err as Error).message}\n`);
  process.exitCode = 1;
} finally {
  fs.rmSync(next, { recursive: true, force: true });
}
// The compiled app was loaded (step 3): nothing of it should keep this process.
process.exit();
