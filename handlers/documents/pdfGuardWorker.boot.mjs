// Entry of a PDF checking thread (pdfGuard.ts). Compiled (`npm run build`), pdfGuardWorker.js is beside
// this file and is loaded as it is; from the TypeScript sources the thread registers tsx first.
import { existsSync } from 'node:fs';

const compiled = new URL('./pdfGuardWorker.js', import.meta.url);
if (existsSync(compiled)) {
  await import(compiled.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('./pdfGuardWorker.ts');
}
