// Entry of a PDF checking thread (pdfGuard.ts): the service runs from TypeScript sources, so the thread
// registers tsx before it loads pdfGuardWorker.ts.
import { register } from 'tsx/esm/api';

register();
await import('./pdfGuardWorker.ts');
