/** The module's settings and dependencies (its handlers, routes and jobs are made from them). */
import type { ModuleDeps } from '../../server/module.ts';
import type { ClamavConfig } from './clamav.ts';

export interface DocumentsSettings {
  /** The ClamAV daemon every completed upload is streamed to (CLAMAV_URL), or null: no virus scan. */
  clamav: ClamavConfig | null;
  /** The pace a part's body must keep (PART_BODY_GRACE_MS, PART_BODY_MIN_BYTES_PER_SECOND): a trickle is cut with 408. */
  partBody: PartBodyPace;
}

export interface PartBodyPace {
  /** No pace is asked for in the body's first `graceMs`. */
  graceMs: number;
  /** After the grace, the bytes so far must average at least this many a second. */
  minBytesPerSecond: number;
}

export type DocumentsDeps = ModuleDeps<DocumentsSettings>;
