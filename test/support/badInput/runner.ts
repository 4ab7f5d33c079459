import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { TestService } from '../service.ts';
import type { HttpCase } from './cases.ts';
import type { Fixture } from './fixture.ts';
import { assertErrorBody, send } from './http.ts';
import { stateDiff, storedState } from './stored.ts';

/** Runs `tasks` with at most `limit` at a time. */
export async function pool<T>(items: readonly T[], limit: number, task: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await task(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/**
 * Runs the cases (a few at a time) and checks each answer, then checks that nothing was stored; when
 * something was, runs them again one by one to name the culprits. Returns every problem found.
 */
export async function runCases(svc: TestService, fx: Fixture, cases: readonly HttpCase[], concurrency = 6): Promise<string[]> {
  const problems: string[] = [];
  const secrets = [fx.key, fx.revoked, fx.bare];
  const check = async (c: HttpCase) => {
    const res = await send(svc.baseUrl, c.method, c.path, c.headers, c.body);
    try {
      assertErrorBody(res, c.status, c.error, c.what, secrets);
    } catch (err) {
      problems.push((err as Error).message);
    }
  };
  const before = await storedState(svc);
  await pool(cases, concurrency, check);
  const diff = stateDiff(before, await storedState(svc));
  if (diff) {
    problems.push(`stored changes after the cases: ${diff}`);
    for (const c of cases) {
      const b = await storedState(svc);
      await send(svc.baseUrl, c.method, c.path, { ...c.headers, ...(c.headers['Idempotency-Key'] ? { 'Idempotency-Key': `rerun-${crypto.randomUUID()}` } : {}) }, c.body);
      const d = stateDiff(b, await storedState(svc));
      if (d) problems.push(`${c.what}: stored ${d}`);
    }
  }
  return problems;
}

/** Fails with the first problems and their count. */
export function assertNoProblems(problems: readonly string[], total: number): void {
  if (problems.length) assert.fail(`${problems.length} problem(s) in ${total} cases:\n${problems.slice(0, 15).join('\n')}${problems.length > 15 ? '\n...' : ''}`);
}
