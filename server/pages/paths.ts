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
