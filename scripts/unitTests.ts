/**
 * The inner loop's selection (`npm run test:unit`, `scripts/test.ts --unit`): every `test/**\/*.test.ts`
 * on SQLite, except the browser suites (`*.browser.test.ts`) and the files below, each left out for what
 * it does: launches Chromium, spawns a process (the admin CLI through test/support/cli.ts, `tsx`, a
 * compiled build, clamd, openssl, a packed client) or was measured slow. `npm test` still runs all of
 * them on both databases. A new file is in the unit set until it is listed here: list it when it spawns
 * or launches anything, or when `TEST_TIMINGS=/tmp/t.json npm run test:unit` shows it takes seconds.
 */
export const NOT_UNIT: Record<string, string> = {
  // Chromium, in files not named *.browser.test.ts
  'test/platform/pageSessions.test.ts': 'Chromium',
  'test/signing/bankid-credit.test.ts': 'Chromium; the admin CLI',
  'test/signing/bankid-provider.test.ts': 'Chromium; pdfsig and qpdf',
  'test/signing/verify.test.ts': 'Chromium; openssl',
  // The admin CLI (test/support/cli.ts) or another tsx process
  'test/analytics/analytics.test.ts': 'the admin CLI',
  'test/analytics/analyticsBulk.test.ts': 'the admin CLI',
  'test/automation/admin.test.ts': 'the admin CLI',
  'test/platform/admin.test.ts': 'the admin CLI',
  'test/platform/adminCli.test.ts': 'the admin CLI',
  'test/platform/audit.test.ts': 'the admin CLI',
  'test/platform/blackbox21-quotas.test.ts': 'the admin CLI',
  'test/platform/demo.test.ts': 'scripts/demo.ts as a process',
  'test/platform/keys.test.ts': 'the admin CLI',
  'test/platform/mailer.test.ts': 'the admin CLI',
  'test/platform/outbox.test.ts': 'the admin CLI',
  'test/platform/server.test.ts': 'the service as a process (npm start)',
  'test/platform/sessions.test.ts': 'the admin CLI',
  'test/platform/signin.test.ts': 'the admin CLI',
  'test/platform/storage.test.ts': 'a process that dies mid-write',
  'test/webhooks/resilience.test.ts': 'the worker as a process',
  'test/webhooks/signing-contract.test.ts': 'the admin CLI',
  // Builds, packages, daemons and tools
  'test/client/package.test.ts': 'npm pack and a compile of the client',
  'test/mcp/conformance.test.ts': 'the MCP conformance runner',
  'test/platform/compiledBuild.test.ts': 'npm run build and the compiled service',
  'test/platform/docsBlocks.test.ts': 'npm start and the shell blocks of README.md and docs/ (the admin CLI, curl)',
  'test/platform/deploy.test.ts': 'the service and worker as processes',
  'test/platform/background.test.ts': 'a process that dies mid-job',
  'test/documents/scan.test.ts': 'clamd',
  'test/documents/uploads.test.ts': 'clamd',
  'test/signing/archive.test.ts': 'openssl (a timestamp authority), pdfsig, qpdf',
  'test/signing/seal.test.ts': 'openssl (a timestamp authority), pdfsig',
  // Measured slow (TEST_TIMINGS, full SQLite run on a loaded 2-core machine)
  'test/platform/badInput.test.ts': 'slow: 419 bad inputs over every operation (39 s)',
  'test/platform/fuzz.test.ts': 'slow: a fuzz run over every operation (15 s)',
  'test/webhooks/isolation.test.ts': 'slow: waits out a receiver that never answers (10 s)',
};

/** `file` is relative to the repository, with forward slashes (test/platform/keys.test.ts). */
export function isUnitTest(file: string): boolean {
  return file.endsWith('.test.ts') && !file.endsWith('.browser.test.ts') && !(file in NOT_UNIT);
}
