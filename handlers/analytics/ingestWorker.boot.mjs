// Entry of the collection writer thread: the service runs from TypeScript sources, so the thread
// registers tsx before it loads ingestWorker.ts.
import { register } from 'tsx/esm/api';

register();
await import('./ingestWorker.ts');
