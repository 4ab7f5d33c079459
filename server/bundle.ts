/**
 * Browser scripts a module serves (the analytics dashboard, the signer's PDF viewer), bundled by
 * esbuild. `npm run build` (scripts/build.ts) bundles each module's `browserBundles` into its folder
 * beside the compiled module; the running service serves those files. Only when no prebuilt bundle
 * is there (the service runs from its TypeScript sources: development and tests) is the bundle made
 * in memory, once per process, started by the module when it makes its routes (the service's start),
 * not by a person's first request; esbuild is a development dependency and the compiled service never
 * loads it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BuildOptions } from 'esbuild';

export interface BrowserBundle {
  /** The entry point (a `.ts` file of the module's sources). */
  readonly entry: URL;
  /** The folder of the prebuilt files (`<entry's name>.js`, `.css` when it imports CSS), beside the module. */
  readonly out: URL;
  /** esbuild's `target` (e.g. `es2022`). */
  readonly target: string;
}

/** esbuild's options for a bundle, the same at build time and on first use. */
export function bundleOptions(bundle: BrowserBundle, outdir: string): BuildOptions {
  return {
    entryPoints: [fileURLToPath(bundle.entry)],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: bundle.target,
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
    outdir,
  };
}

/** The bundle's files by name: the prebuilt ones when `npm run build` made them, else bundled now (in memory). */
export async function bundleFiles(bundle: BrowserBundle): Promise<Map<string, Buffer>> {
  const out = fileURLToPath(bundle.out);
  if (fs.existsSync(out)) {
    const names = await fs.promises.readdir(out);
    return new Map(await Promise.all(names.map(async (name) => [name, await fs.promises.readFile(path.join(out, name))] as const)));
  }
  const esbuild = await import('esbuild');
  const result = await esbuild.build({ ...bundleOptions(bundle, out), write: false });
  return new Map(result.outputFiles.map((file) => [path.basename(file.path), Buffer.from(file.contents)]));
}
