/**
 * Helpers the egress tests share (test/platform/egress-*.test.ts): one EgressClient per policy, the
 * assertion that a destination is refused with a given reason, and injected resolvers.
 */
import assert from 'node:assert/strict';
import { EgressClient, type EgressPolicy, EgressRefused, type LookupAll, type PostInit, STRICT_EGRESS_POLICY } from '../../server/egress.ts';

export const strict: EgressPolicy = STRICT_EGRESS_POLICY;

/** One client per policy, as a service owns one for its policy; closed by closeEgressClients. */
const clients = new Map<string, EgressClient>();
export const post = (url: string, init: PostInit, policy: EgressPolicy, lookup?: LookupAll) => {
  const key = JSON.stringify(policy);
  if (!clients.has(key)) clients.set(key, new EgressClient(policy));
  return clients.get(key)!.post(url, init, lookup);
};
/** Closes every client `post` made (a root `after` hook of each file that posts). */
export const closeEgressClients = async (): Promise<void> => {
  const open = [...clients.values()];
  clients.clear();
  await Promise.all(open.map((c) => c.close()));
};

/** Asserts that `fn` throws (or rejects with) an EgressRefused with `reason`; returns it. */
export async function refused(fn: () => unknown, reason: string): Promise<EgressRefused> {
  try {
    await fn();
  } catch (error) {
    assert.ok(error instanceof EgressRefused, `expected EgressRefused(${reason}), got ${String(error)}`);
    assert.equal(error.reason, reason, `reason for: ${error.message}`);
    return error;
  }
  assert.fail(`expected EgressRefused(${reason}), but it was accepted`);
}

/** A resolver that answers from a table and records the names it was asked. */
export function fakeDns(table: Record<string, Array<{ address: string; family: number }>>) {
  const asked: string[] = [];
  const lookup: LookupAll = async (hostname) => {
    asked.push(hostname);
    const answers = table[hostname];
    if (!answers) throw Object.assign(new Error(`queryA ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return answers;
  };
  return { lookup, asked };
}
export const noDns: LookupAll = async (hostname) => assert.fail(`no DNS lookup expected (asked for ${hostname})`);
