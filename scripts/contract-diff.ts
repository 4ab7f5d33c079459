/**
 * The contract changelog: compares the bundled document with the last released one
 * (openapi/released/openapi.json), classifies every change from a client's point of view, writes
 * generated/CHANGELOG.md (Unreleased, then the released history of openapi/released/releases.yaml)
 * and refuses a breaking change to an operation whose x-service-contract-version was not raised
 * (seed section 9). Called by `npm run generate` (scripts/generate.ts) and `npm run release`
 * (scripts/release.ts). Pure functions over plain JSON; both documents are dereferenced first
 * (scripts/dereference.ts). The parts: scripts/contract/changes.ts (what a change is),
 * operations.ts and schemas.ts (the comparison), changelog.ts (the Markdown).
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import type { ContractChange, JsonObject, Release } from './contract/changes.ts';
import { isObject } from './contract/changes.ts';
import { renderChangelog } from './contract/changelog.ts';
import { dereferencedOf, OperationDiffer, versionOf } from './contract/operations.ts';

export type { ChangeKind, ContractChange, JsonObject, Release, Severity } from './contract/changes.ts';
export { renderChangelog } from './contract/changelog.ts';

export const RELEASED_DIR = 'openapi/released';
export const SNAPSHOT_FILE = `${RELEASED_DIR}/openapi.json`;
export const RELEASES_FILE = `${RELEASED_DIR}/releases.yaml`;
export const CHANGELOG_FILE = 'generated/CHANGELOG.md';

/** Every change from `released` to `current`, ordered by operation (then as found), each classified. */
export function diffContracts(released: JsonObject, current: JsonObject): ContractChange[] {
  const differ = new OperationDiffer(dereferencedOf(released), dereferencedOf(current));
  differ.operations();
  // Stable sort by operation: within one operation, changes stay in document order.
  return differ.changes.map((c, i) => ({ c, i })).sort((x, y) => (x.c.operation < y.c.operation ? -1 : x.c.operation > y.c.operation ? 1 : x.i - y.i)).map((x) => x.c);
}

/**
 * The breaking changes the released contract forbids: each breaking change of an operation whose
 * x-service-contract-version is not higher than in the released document. A removed operation or a
 * lowered version is always refused. Each message names the operation and the change.
 */
export function contractRefusals(released: JsonObject, current: JsonObject, changes = diffContracts(released, current)): string[] {
  const out: string[] = [];
  for (const c of changes) {
    if (c.severity !== 'breaking') continue;
    const before = versionOf(released, c.operation);
    const after = versionOf(current, c.operation);
    const raised = before !== undefined && after !== undefined && after > before;
    if (raised && c.kind !== 'operation-removed') continue;
    const version = before === undefined ? '' : ` of contract version ${before}`;
    out.push(`${c.operation}: ${c.text} — a breaking change${version}` + (c.kind === 'operation-removed' ? ' (a released operation is not removed; deprecate it instead)' : c.kind === 'contract-version-lowered' ? '' : '; make it additive or raise x-service-contract-version'));
  }
  return out;
}

/** Throws, naming every refused change, when `current` breaks the released contract (what `npm run generate` checks). */
export function checkAgainstRelease(released: JsonObject, current: JsonObject): ContractChange[] {
  const changes = diffContracts(released, current);
  const refusals = contractRefusals(released, current, changes);
  if (refusals.length) {
    throw new Error(
      `openapi/ breaks the released contract (${SNAPSHOT_FILE}; versioning, seed section 9):\n- ${refusals.join('\n- ')}\n` +
        'A client written against the released contract would fail. Make the change additive (a new optional field, a new operation), ' +
        'or raise the operation\'s x-service-contract-version.',
    );
  }
  return changes;
}

export function readReleased(root: string): { snapshot: JsonObject | undefined; releases: Release[] } {
  const snapshotPath = path.join(root, SNAPSHOT_FILE);
  const releasesPath = path.join(root, RELEASES_FILE);
  const snapshot = fs.existsSync(snapshotPath) ? (JSON.parse(fs.readFileSync(snapshotPath, 'utf8')) as JsonObject) : undefined;
  const parsed: unknown = fs.existsSync(releasesPath) ? YAML.parse(fs.readFileSync(releasesPath, 'utf8')) : undefined;
  const releases = isObject(parsed) && Array.isArray(parsed.releases) ? (parsed.releases as unknown as Release[]) : [];
  return { snapshot, releases };
}

export function releasesYaml(releases: Release[]): string {
  return (
    '# Released contracts, newest first, each with the changes it brought (the first lists every operation).\n' +
    '# Written by npm run release (scripts/release.ts) together with openapi.json, the bundled document of the\n' +
    '# newest release. Do not edit by hand.\n' +
    YAML.stringify({ releases }, { lineWidth: 0 })
  );
}

/**
 * The step of `npm run generate`: refuses (exit status 1, naming each operation and change) a breaking
 * change to a released contract version, otherwise writes generated/CHANGELOG.md.
 */
export function writeChangelog(current: JsonObject, root: string): void {
  const { snapshot, releases } = readReleased(root);
  let changes: ContractChange[];
  try {
    changes = snapshot ? checkAgainstRelease(snapshot, current) : diffContracts({}, current);
  } catch (error) {
    console.error((error as Error).message);
    process.exit(1);
  }
  fs.mkdirSync(path.join(root, 'generated'), { recursive: true });
  fs.writeFileSync(path.join(root, CHANGELOG_FILE), renderChangelog(changes, releases, snapshot, current));
  const breaking = changes.filter((c) => c.severity === 'breaking').length;
  console.log(`${CHANGELOG_FILE}: ${changes.length} unreleased change${changes.length === 1 ? '' : 's'}${breaking ? ` (${breaking} breaking, on raised contract versions)` : ''} since ${releases[0]?.name ?? 'the start'}`);
}
