/** Waiting on real time, and test fixture processes killed at a chosen moment (crash tests). */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Waits (real time, in short steps) until `check` holds; for what another process or a timer does. */
export async function until(check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * Runs a fixture script (`node --import tsx <file> ...args`, from the repository root), waits until it
 * prints `marker` on stdout, kills it with SIGKILL and checks that this is how it ended. Answers what
 * it printed.
 */
export async function killFixtureWhen(file: string, args: readonly string[], marker: string, timeoutMs: number): Promise<{ out: string; err: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, file), ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
  try {
    await until(() => out.includes(marker) || child.exitCode !== null, timeoutMs);
    assert.ok(out.includes(marker), `the fixture ${file} did not print "${marker}": ${err.slice(-2000)}`);
    child.kill('SIGKILL');
    assert.equal(await exited, 'SIGKILL');
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  return { out, err };
}
