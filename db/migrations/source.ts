import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Knex } from 'knex';

const dir = path.dirname(fileURLToPath(import.meta.url));
const MIGRATION_FILE = /^\d{14}_[a-z0-9_]+\.ts$/;

interface Migration {
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

/** Knex migration source reading db/migrations/YYYYMMDDHHMMSS_name.ts in name order. */
export const migrationSource: Knex.MigrationSource<string> = {
  async getMigrations() {
    return fs.readdirSync(dir).filter((f) => MIGRATION_FILE.test(f)).sort();
  },
  getMigrationName(file) {
    return file;
  },
  async getMigration(file): Promise<Migration> {
    return (await import(path.join(dir, file))) as Migration;
  },
};
