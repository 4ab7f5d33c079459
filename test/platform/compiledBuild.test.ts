/**
 * Issue 22: the compiled build. `npm run build` (scripts/build.ts, here into a folder of this test)
 * compiles the service to JavaScript with the files it reads beside it and the browser bundles made
 * at build time; the compiled service starts with plain node, never loading tsx or esbuild, on a
 * database the TypeScript sources migrated, and runs none of its migrations again (knex records the
 * sources' `.ts` names). Its worker threads load the compiled files.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { migrations } from '../../app.ts';
import { openDatabase } from '../../db/database.ts';
import { listMigrations, PLATFORM_MIGRATIONS } from '../../db/migrations/source.ts';
import { freePort } from '../../scripts/ports.ts';
import { type CompiledBuild, compiledBuild, withoutTsxOrEsbuild } from '../support/build.ts';
import { databases } from '../support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const FOLDERS = ['db', 'server', 'handlers', 'generated', 'docs'];

/** Every file under `dir`, relative to it. */
const filesUnder = (dir: string) => (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => fs.statSync(path.join(dir, f)).isFile());

/** The compiled copy of a source folder (a migrations folder given as a path or URL). */
const compiledFolder = (b: CompiledBuild, folder: string | URL) => path.join(b.dist, path.relative(root, folder instanceof URL ? fileURLToPath(folder) : folder));

type MigrationRow = { id: number; name: string; batch: number; migration_time: unknown };
async function migrationRows(url: string): Promise<MigrationRow[]> {
  const db = openDatabase(url);
  try {
    return await db.sql.all<MigrationRow>('SELECT id, name, batch, migration_time FROM knex_migrations ORDER BY id');
  } finally {
    await db.close();
  }
}

/** Migrates a new database with the TypeScript sources (as `npm run dev` or the previous release did). */
async function migratedBySources(url: string): Promise<void> {
  const db = openDatabase(url);
  try {
    await db.migrate(migrations);
  } finally {
    await db.close();
  }
}

async function dropSchema(url: string): Promise<void> {
  const schema = new URL(url).searchParams.get('schema');
  if (!url.startsWith('postgres') || !schema) return;
  const db = openDatabase(url);
  await db.knex.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await db.close();
}

