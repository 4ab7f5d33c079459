/**
 * The module's dependencies for its operation handlers. Handlers are a static map called with an
 * OperationContext (no ModuleDeps), so the module records its deps per database when the service
 * builds its routes and jobs, and handlers look them up by `ctx.db` (each service process, and each
 * test service, has its own Database).
 */
import type { Database } from '../../db/database.ts';
import type { ModuleDeps } from '../../server/module.ts';
import type { ClamavConfig } from './clamav.ts';

export interface DocumentsSettings {
  /** The ClamAV daemon every completed upload is streamed to (CLAMAV_URL), or null: no virus scan. */
  clamav: ClamavConfig | null;
}

export type DocumentsDeps = ModuleDeps<DocumentsSettings>;

const byDb = new WeakMap<Database, DocumentsDeps>();

export function remember(deps: DocumentsDeps): DocumentsDeps {
  byDb.set(deps.db, deps);
  return deps;
}

export function depsOf(db: Database): DocumentsDeps {
  const deps = byDb.get(db);
  if (!deps) throw new Error('the documents module was not built for this database (its routes were not mounted)');
  return deps;
}
