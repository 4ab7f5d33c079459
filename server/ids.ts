import crypto from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

let pool = Buffer.alloc(0);
let offset = 0;

/** Random lowercase id part (Crockford base32), 24 characters = 120 bits, from a pooled CSPRNG buffer. */
export function randomIdPart(length = 24): string {
  if (offset + length > pool.length) {
    pool = crypto.randomBytes(4096);
    offset = 0;
  }
  let out = '';
  for (let i = 0; i < length; i++) out += ALPHABET[pool[offset + i]! & 31];
  offset += length;
  return out;
}

/** A new id with a type prefix, e.g. `pl_...` for a sales pipeline. */
export function newId(prefix: string): string {
  return `${prefix}_${randomIdPart()}`;
}

export function sha256Hex(text: string): string {
  return crypto.createHash('sha256').update(text).digest('hex');
}

/** JSON with object keys sorted, so equal values always give equal text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