describe('the compiled build (npm run build)', function () {
  // The build runs tsc over the whole service: on a busy 2-core machine, up to a couple of minutes.
  this.timeout(240_000);
  let build: CompiledBuild;

  before(async () => {
    build = await compiledBuild();
  });

  it('holds JavaScript only, every file the code reads beside it, the prebuilt browser bundles, and the migrations under their recorded names', () => {
    const compiled = filesUnder(build.dist);
    assert.deepEqual(compiled.filter((f) => /\.[cm]?ts$/.test(f)), [], 'no TypeScript in dist/');
    for (const entry of ['scripts/start.js', 'scripts/worker.js', 'scripts/admin.js', 'app.js', 'handlers/analytics/ingestWorker.js', 'handlers/documents/pdfGuardWorker.js']) {
      assert.ok(compiled.includes(entry), `dist/${entry}`);
    }
    // Templates, CSS, fonts, guides, the workers' .mjs entries, .cjs modules, generated/'s JSON and YAML.
    for (const folder of FOLDERS) {
      for (const f of filesUnder(path.join(root, folder))) {
        const rel = path.join(folder, f);
        if (/\.[cm]?ts$/.test(f) || rel.startsWith('handlers/analytics/dashboard-app/')) continue;
        assert.ok(fs.readFileSync(path.join(build.dist, rel)).equals(fs.readFileSync(path.join(root, rel))), `dist/${rel} is a copy of ${rel}`);
      }
    }
    for (const bundle of ['handlers/analytics/dashboard-app.bundle/app.js', 'handlers/analytics/dashboard-app.bundle/app.css', 'handlers/signing/signer/pages/viewer.bundle/viewer.js']) {
      assert.ok(fs.statSync(path.join(build.dist, bundle)).size > 1000, `dist/${bundle}`);
    }
    // The compiled migrations (.js) are the sources' (.ts), by the names knex has recorded.
    const folders = [PLATFORM_MIGRATIONS, ...migrations];
    const fromSources = listMigrations(folders);
    const fromBuild = listMigrations(folders.map((f) => compiledFolder(build, f)));
    assert.ok(fromBuild.length > 10 && fromBuild.every((m) => m.file.endsWith('.js') && m.name.endsWith('.ts')));
    assert.deepEqual(fromBuild.map((m) => m.name), fromSources.map((m) => m.name));
  });

  for (const database of databases) {
    it(`starts with plain node (no tsx, no esbuild) on a ${database.name} database the sources migrated, serves its pages, assets and prebuilt bundles, migrates nothing again, and stops on SIGTERM [${database.name}]`, async () => {
      const url = database.url();
      try {
        await migratedBySources(url);
        const before = await migrationRows(url);
        assert.ok(before.length > 10);

        const port = await freePort();
        let output = '';
        const child = spawn(process.execPath, ['--import', withoutTsxOrEsbuild(build), 'dist/scripts/start.js'], {
          cwd: build.home,
          env: { ...process.env, DATABASE_URL: url, PORT: String(port), JOBS: 'off', LOG_LEVEL: 'info' },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        child.stdout.on('data', (d) => (output += d));
        child.stderr.on('data', (d) => (output += d));
        const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
        try {
          const base = `http://127.0.0.1:${port}`;
          for (let i = 0; ; i++) {
            const ok = await fetch(`${base}/healthz`).then((r) => r.ok, () => false);
            if (ok) break;
            if (child.exitCode !== null || i > 600) assert.fail(`the compiled service did not answer /healthz:\n${output.slice(-3000)}`);
            await new Promise((r) => setTimeout(r, 100));
          }
          assert.deepEqual(await (await fetch(`${base}/healthz`)).json(), { status: 'ok' });

          const signin = await fetch(`${base}/signin`);
          assert.equal(signin.status, 200);
          assert.match(await signin.text(), /<form[^>]+method="post"/i, 'the sign-in page, from its templates');
          const css = await fetch(`${base}/assets/page.css`);
          assert.equal(css.status, 200);
          assert.ok((await css.text()).includes(fs.readFileSync(path.join(root, 'server/pages/page.css'), 'utf8').slice(0, 200)), 'the stylesheet, from the copied CSS');

          // The browser bundles are the files the build made, served as they are.
          const served: Array<[string, string]> = [
            ['/dashboard/assets/app.js', 'handlers/analytics/dashboard-app.bundle/app.js'],
            ['/dashboard/assets/app.css', 'handlers/analytics/dashboard-app.bundle/app.css'],
            ['/assets/signing/viewer.js', 'handlers/signing/signer/pages/viewer.bundle/viewer.js'],
          ];
          for (const [route, file] of served) {
            const res = await fetch(`${base}${route}`);
            assert.equal(res.status, 200, route);
            assert.ok(Buffer.from(await res.arrayBuffer()).equals(fs.readFileSync(path.join(build.dist, file))), `${route} is dist/${file}`);
          }
          const reference = await fetch(`${base}/v1/openapi.yaml`);
          assert.equal(reference.status, 200, 'the document, from generated/openapi.yaml');
        } finally {
          child.kill('SIGTERM');
        }
        assert.equal(await exited, 0, output.slice(-3000));
        assert.match(output, /"msg":"stopped"/);
        assert.doesNotMatch(output, /"level":50|loaded (tsx|esbuild)/, output.slice(-3000));
        assert.deepEqual(await migrationRows(url), before, 'knex_migrations is unchanged: no migration ran again');
      } finally {
        await dropSchema(url);
      }
    });
  }

  it('runs the PDF checking thread and the collection writer thread from the compiled files, without tsx', async () => {
    const url = databases[0]!.url();
    await migratedBySources(url);
    try {
      const script = `
        import { PDFDocument } from 'pdf-lib';
        const { PdfGuard } = await import('./dist/handlers/documents/pdfGuard.js');
        const { threadWriter } = await import('./dist/handlers/analytics/collectQueue.js');
        const doc = await PDFDocument.create();
        doc.addPage([595, 842]);
        const guard = new PdfGuard();
        const inspected = await guard.inspect(await doc.save(), 'upload', 10);
        await guard.close();
        const writer = threadWriter(process.env.DATABASE_URL, { error: (o, m) => console.error(m, o) });
        await writer.write([]);
        await writer.close();
        console.log(JSON.stringify(inspected));
      `;
      // A file, not -e: the threads inherit the process's options, and --input-type would stop them.
      const file = path.join(build.home, 'threads.mjs');
      fs.writeFileSync(file, script);
      const { stdout } = await promisify(execFile)(process.execPath, ['--import', withoutTsxOrEsbuild(build), file], {
        cwd: build.home,
        env: { ...process.env, DATABASE_URL: url },
      });
      const inspected = JSON.parse(stdout) as { ok: boolean; pages?: number };
      assert.equal(inspected.ok, true, stdout);
    } finally {
      await dropSchema(url);
    }
  });
});
