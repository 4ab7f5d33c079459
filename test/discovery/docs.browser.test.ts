/**
 * The API reference (/docs) in headless Chromium, the reader's copy of the document it renders
 * (/docs/reference.json), and the machine document served without a key. Screenshots go to
 * test-output/docs-*.png.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import YAML from 'yaml';
import { catalogue } from '../../generated/catalogue.ts';
import { document } from '../../generated/document.ts';
import { loadGuides } from '../../handlers/discovery/guides.ts';
import { buildReaderDocument, errorCodes } from '../../handlers/discovery/readerDocument.ts';
import { announceBrowser, launchBrowser } from '../support/browser.ts';
import { forEachDatabase } from '../support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const shots = path.join(root, 'test-output');
const INTERNAL = /x-service|Dredd|generator/i;

type Obj = Record<string, unknown>;
type Sample = { lang: string; label: string; source: string };

/** Every operation of a document: path, method and the operation object. */
function operationsOf(doc: Obj): { path: string; method: string; op: Obj }[] {
  return Object.entries(doc.paths as Obj).flatMap(([p, item]) =>
    Object.entries(item as Obj)
      .filter(([, op]) => typeof (op as Obj).operationId === 'string')
      .map(([method, op]) => ({ path: p, method, op: op as Obj })),
  );
}

const errorEnum = (((document.components.schemas.Error as Obj).properties as Obj).error as { enum: string[] }).enum;

announceBrowser('the API reference browser test');

describe('API reference samples', () => {
  it('every typed-client sample of the reader copy typechecks against the generated client', function () {
    this.timeout(120_000);
    const reader = buildReaderDocument(document, { baseUrl: 'http://localhost:8080/v1' });
    const guides = (reader.tags as { description?: string }[]).map((t) => t.description ?? '');
    const fromGuides = guides.flatMap((d) => [...d.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!)).filter((src) => src.includes('createClient('));
    const fromOperations = operationsOf(reader).flatMap(({ op }) => (op['x-codeSamples'] as Sample[]).filter((s) => s.label === 'Typed client').map((s) => s.source));
    assert.ok(fromOperations.length >= catalogue.length);
    const dir = path.join(shots, 'samples');
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, 'samples.ts');
    const body = [...fromGuides, ...fromOperations]
      .map((src, i) => `export async function sample${i}() {\n${src.replace(/^import .*$/gm, '')}\n}`)
      .join('\n\n');
    fs.writeFileSync(file, `import { createClient } from '../../generated/client.ts';\n\n${body}\n`);
    const tsc = spawnSync(
      process.execPath,
      [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '--noEmit', '--strict', '--skipLibCheck', '--target', 'ES2022', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--allowImportingTsExtensions', '--types', 'node', file],
      { cwd: root, encoding: 'utf8' },
    );
    assert.equal(tsc.status, 0, `tsc on ${file}:\n${tsc.stdout}${tsc.stderr}`);
  });
});

