/**
 * Issue 22 §4: the guides of docs/ served beside the API reference. `/docs/guides` lists every guide
 * with its sections, `/docs/guides/<name>` renders one on the server inside the page layout (no
 * script, the page kit's policy), with GitHub's heading anchors; raw HTML in a guide is text, links
 * are rewritten for the service, and the reference (`/docs/reference.json`) links to the guides.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { DOCS_DIR, loadGuides, servedHref } from '../../handlers/discovery/guides.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const guideNames = fs
  .readdirSync(path.join(root, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => f.slice(0, -3));

describe('the guides of docs/ (rendering)', () => {
  it('reads docs/ of the repository: every guide, in the map order, titled by its first heading', () => {
    assert.equal(fileURLToPath(DOCS_DIR), `${path.join(root, 'docs')}/`);
    const guides = loadGuides();
    assert.deepEqual(new Set(guides.map((g) => g.name)), new Set(guideNames));
    assert.equal(guides[0]!.name, 'first-steps');
    const operations = guides.find((g) => g.name === 'operations')!;
    assert.equal(operations.title, 'Operations: configuration, production, the compiled build');
    assert.ok(operations.sections.some((s) => s.slug === 'configuration'));
    // GitHub's anchors: code spans by their text, punctuation dropped.
    assert.match(guides.find((g) => g.name === 'dashboard-and-members')!.html, /<h3 id="api-keys-settingskeys">API keys \(<code>\/settings\/keys<\/code>\)<\/h3>/);
  });

  it('escapes raw HTML, refuses script links, rewrites links for the service and shows why a block is not run', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'guides-'));
    fs.writeFileSync(
      path.join(dir, 'alpha.md'),
      [
        '# Alpha <b>bold</b>',
        '',
        '<script>alert(1)</script>',
        '',
        '<img src=x onerror=alert(1)>',
        '',
        '[run](javascript:alert(1)) [beta](beta.md#part-two) [home](../README.md) [source](../server/pages.ts) [site](https://example.com/x) [here](#alpha)',
        '',
        '```sh no-run: needs Docker',
        'docker compose up',
        '```',
        '',
        '```html',
        '<script defer src="/v1/track.js"></script>',
        '```',
      ].join('\n'),
    );
    fs.writeFileSync(path.join(dir, 'beta.md'), '# Beta\n\n## Part two\n\ntext\n');
    fs.writeFileSync(path.join(dir, 'Not A Name.md'), '# ignored\n');
    const guides = loadGuides(pathToFileURL(`${dir}/`));
    assert.deepEqual(guides.map((g) => g.name), ['alpha', 'beta']);
    const html = guides[0]!.html;
    assert.equal(guides[0]!.title, 'Alpha <b>bold</b>');
    assert.ok(!/<script|<img|<b>/i.test(html), html);
    assert.match(html, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    assert.match(html, /<h1 id="alpha-bboldb">Alpha &lt;b&gt;bold&lt;\/b&gt;<\/h1>/);
    assert.ok(!html.includes('href="javascript:'), 'no javascript: link');
    assert.match(html, /<a href="\/docs\/guides\/beta#part-two">beta<\/a>/);
    assert.match(html, /<a href="\/docs\/guides">home<\/a>/);
    assert.match(html, /<span class="repo-path">source<\/span>/);
    assert.match(html, /<a href="https:\/\/example.com\/x">site<\/a>/);
    assert.match(html, /<a href="#alpha">here<\/a>/);
    assert.match(html, /<p class="no-run">Not run by the docs check: needs Docker<\/p>\n<pre><code class="language-sh">docker compose up/);
    assert.match(html, /&lt;script defer src=&quot;\/v1\/track.js&quot;&gt;/);
    assert.match(guides[1]!.html, /<h2 id="part-two">Part two<\/h2>/);
  });

  it('maps hrefs: guides, README, anything else of the repository not served', () => {
    const names = new Set(['operations', 'benchmarks']);
    assert.equal(servedHref('operations.md#compiled-build', names), '/docs/guides/operations#compiled-build');
    assert.equal(servedHref('./benchmarks.md', names), '/docs/guides/benchmarks');
    assert.equal(servedHref('../docs/operations.md', names), '/docs/guides/operations');
    assert.equal(servedHref('../README.md#quick-start', names), '/docs/guides');
    assert.equal(servedHref('unknown.md', names), null);
    assert.equal(servedHref('../../etc/passwd', names), null);
    assert.equal(servedHref('../client/README.md', names), null);
    assert.equal(servedHref('#x', names), '#x');
    assert.equal(servedHref('http://localhost:8080/docs', names), 'http://localhost:8080/docs');
  });
});

describe('the guides at /docs/guides [sqlite]', function () {
  this.timeout(30_000);
  let svc: TestService;
  before(async () => {
    svc = await startTestService(databases.find((d) => d.name === 'sqlite')!.url());
  });
  after(async () => {
    await svc?.close();
  });

  const get = async (p: string) => {
    const res = await fetch(`${svc.origin}${p}`, { redirect: 'manual' });
    return { status: res.status, headers: res.headers, text: await res.text() };
  };

  it('lists every guide with its sections and links to the API reference', async () => {
    const list = await get('/docs/guides');
    assert.equal(list.status, 200);
    assert.match(list.headers.get('content-type') ?? '', /text\/html/);
    for (const name of guideNames) assert.ok(list.text.includes(`href="/docs/guides/${name}"`), name);
    assert.ok(list.text.includes('href="/docs/guides/operations#run-in-production"'));
    assert.ok(list.text.includes('href="/docs"'));
  });

  it('serves each guide in the page layout, with no script and the page policy, linking to the others', async () => {
    for (const name of guideNames) {
      const page = await get(`/docs/guides/${name}`);
      assert.equal(page.status, 200, name);
      assert.ok(!/<script/i.test(page.text), `${name}: no script`);
      const csp = page.headers.get('content-security-policy') ?? '';
      assert.match(csp, /script-src 'self'/, name);
      assert.ok(!/script-src[^;]*unsafe-inline/.test(csp), name);
      assert.ok(page.text.includes('/docs/assets/guides.css'), name);
    }
    const first = await get('/docs/guides/first-steps');
    assert.match(first.text, /<h1 id="first-steps-the-demo-calls-to-paste-the-typed-client-the-api-reference-page">/);
    assert.ok(first.text.includes('href="/docs/guides/operations#compiled-build"'));
    assert.match(first.text, /Not run by the docs check: /);
    const css = await get('/docs/assets/guides.css');
    assert.equal(css.status, 200);
    assert.match(css.headers.get('content-type') ?? '', /text\/css/);
  });

  it('answers 404 for a guide that does not exist, however its name is spelled', async () => {
    for (const p of ['/docs/guides/nope', '/docs/guides/..%2Fpackage.json', '/docs/guides/README', '/docs/guides/operations.md', '/docs/guides/..%2F..%2Fpackage.json']) {
      const page = await get(p);
      assert.equal(page.status, 404, p);
      assert.ok(!page.text.includes('"dependencies"'), p);
    }
  });

  it('links the guides from the API reference (a guide of the reference lists them)', async () => {
    const reader = JSON.parse((await get('/docs/reference.json')).text) as { tags: { name: string; description?: string }[]; 'x-tagGroups': { name: string; tags: string[] }[] };
    const tag = reader.tags.find((t) => t.name === 'Running and operating the service');
    assert.ok(tag, 'the guides tag');
    assert.ok(reader['x-tagGroups'][0]!.tags.includes(tag.name));
    for (const name of guideNames) assert.ok(tag.description!.includes(`](/docs/guides/${name})`), name);
  });
});
