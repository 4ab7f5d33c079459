/**
 * The analytics dashboard page (`GET /dashboard?site=<bundle id>`): a static HTML shell inside the
 * page frame (the navigation bar) for a signed-in member, and a script bundled from dashboard-app/app.ts
 * (by `npm run build`, or on first use when running from the sources; server/bundle.ts), which reads
 * the analytics operations through the generated client with the session cookie.
 */
import express, { type Request, type Response } from 'express';
import type { Logger } from 'pino';
import { type BrowserBundle, bundleFiles } from '../../server/bundle.ts';
import type { NavEntry, PageKit } from '../../server/pages.ts';

/** The dashboard's script and CSS (its own and uPlot's): `app.js`, `app.css`. */
export const dashboardBundle: BrowserBundle = {
  entry: new URL('./dashboard-app/app.ts', import.meta.url),
  out: new URL('./dashboard-app.bundle/', import.meta.url),
  target: 'es2022',
};

interface Asset {
  type: string;
  body: Buffer;
}

let assets: Promise<Map<string, Asset>> | null = null;
/** The dashboard's bundle, read (or bundled) once per process; a failure is retried on the next request. */
function buildAssets(): Promise<Map<string, Asset>> {
  assets ??= (async () => {
    const out = new Map<string, Asset>();
    for (const [name, body] of await bundleFiles(dashboardBundle)) {
      out.set(name, { type: name.endsWith('.css') ? 'text/css; charset=utf-8' : 'text/javascript; charset=utf-8', body });
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
  // Read (or, from the TypeScript sources, bundled) when the service starts, not on a person's first request.
  buildAssets().catch((err: unknown) => logger.error({ err }, 'dashboard bundle failed'));
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
