/**
 * The applicable server scenarios of the official conformance suite (`@modelcontextprotocol/conformance`
 * 0.1.16, a devDependency): server-initialize, ping, tools-list and dns-rebinding-protection, run by its
 * CLI against the real service on each database. The others do not apply to this server (resources,
 * prompts, logging, completion, elicitation, sampling, SSE streams, and the tools-call-* scenarios,
 * which call fixed test tools such as `test_simple_text`); 0.1.16 has no 2026-07-28 server scenario,
 * so the modern revision is covered by test/mcp/e2e.browser.test.ts with the SDK's client.
 *
 * The CLI needs Node 22 (it imports `fs.globSync`); this machine and the service may run Node 20. It is
 * found in this order: this process when it is Node >= 22; CONFORMANCE_NODE (a node binary; .ci/run
 * sets it); `npm exec --yes --package=node@22.23.3 -- node` (npm's cache; downloads the node package,
 * about 125 MB, the first time). Without one the suite is SKIPPED, loudly, unless REQUIRE_CONFORMANCE=1
 * (CI), which fails it.
 *
 * The scenarios connect with a bare URL (no Authorization option), so they go through
 * test/support/tokenProxy.ts: a loopback proxy on `localhost` that adds the bearer token of a real
 * connection (a workspace connection with every customers operation) and keeps Host and Origin as the
 * scenario sent them (its own port rewritten to the service's). PUBLIC_URL is http://localhost:<port>,
 * so `localhost:<port>` is the service's own host, and the DNS-rebinding scenario's `evil.example.com`
 * must be refused (4xx) before authentication.
 * Results (the suite's checks.json per scenario): test-output/conformance/<database>/.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { mintConnectionToken } from './e2e.tokens.ts';
import { acme } from '../support/fixtures.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { freePort } from '../support/smtp.ts';
import { startTokenProxy, type TokenProxy } from '../support/tokenProxy.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(root, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
export const NODE22_PACKAGE = 'node@22.23.3';
const SCENARIOS = ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'] as const;
const required = process.env.REQUIRE_CONFORMANCE === '1';
/** The connection's operations, and the tools tools-list must show. */
const OPERATIONS = ['customers.CreateCompany', 'customers.GetCompany', 'customers.ListCompanies'];
const TOOLS = OPERATIONS.map((id) => id.replace('.', '_')).sort();

/** A Node >= 22 binary for the CLI, or why there is none. */
function findNode22(): { node: string } | { why: string } {
  const major = (v: string) => Number(/^v?(\d+)/.exec(v.trim())?.[1] ?? 0);
  if (major(process.versions.node) >= 22) return { node: process.execPath };
  const fromEnv = process.env.CONFORMANCE_NODE;
  if (fromEnv) {
    const probe = spawnSync(fromEnv, ['--version'], { encoding: 'utf8' });
    if (probe.status === 0 && major(probe.stdout) >= 22) return { node: fromEnv };
    return { why: `CONFORMANCE_NODE=${fromEnv} is not a Node >= 22 binary (${probe.error?.message ?? probe.stdout.trim()})` };
  }
  const viaNpm = spawnSync('npm', ['exec', '--yes', `--package=${NODE22_PACKAGE}`, '--', 'node', '-e', 'console.log(process.execPath)'], { encoding: 'utf8', timeout: 240_000, cwd: root });
  const found = viaNpm.stdout?.trim().split('\n').at(-1) ?? '';
  if (viaNpm.status === 0 && found && fs.existsSync(found)) return { node: found };
  return { why: `no Node >= 22: this is ${process.version}, CONFORMANCE_NODE is unset, and npm exec --package=${NODE22_PACKAGE} failed (${(viaNpm.error?.message ?? viaNpm.stderr ?? '').trim().split('\n').slice(-2).join(' ')})` };
}

let node22: { node: string } | { why: string } | undefined;
const node = (): { node: string } | { why: string } => (node22 ??= findNode22());

/** Runs one scenario; answers the exit code and what the CLI printed. */
function runScenario(nodeBin: string, url: string, scenario: string, outDir: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(nodeBin, [CLI, 'server', '--url', url, '--scenario', scenario, '-o', outDir], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

for (const database of databases) {
  describe(`MCP conformance suite 0.1.16, server scenarios [${database.name}]`, function () {
    this.timeout(120_000);
    let svc: TestService | undefined;
    let proxy: TokenProxy | undefined;
    let bin: string;
    const outDir = path.join(root, 'test-output', 'conformance', database.name);

    before(async function () {
      this.timeout(300_000);
      const found = node();
      if ('why' in found) {
        const text = `the MCP conformance scenarios need Node 22: ${found.why}`;
        if (required) throw new Error(`REQUIRE_CONFORMANCE=1 but ${text}`);
        console.warn(`\n!!! ${text}. The conformance suite is SKIPPED (set CONFORMANCE_NODE or REQUIRE_CONFORMANCE=1). !!!\n`);
        this.skip();
      }
      bin = found.node;
      fs.rmSync(outDir, { recursive: true, force: true });
      fs.mkdirSync(outDir, { recursive: true });
      const port = await freePort();
      svc = await startTestService(database.url(), { port, publicUrl: `http://localhost:${port}` });
      const ws = await svc.apply(acme());
      const token = await mintConnectionToken(svc, ws, { access: 'workspace', operations: OPERATIONS, resources: { 'core:Company': ['read', 'write'] } });
      proxy = await startTokenProxy({ port }, () => token);
    });
    after(async () => {
      await proxy?.close();
      await svc?.close();
    });

    for (const scenario of SCENARIOS) {
      it(`${scenario} passes`, async () => {
        const { code, out } = await runScenario(bin, `${proxy!.origin}/v1/mcp`, scenario, outDir);
        assert.equal(code, 0, `conformance ${scenario} failed (exit ${code}):\n${out.slice(-4000)}`);
        assert.doesNotMatch(out, /FAILURE/);
        // The suite's own record of the checks: at least one, every one a success.
        const dirs = fs.readdirSync(outDir).filter((d) => d.startsWith(`server-${scenario}-`)).sort();
        assert.ok(dirs.length, `no results of ${scenario} in ${outDir}`);
        const checks = JSON.parse(fs.readFileSync(path.join(outDir, dirs.at(-1)!, 'checks.json'), 'utf8')) as Array<{ id: string; status: string }>;
        assert.ok(checks.length >= 1);
        assert.deepEqual(checks.filter((c) => c.status !== 'SUCCESS'), []);
        if (scenario === 'tools-list') {
          // The connection's three tools were listed (not an empty list, which would pass too).
          const details = (checks[0] as unknown as { details: { tools: Array<string | { name: string }> } }).details;
          assert.deepEqual(details.tools.map((t) => (typeof t === 'string' ? t : t.name)).sort(), TOOLS);
        }
      });
    }

    it('every scenario reached the service through the proxy with the token (no request answered by anything else)', () => {
      assert.ok(proxy!.seen.length >= SCENARIOS.length, `the proxy forwarded ${proxy!.seen.length} requests`);
      assert.ok(proxy!.seen.every((r) => /^(POST|GET|DELETE) \/v1\/mcp/.test(r)), proxy!.seen.join(', '));
    });
  });
}
