import { envNumber, type ServiceEnv } from '../../server/config.ts';
import type { ServiceModule } from '../../server/module.ts';
import { provide } from '../../server/services.ts';
import { documentFiles } from '../interfaces/documentFiles.ts';
import { parseClamavUrl } from './clamav.ts';
import { cleanupDocuments } from './cleanup.ts';
import type { DocumentsSettings } from './deps.ts';
import { documentFilesService } from './files.ts';
import { DOCUMENT_EVENT_KINDS, documentHandlers } from './handlers.ts';
import { limitsNavigation, limitsRoutes } from './limitsPage.ts';
import { storedPdfChecks } from './pdf.ts';
import { documentRoutes, partEndpoint } from './routes.ts';

/**
 * CLAMAV_URL (tcp://host:port or unix:///path/to/clamd.sock): every completed upload is also scanned by
 * that ClamAV daemon. PART_BODY_GRACE_MS (30 s) and PART_BODY_MIN_BYTES_PER_SECOND (4 KiB/s): a part's
 * body slower than that on average after the grace is cut (408).
 */
export function documentsConfig(env: ServiceEnv): DocumentsSettings {
  const url = env.CLAMAV_URL?.trim();
  return {
    clamav: url ? { address: parseClamavUrl(url) } : null,
    partBody: { graceMs: envNumber(env, 'PART_BODY_GRACE_MS', 30_000, 0), minBytesPerSecond: envNumber(env, 'PART_BODY_MIN_BYTES_PER_SECOND', 4096, 1) },
  };
}

/**
 * Documents: PDF uploads in parts (resumable, checksummed, scanned: handlers.ts, the part and download
 * URLs in routes.ts), the files they become (files.ts; other modules ask for them as the `documentFiles`
 * service, handlers/interfaces/documentFiles.ts), and the hourly cleanup of uploads that expired.
 */
export const documents: ServiceModule<'documents', DocumentsSettings> = {
  namespace: 'documents',
  handlers: documentHandlers,
  config: documentsConfig,
  migrations: new URL('./migrations/', import.meta.url),
  secretPaths: ['/files/'],
  provides: (deps) => [provide(documentFiles, documentFilesService(deps.storage, storedPdfChecks))],
  events: DOCUMENT_EVENT_KINDS,
  routes: (deps) => {
    const router = documentRoutes(deps);
    router.use(limitsRoutes(deps));
    return router;
  },
  navigation: () => limitsNavigation,
  stylesheet: new URL('./documents.css', import.meta.url),
  endpoints: (deps) => partEndpoint(deps),
  jobs: (deps) => ({
    'documents.cleanup': {
      everyMs: 60 * 60_000,
      run: async () => {
        const removed = await cleanupDocuments(deps);
        if (removed.uploads || removed.files) deps.logger.info(removed, 'removed expired uploads and files past the retention');
      },
    },
  }),
};
