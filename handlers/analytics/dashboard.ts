/**
 * The analytics dashboard page (`GET /dashboard?site=<bundle id>`): a static HTML shell inside the
 * page frame (the navigation bar) for a signed-in member, and a script bundled by esbuild from
 * dashboard-app/app.ts on first use (kept in memory), which reads the analytics operations through
 * the generated client with the session cookie.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import esbuild from 'esbuild';
import express, { type Request, type Response } from 'express';
import type { Logger } from 'pino';
import type { NavEntry, PageKit } from '../../server/pages.ts';

const DASHBOARD_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), 'dashboard-app');

interface Asset {
  type: string;
  body: Buffer;
}

let assets: Promise<Map<string, Asset>> | null = null;
/** Bundles dashboard/app.ts (with its CSS and uPlot's) once per process; a failed build is retried on the next request. */
function buildAssets(): Promise<Map<string, Asset>> {
  assets ??= (async () => {
    const result = await esbuild.build({
      entryPoints: [path.join(DASHBOARD_DIR, 'app.ts')],
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      minify: true,
      legalComments: 'none',
      outdir: path.join(DASHBOARD_DIR, 'out'),
      logLevel: 'silent',
    });
    const out = new Map<string, Asset>();
    for (const file of result.outputFiles) {
      const name = path.basename(file.path);
      out.set(name, { type: name.endsWith('.css') ? 'text/css; charset=utf-8' : 'text/javascript; charset=utf-8', body: Buffer.from(file.contents) });
    }
    return out;
  })().catch((err: unknown) => {
    assets = null;
    throw err;
  });
  return assets;
}

/** The module's entry in the navigation bar: the members' home (the brand and `GET /` lead here). */
export const dashboardNavigation: NavEntry[] = [{ label: 'Analytics', path: '/dashboard', order: 10, home: true }];

export function dashboardRoutes(options: { pages: PageKit; logger: Logger }): express.Router {
  const { pages, logger } = options;
  const views = pages.views(new URL('./pages/', import.meta.url));
  const router = pages.router();
  router.get('/dashboard', async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    await buildAssets().catch((err: unknown) => logger.error({ err }, 'dashboard bundle failed'));
    await page.send(200, {
      title: 'Analytics',
      bodyClass: 'page dashboard',
      styles: ['/dashboard/assets/app.css'],
      scripts: ['/dashboard/assets/app.js'],
      html: views.render('dashboard', { member: page.member.name }),
    });
  });
  router.get('/dashboard/assets/:name', async (req: Request<{ name: string }>, res: Response) => {
    let asset: Asset | undefined;
    try {
      asset = (await buildAssets()).get(req.params.name);
    } catch (err) {
      logger.error({ err }, 'dashboard assets failed');
      res.status(500).type('text/plain').send('The dashboard assets could not be built; see the service log.');
      return;
    }
    if (!asset) {
      res.status(404).type('text/plain').send('Not found.');
      return;
    }
    res.setHeader('Content-Type', asset.type);
    res.setHeader('Cache-Control', 'no-cache');
    res.status(200).send(asset.body);
  });
  return router;
}
