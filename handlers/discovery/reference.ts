/**
 * The API reference for people: `GET /docs`, rendered in the browser by Swagger UI (the package
 * swagger-ui-dist, served from node_modules: no CDN) from the document the service serves at
 * `/v1/openapi.json`, with each operation's x-service-* facts and the document's own authentication,
 * error and rule sections. Public, like the document: it holds no secrets.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import express, { type Request, type Response } from 'express';
import type { ModuleDeps } from '../../server/module.ts';

const require = createRequire(import.meta.url);
const SWAGGER_DIR = path.dirname(require.resolve('swagger-ui-dist/package.json'));
const ASSETS: Record<string, { file: string; type: string }> = {
  'swagger-ui.css': { file: path.join(SWAGGER_DIR, 'swagger-ui.css'), type: 'text/css; charset=utf-8' },
  'swagger-ui-bundle.js': { file: path.join(SWAGGER_DIR, 'swagger-ui-bundle.js'), type: 'text/javascript; charset=utf-8' },
  'docs-init.js': { file: new URL('./pages/docs-init.js', import.meta.url).pathname, type: 'text/javascript; charset=utf-8' },
};

// Swagger UI sets style attributes as it renders: styles (never scripts) may be inline on this page.
const DOCS_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; font-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export function referenceRoutes({ pages }: ModuleDeps): express.Router {
  const views = pages.views(new URL('./pages/', import.meta.url));
  const router = pages.router();
  router.get('/docs', (_req: Request, res: Response) => {
    res.setHeader('Content-Security-Policy', DOCS_POLICY);
    pages.send(res, 200, {
      title: 'API reference',
      bodyClass: 'docs',
      styles: ['/docs/assets/swagger-ui.css'],
      html: views.render('docs', {}),
    });
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
