/**
 * The per-database runner the service benchmarks share (`bench:automation`, `bench:webhooks`): SQLite
 * in a temporary folder, then PostgreSQL in a schema of its own (reset first; skipped, with the
 * reason, when it cannot be reached), a run's crash kept as a problem rather than ending the others;
 * then the aims (ok / MISS), the problems and one results file per database. Also the distributions
 * and machine CPU readings both report.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { log, percentile, processCpuMs, resetPostgres, root } from './bench-support.ts';
import { reachablePostgres } from './postgres.ts';

export type BenchDatabase = 'sqlite' | 'postgres';

const PG_DEFAULT = 'postgres://wsops:wsops@127.0.0.1:5432/wsops_bench';

export interface Dist {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export function dist(values: number[]): Dist {
  const sorted = Float64Array.from(values).sort();
  return { n: sorted.length, p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: sorted.length ? sorted[sorted.length - 1]! : Number.NaN };
}

/** Busy and total CPU time of the machine so far (ms, all CPUs, /proc/stat), and the CPU time of every PostgreSQL process; null off Linux. */
export function machineCpu(): { busy: number; total: number; postgres: number } | null {
  try {
    const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const total = fields.reduce((a, b) => a + b, 0);
    const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
    let postgres = 0;
    for (const pid of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        if (fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres') postgres += processCpuMs(Number(pid)) ?? 0;
      } catch {
        // gone meanwhile
      }
    }
    const tick = 10; // USER_HZ 100 on Linux: /proc/stat counts in 10 ms ticks
    return { busy: (total - idle) * tick, total: total * tick, postgres };
  } catch {
    return null;
  }
}

/**
 * Runs `bench` on each database of BENCH_DATABASES (default `sqlite,postgres`): SQLite at a fresh file,
 * PostgreSQL (BENCH_POSTGRES_URL, or a local default started when unreachable) in schema `bench_<name>`.
 */
export async function onEachDatabase<R>(name: string, bench: (database: BenchDatabase, url: string) => Promise<R>): Promise<{ results: R[]; problems: string[]; pgSkipped: string | null }> {
  const databases = (process.env.BENCH_DATABASES ?? 'sqlite,postgres').split(',').map((s) => s.trim());
  const results: R[] = [];
  const problems: string[] = [];
  let pgSkipped: string | null = null;
  if (databases.includes('sqlite')) {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `wsops-bench-${name}-`));
    try {
      results.push(await bench('sqlite', `sqlite:${path.join(tmp, `${name}.sqlite`)}`));
    } catch (err) {
      problems.push(`SQLite run failed: ${(err as Error).stack}`);
      log(problems.at(-1)!);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  }
  if (databases.includes('postgres')) {
    const target = await reachablePostgres(process.env.BENCH_POSTGRES_URL || PG_DEFAULT, !process.env.BENCH_POSTGRES_URL, log);
    if ('why' in target) {
      pgSkipped = target.why;
      log(`PostgreSQL part DID NOT RUN: ${pgSkipped}`);
    } else {
      const url = new URL(target.url);
      url.searchParams.set('schema', `bench_${name}`);
      try {
        await resetPostgres(url.toString());
        results.push(await bench('postgres', url.toString()));
      } catch (err) {
        problems.push(`PostgreSQL run failed: ${(err as Error).stack}`);
        log(problems.at(-1)!);
      }
    }
  }
  return { results, problems, pgSkipped };
}

/**
 * Prints the aims and the problems and writes `.bench/<name>-<database>.json` per result (`meta` and
 * the result, with that database's checks and problems); returns the exit code (1 when any problem).
 */
export function report<R extends { database: BenchDatabase }>(name: string, run: { results: R[]; problems: string[]; pgSkipped: string | null }, checks: Array<[string, boolean]>, meta: object): number {
  console.log('\nAims:');
  for (const [text, ok] of checks) console.log(`  ${ok ? 'ok  ' : 'MISS'}  ${text}`);
  if (run.pgSkipped) console.log(`\nPostgreSQL part DID NOT RUN: ${run.pgSkipped}. Set BENCH_POSTGRES_URL to a reachable database.`);
  for (const p of run.problems) console.log(`\nPROBLEM: ${p}`);
  const outDir = path.join(root, '.bench');
  fs.mkdirSync(outDir, { recursive: true });
  const machine = { cpus: os.cpus().length, model: os.cpus()[0]?.model, loadavg: os.loadavg(), node: process.version };
  for (const r of run.results) {
    const file = path.join(outDir, `${name}-${r.database}.json`);
    const own = (text: string) => text.startsWith(r.database);
    const checksOf = checks.filter(([t]) => own(t)).map(([target, ok]) => ({ target, ok }));
    fs.writeFileSync(file, JSON.stringify({ ...meta, finished: new Date().toISOString(), machine, result: r, checks: checksOf, problems: run.problems.filter(own) }, null, 2));
    console.log(`Results: ${path.relative(root, file)}`);
  }
  return run.problems.length ? 1 : 0;
}
