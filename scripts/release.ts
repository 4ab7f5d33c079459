/**
 * `npm run release -- [name]`: records the current contract as released. Bundles openapi/ (as
 * `npm run generate` does), refuses when it breaks the last released contract (scripts/contract-diff.ts)
 * or when nothing changed, then writes the bundled document to openapi/released/openapi.json, adds a
 * release (name, default today's UTC date, with the Unreleased changes) to openapi/released/releases.yaml
 * and rewrites generated/CHANGELOG.md. Commit the three files.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundle, createConfig } from '@redocly/openapi-core';
import {
  CHANGELOG_FILE, RELEASED_DIR, RELEASES_FILE, SNAPSHOT_FILE, checkAgainstRelease, diffContracts, readReleased, releasesYaml, renderChangelog,
  type JsonObject, type Release,
} from './contract-diff.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function refuse(message: string): never {
  console.error(`release: ${message}`);
  process.exit(1);
}

const today = new Date().toISOString().slice(0, 10);
const args = process.argv.slice(2).filter((a) => a !== '--');
if (args.length > 1 || args.some((a) => a.startsWith('-'))) refuse('usage: npm run release -- [name]   (name defaults to today\'s UTC date, e.g. 2026-11-24)');
const name = args[0] ?? today;
if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) refuse(`"${name}" is not a release name (letters, digits, ".", "_", "-"; e.g. ${today})`);

const config = await createConfig({});
const { bundle: result, problems } = await bundle({ ref: path.join(root, 'openapi/openapi.yaml'), config });
const errors = problems.filter((p) => p.severity === 'error');
if (errors.length) refuse(`openapi/ does not bundle:\n- ${errors.map((p) => p.message).join('\n- ')}`);
const current = result.parsed as JsonObject;

const { snapshot, releases } = readReleased(root);
if (releases.some((r) => r.name === name)) refuse(`a release named ${name} exists already (${RELEASES_FILE})`);
let changes;
try {
  changes = snapshot ? checkAgainstRelease(snapshot, current) : diffContracts({}, current);
} catch (error) {
  refuse((error as Error).message);
}
if (!changes.length) refuse(`nothing changed since ${releases[0]?.name ?? 'the last release'}`);

const release: Release = { name, date: today, changes };
const history = [release, ...releases];
fs.mkdirSync(path.join(root, RELEASED_DIR), { recursive: true });
fs.writeFileSync(path.join(root, SNAPSHOT_FILE), `${JSON.stringify(current, null, 2)}\n`);
fs.writeFileSync(path.join(root, RELEASES_FILE), releasesYaml(history));
fs.mkdirSync(path.join(root, 'generated'), { recursive: true });
fs.writeFileSync(path.join(root, CHANGELOG_FILE), renderChangelog([], history, current, current));
console.log(`release ${name}: ${changes.length} change${changes.length === 1 ? '' : 's'} recorded; ${SNAPSHOT_FILE}, ${RELEASES_FILE} and ${CHANGELOG_FILE} written (commit them)`);
