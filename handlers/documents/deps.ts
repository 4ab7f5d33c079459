/** The module's settings and dependencies (its handlers, routes and jobs are made from them). */
import type { ModuleDeps } from '../../server/module.ts';
import type { ClamavConfig } from './clamav.ts';

export interface DocumentsSettings {
  /** The ClamAV daemon every completed upload is streamed to (CLAMAV_URL), or null: no virus scan. */
  clamav: ClamavConfig | null;
}

export type DocumentsDeps = ModuleDeps<DocumentsSettings>;
