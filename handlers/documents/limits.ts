/** The documented limits of uploads (documents.CreateUpload's description says each). */
export const MAX_FILE_BYTES = 50 * 1024 * 1024;
export const MIN_PART_BYTES = 1024 * 1024;
export const MAX_PART_BYTES = 16 * 1024 * 1024;
export const DEFAULT_PART_BYTES = 5 * 1024 * 1024;
export const MAX_PARTS = 100;
export const MAX_PAGES = 500;
/** An upload lives 24 hours after creation; then it is gone and the cleanup removes it. */
export const UPLOAD_TTL_MS = 24 * 60 * 60_000;
/** A part URL works 15 minutes. */
export const PART_URL_TTL_MS = 15 * 60_000;
