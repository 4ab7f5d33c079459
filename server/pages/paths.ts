/**
 * Whether `next` is a path on this service: it starts with exactly one "/", has no backslash, no
 * whitespace or control characters, and stays on the origin it is resolved against.
 */
export function isLocalPath(next: string): boolean {
  if (next.length > 2000 || !/^\/(?![/\\])/.test(next) || /[\\\s\u0000-\u001f\u007f]/.test(next)) return false;
  try {
    return new URL(next, 'http://service.invalid').origin === 'http://service.invalid';
  } catch {
    return false;
  }
}

/**
 * The page of any shared record by id, whatever its type (`/records/open/<id>`: the record pages send
 * the member on to the record's page, or say it is not theirs to see). What a notice about a record
 * links to.
 */
export const recordPagePath = (recordId: string): string => `/records/open/${encodeURIComponent(recordId)}`;
