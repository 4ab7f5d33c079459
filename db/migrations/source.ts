import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Knex } from 'knex';

/**
 * A folder of knex migrations named `YYYYMMDDHHMMSS_what_it_does.ts` (with `up` and `down`): the
 * platform's (this folder) or a module's (`ServiceModule.migrations`), as a path or a file URL.
 */
export type MigrationFolder = string | URL;

/** The platform's own migrations: this folder. */
export const PLATFORM_MIGRATIONS: MigrationFolder = path.dirname(fileURLToPath(import.meta.url));

/**
 * A migration file: `.ts` in the sources, `.js` once compiled (`npm run build`). Knex records the name,
 * and the name is always the source's (`….ts`): a database migrated from the sources is not migrated
 * again by the compiled service, nor the other way round.
 */
const MIGRATION_FILE = /^(\d{14}_[a-z0-9_]+)\.(?:ts|js)$/;

interface Migration {
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

/** One migration file: its name (what `knex_migrations` records, so it never changes) and where it is now. */
export interface MigrationFile {
  readonly name: string;
  readonly file: string;
}

function folderPath(folder: MigrationFolder): string {
  return folder instanceof URL ? fileURLToPath(folder) : path.resolve(folder);
}

/**
 * Every migration of these folders in one global order by name, whichever folder holds it: a migration
 * moved from one folder to another keeps its name, so databases that ran it do not run it again. Two
 * files of one name are refused (knex would record them as one).
 */
export function listMigrations(folders: readonly MigrationFolder[]): MigrationFile[] {
  const byName = new Map<string, string>();
  for (const folder of new Set(folders.map(folderPath))) {
    if (!fs.existsSync(folder)) throw new Error(`migrations: folder ${folder} does not exist`);
    for (const entry of fs.readdirSync(folder)) {
      const match = MIGRATION_FILE.exec(entry);
      if (!match) continue;
      const name = `${match[1]}.ts`;
      const file = path.join(folder, entry);
      const other = byName.get(name);
      if (other) throw new Error(`migrations: ${name} is in two folders (${other} and ${file}); a migration's name is recorded in knex_migrations and must be unique`);
      byName.set(name, file);
    }
  }
  return [...byName].map(([name, file]) => ({ name, file })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** Knex migration source over these folders (see `listMigrations`). */
export function migrationSource(folders: readonly MigrationFolder[]): Knex.MigrationSource<MigrationFile> {
  return {
    async getMigrations() {
      return listMigrations(folders);
    },
    getMigrationName(migration) {
      return migration.name;
    },
    async getMigration(migration): Promise<Migration> {
      return (await import(pathToFileURL(migration.file).href)) as Migration;
    },
  };
}