forEachDatabase('API reference', (svc) => {
  it('serves the machine document without a key, as YAML and as JSON, unchanged', async () => {
    const yaml = await fetch(`${svc().baseUrl}/openapi.yaml`);
    assert.equal(yaml.status, 200);
    assert.match(yaml.headers.get('content-type')!, /^application\/yaml/);
    assert.deepEqual(YAML.parse(await yaml.text()), JSON.parse(JSON.stringify(document)));
    const json = await fetch(`${svc().baseUrl}/openapi.json`);
    assert.equal(json.status, 200);
    assert.deepEqual(await json.json(), JSON.parse(JSON.stringify(document)));
  });

  it('serves a reader copy: no internal words, the facts in words, a curl and a typed-client sample per operation, guides apart', async () => {
    const res = await fetch(`${svc().origin}/docs/reference.json`);
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.doesNotMatch(text, INTERNAL, 'no x-service-*, Dredd or generator in the reader copy');
    const reader = JSON.parse(text) as Obj;
    // Built from the bundled document and the configuration only (no state of the process): every
    // process serving the page answers these same bytes.
    assert.equal(text, JSON.stringify(buildReaderDocument(document, { baseUrl: ((reader.servers as { url: string }[])[0]!.url), guides: loadGuides() })));
    assert.equal(await (await fetch(`${svc().origin}/docs/reference.json`)).text(), text);

    const ops = operationsOf(reader);
    assert.equal(ops.length, operationsOf(document as unknown as Obj).length, 'every operation of the document is in the copy');
    for (const e of catalogue) assert.ok(ops.some((o) => o.op.operationId === e.id), `${e.id} is in the copy`);
    for (const { path: p, method, op } of ops) {
      const id = op.operationId as string;
      const machine = (document.paths as unknown as Record<string, Record<string, Obj>>)[p]![method]!;
      const samples = op['x-codeSamples'] as Sample[];
      const curl = samples.find((s) => s.label === 'curl');
      assert.ok(curl, `${id} has a curl sample`);
      assert.ok(curl.source.startsWith(`curl -X ${method.toUpperCase()} `) && curl.source.includes(`/v1${p}`), `${id}: curl calls its path`);
      const typed = samples.find((s) => s.lang === 'TypeScript');
      assert.ok(typed, `${id} has a TypeScript sample`);
      const description = op.description as string;
      if (machine['x-service-kind'] === 'collection') {
        assert.match(typed.source, /fetch\(/, `${id}: a public endpoint is called with fetch`);
        continue;
      }
      assert.equal(typed.label, 'Typed client');
      assert.match(typed.source, /import \{ createClient \} from '@workspace-operations\/client'/);
      if (machine['x-service-listed'] !== false) assert.ok(typed.source.includes(`api.${id}(`), `${id}: the typed client calls api.${id}`);
      // The facts of the x-service-* fields, in words.
      const command = machine['x-service-kind'] === 'command';
      assert.match(description, command ? /\*\*Kind:\*\* command/ : /\*\*Kind:\*\* query/, id);
      assert.equal(curl.source.includes('Idempotency-Key:'), command, `${id}: curl sends Idempotency-Key exactly for commands`);
      assert.equal(/\*\*Idempotency:\*\* `Idempotency-Key` is required/.test(description), command, id);
      assert.equal(typed.source.includes('idempotencyKey:'), command, id);
      const actAs = machine['x-service-act-as'] as string;
      assert.match(description, { required: /`Service-Act-As` is required/, optional: /`Service-Act-As` is optional/, none: /`Service-Act-As` is not accepted/ }[actAs]!, id);
      assert.equal(curl.source.includes('Service-Act-As:'), actAs === 'required', id);
      if (machine['x-service-listed'] !== false) assert.ok(description.includes(`the operation \`${id}\``), `${id}: names the grant it needs`);
      const resource = machine['x-service-resource'];
      if (typeof resource === 'string') assert.ok(description.includes(`on \`${resource}\``), `${id}: names its resource access`);
      // A response sample: a documented success with a body to show (the page renders it per status).
      const success = Object.entries(op.responses as Obj).find(([status]) => status.startsWith('2'));
      assert.ok(success, `${id} documents a success`);
    }

    const tags = reader.tags as { name: string; description?: string; 'x-traitTag'?: boolean }[];
    const groups = reader['x-tagGroups'] as { name: string; tags: string[] }[];
    assert.deepEqual(groups.map((g) => g.name), ['Guides', 'Reference']);
    for (const guide of ['Authentication', 'Delegation (act-as)', 'Idempotency', 'Errors', 'Rate limits', 'Paging', 'Webhooks and signatures']) {
      assert.ok(groups[0]!.tags.includes(guide), `guide ${guide}`);
      assert.equal(tags.find((t) => t.name === guide)?.['x-traitTag'], true);
    }
    const guide = (name: string) => tags.find((t) => t.name === name)!.description!;
    assert.match(guide('Authentication'), /Authorization: Bearer <API key>/);
    assert.match(guide('Webhooks and signatures'), /X-Webhook-Signature: v1=/);
    assert.match(guide('Webhooks and signatures'), /verifyWebhook\(/);
    assert.match(guide('Delegation (act-as)'), /\| owner \| every shared record type: read and write \|/);
    const errors = guide('Errors');
    for (const { code, statuses } of errorCodes(document)) {
      assert.ok(statuses.length > 0, `${code} has a status`);
      assert.ok(errors.includes(`| \`${code}\` | ${statuses.join(', ')} |`), `the error table lists ${code}`);
    }
    assert.deepEqual(errorCodes(document).map((e) => e.code), errorEnum);
  });

  describe('in Chromium', () => {
    let browser: Browser | undefined;
    let context: BrowserContext | undefined;
    let page: Page;
    const problems: string[] = [];
    const outside: string[] = [];
    before(async function () {
      this.timeout(90_000);
      browser = await launchBrowser(this);
      context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
      page = await context.newPage();
      page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
      page.on('console', (msg) => {
        if (msg.type() === 'error') problems.push(`console: ${msg.text()}`);
      });
      page.on('request', (req) => {
        if (!req.url().startsWith(svc().origin) && !/^(data|blob):/.test(req.url())) outside.push(req.url());
      });
      const response = await page.goto(`${svc().origin}/docs`);
      assert.equal(response!.status(), 200);
      const policy = response!.headers()['content-security-policy']!;
      assert.match(policy, /script-src 'self';/);
      assert.doesNotMatch(policy, /script-src[^;]*unsafe/);
      // The one relaxation for scripts: Redoc's search index runs in a worker started from a blob: URL.
      assert.match(policy, /worker-src blob:;/);
      await page.waitForSelector('body[data-ready="true"]', { timeout: 60_000 });
      fs.mkdirSync(shots, { recursive: true });
    });
    after(async () => {
      await context?.close();
      await browser?.close();
    });

    it('shows every operation with a curl and a typed-client sample, and no Authorize or try-it button', async function () {
      this.timeout(60_000);
      await page.screenshot({ path: path.join(shots, `docs-top-${svc().db.dialect}.png`) });
      const reader = (await (await fetch(`${svc().origin}/docs/reference.json`)).json()) as Obj;
      const ids = operationsOf(reader).map((o) => o.op.operationId as string);
      // Redoc renders each operation as a section with the id of its deep link.
      const sections = await page.$$eval('[id^="tag/"][id*="/operation/"]', (els) => els.map((e) => e.id));
      for (const id of ids) {
        const anchor = sections.find((s) => s.endsWith(`/operation/${id}`));
        assert.ok(anchor, `${id} is on the page`);
        const tabs = await page.$$eval(`[id="${anchor}"] [role="tab"]`, (els) => els.map((e) => e.textContent?.trim()));
        assert.ok(tabs.includes('curl'), `${id} has a curl tab (${tabs.join(', ')})`);
        assert.ok(tabs.includes('Typed client') || tabs.includes('TypeScript'), `${id} has a typed-client tab`);
      }
      const body = (await page.textContent('body'))!;
      assert.doesNotMatch(body, INTERNAL, 'no internal words in the page');
      const buttons = await page.$$eval('button, [role="button"], a', (els) => els.map((e) => e.textContent?.trim() ?? ''));
      assert.equal(buttons.filter((b) => /^(authorize|try it|try it out|send|test request)$/i.test(b)).length, 0, 'no Authorize or try-it button');

      // One operation opened by its deep link: its rules, both samples and the response samples.
      await page.goto(`${svc().origin}/docs#tag/customers/operation/customers.UpdateSalesPipeline`);
      await page.waitForSelector('body[data-ready="true"]');
      const op = page.locator('[id="tag/customers/operation/customers.UpdateSalesPipeline"]');
      await op.getByRole('tab', { name: 'curl' }).click();
      assert.match((await op.textContent())!, /curl -X POST .*\/v1\/operations\/customers\.UpdateSalesPipeline/);
      await op.getByRole('tab', { name: 'Typed client' }).click();
      const opened = (await op.textContent())!;
      assert.match(opened, /api\.customers\.UpdateSalesPipeline\(/);
      assert.match(opened, /Response samples/);
      assert.match(opened, /Grant:/);
      assert.match(opened, /core:SalesPipeline/);
      await page.screenshot({ path: path.join(shots, `docs-operation-${svc().db.dialect}.png`) });
      assert.deepEqual(outside, [], 'nothing is loaded from outside the service');
      assert.deepEqual(problems, []);
    });

    it('search finds an operation and opens it', async function () {
      this.timeout(60_000);
      const search = page.getByPlaceholder('Search...');
      // By its id, and by words of its summary.
      for (const query of ['RecoverWebhookEvents', 'failed event']) {
        await search.fill(query);
        await page.locator('[data-role="search:results"] li[data-item-id$="/operation/webhooks.RecoverWebhookEvents"]').first().waitFor({ timeout: 20_000 });
      }
      const result = page.locator('[data-role="search:results"] li[data-item-id$="/operation/webhooks.RecoverWebhookEvents"]').first();
      assert.match((await result.textContent())!, /Deliver again every failed event/);
      await page.screenshot({ path: path.join(shots, `docs-search-${svc().db.dialect}.png`) });
      await result.click();
      // On a loaded machine the first click can land while the result list re-renders: one more click then.
      const opened = () => page.waitForFunction(() => location.hash.includes('webhooks.RecoverWebhookEvents'), undefined, { timeout: 15_000 });
      await opened().catch(async () => {
        await result.click();
        await opened();
      });
      assert.deepEqual(problems, []);
    });

    it('reaches the guides from the side menu, and the error table lists every error code with its status', async function () {
      this.timeout(60_000);
      await page.getByPlaceholder('Search...').fill('');
      await page.getByPlaceholder('Search...').press('Escape');
      for (const guide of ['Authentication', 'Delegation (act-as)', 'Idempotency', 'Rate limits', 'Paging', 'Webhooks and signatures', 'Errors']) {
        await page.locator('.menu-content').getByText(guide, { exact: true }).first().click();
        await page.waitForFunction((name) => decodeURIComponent(location.hash).toLowerCase().includes(name), guide.toLowerCase().split(' ')[0]!);
      }
      await page.locator('[id="tag/Errors"]').waitFor();
      // The table of the Errors guide ("Every error code", a sub-section Redoc makes of its heading).
      const table = page.locator('table', { has: page.locator('th', { hasText: 'HTTP status' }) });
      const rows = await table.locator('tr').evaluateAll((trs) => trs.map((tr) => Array.from(tr.querySelectorAll('td')).map((td) => td.textContent?.trim() ?? '')));
      for (const { code, statuses } of errorCodes(document)) {
        assert.ok(
          rows.some((r) => r[0] === code && r[1] === statuses.join(', ')),
          `the error table shows ${code} with ${statuses.join(', ')}`,
        );
      }
      await table.scrollIntoViewIfNeeded();
      await page.screenshot({ path: path.join(shots, `docs-errors-${svc().db.dialect}.png`) });
      assert.deepEqual(problems, []);
    });
  });
});
