/**
 * The API reference for people: `GET /docs`, rendered in the browser by Redoc (the package `redoc`
 * 2.x, its standalone bundle served from node_modules: no CDN) from the reader's copy of the document,
 * `GET /docs/reference.json` (readerDocument.ts: no `x-service-*` fields, their facts in words, the
 * guides as sections of their own, a curl and a typed-client sample per operation). The machine
 * document stays at `/v1/openapi.json`. Public, like the document: it holds no secrets. Both answers
 * are built from the bundled document and the configuration only, so every process serves the same.
 *
 * Why Redoc and not Scalar (`@scalar/api-reference` 1.72), both looked at in headless Chromium on this
 * document (what the screenshots showed is in scratch/readme-d.md):
 * - Redoc shows the samples the way Stripe does: a third column with the request samples as visible
 *   tabs (Payload, curl, Typed client) and the response samples per status (200, 400, 401, ...), next
 *   to the rules. Scalar puts our two samples behind a language drop-down that starts with its own
 *   generated clients (Ruby, PHP, Python, ...) and cuts long lines.
 * - Scalar's page carries buttons for its hosted services ("Ask AI", "Ask AI Agent", "Generate MCP"),
 *   an "Auth Required" badge and a client-libraries box: things a reader of this page cannot use, and
 *   calls to other hosts the page policy would refuse. Redoc has no Authorize or try-it button at all.
 * - Size: Redoc's bundle is 1.0 MB, Scalar's 4.3 MB (plus chunks) for the same page.
 * - Redoc's guides: tags marked `x-traitTag` in `x-tagGroups` are listed apart ("Guides") from the
 *   reference, each its own section; Scalar lists them too, so that was a tie. Search: both (Redoc's in
 *   the side bar, run in a Web Worker over the whole document).
 * Redoc 3.0.1 (the newest) does not install (its dependency @redocly/redoc-opentelemetry@^0.5.1 does
 * not exist on the registry), so 2.x it is.
 *
 * Page policy: scripts from this service only ('self'), as every page. Relaxed, and why: style-src
 * 'unsafe-inline' (Redoc renders with styled-components, which writes <style> elements; styles only,
 * never scripts), worker-src blob: (Redoc's search index runs in a Web Worker that it starts from a
 * blob: URL of its own bundle; without it the search stays empty and the browser reports the refused
 * worker, as the browser test saw), img-src data: (its inline icons). Nothing is loaded from another host:
 * the one address of another host in the bundle, the vendor's logo beside its footer link (an image on
 * a CDN), is replaced when the bundle is read at start by an empty data: URL, which Redoc then leaves
 * out (its own fallback for a logo that does not load).
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import express, { type Request, type Response } from 'express';
import { document } from '../../generated/document.ts';
import type { ModuleDeps } from '../../server/module.ts';
import { loadGuides } from './guides.ts';
import { buildReaderDocument } from './readerDocument.ts';

const require = createRequire(import.meta.url);
const REDOC = path.join(path.dirname(require.resolve('redoc/package.json')), 'bundles', 'redoc.standalone.js');
const CDN_LOGO = 'https://cdn.redoc.ly/redoc/logo-mini.svg';
const redocBundle = fs.readFileSync(REDOC, 'utf8');
const REDOC_BUNDLE = Buffer.from(redocBundle.replaceAll(CDN_LOGO, 'data:,'));
const ASSETS: Record<string, { file: string; type: string }> = {
  'docs-init.js': { file: new URL('./pages/docs-init.js', import.meta.url).pathname, type: 'text/javascript; charset=utf-8' },
  'docs.css': { file: new URL('./pages/docs.css', import.meta.url).pathname, type: 'text/css; charset=utf-8' },
  'guides.css': { file: new URL('./pages/guides.css', import.meta.url).pathname, type: 'text/css; charset=utf-8' },
};

export const DOCS_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; font-src 'self' data:; worker-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export function referenceRoutes({ pages, config }: ModuleDeps): express.Router {
  const views = pages.views(new URL('./pages/', import.meta.url));
  // Built once per process from the bundled document and docs/: the same bytes on every process.
  const guides = loadGuides();
  const byName = new Map(guides.map((g) => [g.name, g]));
  const reader = JSON.stringify(buildReaderDocument(document, { baseUrl: `${config.publicUrl.replace(/\/+$/, '')}/v1`, guides }));
  const router = pages.router();
  router.get('/docs', (_req: Request, res: Response) => {
    res.setHeader('Content-Security-Policy', DOCS_POLICY);
    pages.send(res, 200, {
      title: 'API reference',
      bodyClass: 'docs',
      styles: ['/docs/assets/docs.css'],
      html: views.render('docs', {}),
    });
  });
  router.get('/docs/guides', (_req: Request, res: Response) => {
    pages.send(res, 200, { title: 'Guides', bodyClass: 'guide-page', styles: ['/docs/assets/guides.css'], html: views.render('guides', { guides }) });
  });
  router.get('/docs/guides/:name', (req: Request<{ name: string }>, res: Response) => {
    const guide = byName.get(req.params.name);
    if (!guide) {
      pages.notice(res, 404, 'No such guide', ['There is no guide at this address.'], undefined, { href: '/docs/guides', label: 'All guides' });
      return;
    }
    pages.send(res, 200, { title: guide.title, bodyClass: 'guide-page', styles: ['/docs/assets/guides.css'], html: views.render('guide', { guide, ...splitTitle(guide.html) }) });
  });
  router.get('/docs/reference.json', (_req: Request, res: Response) => {
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.type('application/json').send(reader);
  });
  router.get('/docs/assets/redoc.standalone.js', (_req: Request, res: Response) => {
    res.setHeader('Cache-Control', 'public, max-age=3600');
    res.type('text/javascript; charset=utf-8').send(REDOC_BUNDLE);
  });
  router.get('/docs/assets/:name', (req: Request<{ name: string }>, res: Response) => {
    const asset = Object.hasOwn(ASSETS, req.params.name) ? ASSETS[req.params.name]! : undefined;
    if (!asset) {
      res.status(404).type('text/plain').send('Not found.');
      return;
    }
    res.setHeader('Content-Type', asset.type);
    res.setHeader('Cache-Control', 'public, max-age=3600');
    fs.createReadStream(asset.file).pipe(res);
  });
  return router;
}

/** A guide's rendered title (its first element, when it is the `h1`) apart from the rest, so its contents go between. */
function splitTitle(html: string): { head: string; rest: string } {
  const end = html.startsWith('<h1') ? html.indexOf('</h1>') : -1;
  return end < 0 ? { head: '', rest: html } : { head: html.slice(0, end + 5), rest: html.slice(end + 5) };
}
