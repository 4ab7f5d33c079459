/**
 * The light client package (`client/`, `@workspace-operations/client`) as a backend gets it: packed
 * with `npm pack`, installed from the tarball into an empty project (only the client and openapi-fetch
 * with its own dependencies come along), imported by plain Node (no tsx) against a running service,
 * and typechecked from its `.d.ts`. About packaging, so SQLite only.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { acme, createPipeline } from '../support/fixtures.ts';
import { startTestService, type TestService } from '../support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const clientPackage = JSON.parse(fs.readFileSync(path.join(root, 'client/package.json'), 'utf8')) as { name: string; dependencies: Record<string, string> };
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** Runs a command without blocking the event loop (the service under test answers from this process). */
async function run(file: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)(file, args, {
      cwd,
      env: { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false', ...env },
      maxBuffer: 16 * 1024 * 1024,
    });
    return stdout;
  } catch (e) {
    const err = e as Error & { stdout?: string; stderr?: string };
    throw new Error(`${file} ${args.join(' ')} failed in ${cwd}: ${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
  }
}

/** Every package installed in a project, from npm's hidden lockfile (`node_modules/.package-lock.json`). */
function installedPackages(project: string): string[] {
  const lock = JSON.parse(fs.readFileSync(path.join(project, 'node_modules/.package-lock.json'), 'utf8')) as { packages: Record<string, unknown> };
  return Object.keys(lock.packages)
    .filter((p) => p.startsWith('node_modules/'))
    .map((p) => p.slice(p.lastIndexOf('node_modules/') + 'node_modules/'.length))
    .sort();
}

describe('client package: packed, installed into an empty project, used from plain Node [sqlite]', function () {
  this.timeout(180_000);
  const temp = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-client-package-'));
  const project = path.join(temp, 'backend');
  let service: TestService | undefined;
  let tarball = '';
  let installSeconds = 0;

  before(async () => {
    service = await startTestService(`sqlite:${path.join(temp, 'service.sqlite')}`);
    const packs = path.join(temp, 'packs');
    fs.mkdirSync(packs);
    await run(npm, ['pack', '--workspace', 'client', '--pack-destination', packs, '--silent'], root);
    const tarballs = fs.readdirSync(packs).filter((f) => f.endsWith('.tgz'));
    assert.equal(tarballs.length, 1, `one tarball from npm pack, got ${tarballs.join(', ')}`);
    tarball = path.join(packs, tarballs[0]!);

    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'backend', version: '1.0.0', private: true, type: 'module' }, null, 2));
    const started = Date.now();
    await run(npm, ['install', '--prefer-offline', tarball], project);
    installSeconds = (Date.now() - started) / 1000;
  });

  after(async () => {
    await service?.close();
    fs.rmSync(temp, { recursive: true, force: true });
  });

  it('packs compiled JavaScript, declarations and the document, and no TypeScript sources', async () => {
    const listing = (await run('tar', ['-tzf', tarball], temp)).split('\n').filter(Boolean).sort();
    assert.ok(listing.includes('package/package.json'));
    assert.ok(listing.includes('package/dist/client/src/index.js'));
    assert.ok(listing.includes('package/dist/client/src/index.d.ts'));
    assert.ok(listing.includes('package/dist/client/src/webhooks.js'));
    assert.ok(listing.includes('package/dist/client/src/webhooks.d.ts'));
    assert.ok(listing.includes('package/dist/client/src/browser.js'));
    assert.ok(listing.includes('package/dist/generated/client.js'));
    assert.ok(listing.includes('package/dist/generated/openapi.d.ts'));
    assert.ok(listing.includes('package/dist/openapi.yaml'));
    assert.deepEqual(listing.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')), []);
  });

  it('installs only the client, openapi-fetch and what openapi-fetch itself depends on', () => {
    assert.deepEqual(Object.keys(clientPackage.dependencies), ['openapi-fetch']);
    const openapiFetch = JSON.parse(fs.readFileSync(path.join(project, 'node_modules/openapi-fetch/package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    const expected = [clientPackage.name, 'openapi-fetch', ...Object.keys(openapiFetch.dependencies ?? {})].sort();
    const installed = installedPackages(project);
    assert.deepEqual(installed, expected);
    assert.ok(installed.length <= 3, `${installed.length} packages: ${installed.join(', ')}`);
    console.log(`      (${installed.length} packages installed in ${installSeconds.toFixed(1)} s: ${installed.join(', ')})`);
  });

  it('is imported by plain Node (no tsx) and calls the running service with an API key', async () => {
    const ws = await service!.apply(acme());
    const key = ws.keys.ci!.secret;
    const existing = await service!.client(key).customers.CreateSalesPipeline(createPipeline('Renewals'));
    assert.equal(existing.response.status, 200);

    // A webhook delivery signed by an independent implementation (openssl), verified by the installed package.
    const hook = { secret: 'whsec_package_test_secret', timestamp: Math.floor(Date.now() / 1000), body: JSON.stringify({ event: 'resource.created', event_id: 'evt_pkg', record_id: 'pl_1' }) };
    const hookSignature = `v1=${(await run('sh', ['-c', 'printf %s "$HOOK_DATA" | openssl dgst -sha256 -hmac "$HOOK_SECRET"'], project, { HOOK_DATA: `${hook.timestamp}.${hook.body}`, HOOK_SECRET: hook.secret })).trim().split(/\s+/).pop()}`;

    fs.writeFileSync(
      path.join(project, 'check.mjs'),
      `import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createClient, verifyWebhook, WebhookVerificationError } from '${clientPackage.name}';
import * as webhooksOnly from '${clientPackage.name}/webhooks';

const api = createClient({ baseUrl: process.env.WSO_URL, apiKey: process.env.WSO_KEY });
const bundles = await api.workspace.ListBundles({});
const created = await api.customers.CreateSalesPipeline(${JSON.stringify(createPipeline('From the light client'))});
const pipelines = await api.customers.ListSalesPipelines({});
const refused = await createClient({ baseUrl: process.env.WSO_URL, apiKey: 'wso_not_a_key' }).customers.ListSalesPipelines({});
const document = fs.readFileSync(fileURLToPath(import.meta.resolve('${clientPackage.name}/openapi.yaml')), 'utf8');
const hook = ${JSON.stringify(hook)};
const hookHeaders = { 'x-webhook-timestamp': String(hook.timestamp), 'x-webhook-signature': ${JSON.stringify(hookSignature)} };
const verified = verifyWebhook(hook.secret, hookHeaders, Buffer.from(hook.body));
let forged = null;
try { webhooksOnly.verifyWebhook('whsec_wrong', new Headers(hookHeaders), hook.body); } catch (e) { forged = e instanceof WebhookVerificationError ? e.reason : String(e); }
console.log(JSON.stringify({
  bundles: { status: bundles.response.status, names: bundles.data?.items.map((b) => b.name) },
  created: { status: created.response.status, id: created.data?.item.id, error: created.error },
  pipelines: { status: pipelines.response.status, names: pipelines.data?.items.map((p) => p.data.name).sort() },
  refused: { status: refused.response.status, error: refused.error?.error },
  documentStartsWithOpenapi: /^openapi: 3/m.test(document),
  webhook: { verified: verified.event_id, forged, sameExport: webhooksOnly.verifyWebhook === verifyWebhook },
}));
`,
    );
    // A browser bundle resolves the main entry through the \`browser\` condition: the client without node:crypto.
    fs.writeFileSync(
      path.join(project, 'browser-check.mjs'),
      `import * as entry from '${clientPackage.name}';
console.log(JSON.stringify({ createClient: typeof entry.createClient, verifyWebhook: typeof entry.verifyWebhook, file: import.meta.resolve('${clientPackage.name}') }));
`,
    );
    const out = JSON.parse(await run(process.execPath, ['check.mjs'], project, { WSO_URL: service!.baseUrl, WSO_KEY: key }));
    assert.deepEqual(out.bundles, { status: 200, names: ['Docs site'] });
    assert.equal(out.created.status, 200, JSON.stringify(out.created.error));
    assert.match(out.created.id, /^pl_/);
    assert.deepEqual(out.pipelines, { status: 200, names: ['From the light client', 'Renewals'] });
    assert.equal(out.refused.status, 401);
    assert.equal(typeof out.refused.error, 'string');
    assert.equal(out.documentStartsWithOpenapi, true);
    assert.deepEqual(out.webhook, { verified: 'evt_pkg', forged: 'bad_signature', sameExport: true });
    const browser = JSON.parse(await run(process.execPath, ['--conditions=browser', 'browser-check.mjs'], project));
    assert.deepEqual(browser, { createClient: 'function', verifyWebhook: 'undefined', file: browser.file });
    assert.match(browser.file, /\/dist\/client\/src\/browser\.js$/);
    const browserEntry = fs.readFileSync(path.join(project, 'node_modules', clientPackage.name, 'dist/client/src/browser.js'), 'utf8');
    assert.doesNotMatch(browserEntry, /^(import|export)\b.*(crypto|webhooks)/m);
  });

  it("typechecks a TypeScript consumer against the package's declarations (moduleResolution nodenext)", async () => {
    fs.writeFileSync(
      path.join(project, 'consumer.ts'),
      `import { createClient, verifyWebhook, WebhookVerificationError, type RequestBody, type ResponseBody, type WebhookEvent, type components } from '${clientPackage.name}';
import { verifyLegacyWebhook } from '${clientPackage.name}/webhooks';
import type { IncomingHttpHeaders } from 'node:http';

const api = createClient({ baseUrl: 'http://localhost:8080/v1', apiKey: 'wso_...', actAs: 'mem_...' });
const body: RequestBody<'customers.ListSalesPipelines'> = {};
const { data, error } = await api.customers.ListSalesPipelines(body, { actAs: null });
const items: ResponseBody<'customers.ListSalesPipelines'>['items'] | undefined = data?.items;
export const first: string | undefined = items?.[0]?.data.name;
export const code: string | undefined = error?.error;
export type Pipeline = components['schemas'];
declare const incoming: IncomingHttpHeaders;
const hook: WebhookEvent = verifyWebhook('whsec_...', incoming, Buffer.from('{}'), { toleranceSeconds: 300 });
export const hookEvent: string = hook.event;
export const legacy: unknown = verifyLegacyWebhook(['whsec_new', 'whsec_old'], new Headers(), new Uint8Array());
export const reason: 'missing_header' | 'bad_signature' | 'stale_timestamp' | 'bad_timestamp' | 'bad_body' = new WebhookVerificationError('bad_body', '').reason;
// @ts-expect-error: the raw body, not a parsed object
verifyWebhook('whsec_...', incoming, { event: 'x' });
// @ts-expect-error: not an operation of the document
api.customers.NoSuchOperation({});
// @ts-expect-error: the body is typed from the document
await api.customers.GetSalesPipeline({ idd: 'pl_...' });
`,
    );
    fs.writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify(
        {
          compilerOptions: {
            target: 'ES2022',
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            lib: ['ES2023'],
            strict: true,
            noEmit: true,
            skipLibCheck: false,
            typeRoots: [path.join(root, 'node_modules/@types')],
            types: ['node'],
          },
          files: ['consumer.ts'],
        },
        null,
        2,
      ),
    );
    await run(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], project);
  });
});
