/**
 * A signature drawn on the signing page (a pointer on a pad): what the browser posts, checked here, and
 * kept with the signer (`signing_recipients.drawn_signature`) to be drawn in the archive's signature
 * fields and on its evidence pages.
 *
 * Form: JSON `{"w": W, "h": H, "strokes": [[x0, y0, x1, y1, ...], ...]}`, integers, the pad's size
 * `W`×`H` (50 to 2,000) and each stroke's points inside it (y down, as on a screen). Bounded so that
 * a page cannot make the service store or draw much: at most 64 KiB of text, 100 strokes and 4,000
 * points in all, and at least 2 points (an empty pad is "not drawn").
 */

export interface DrawnSignature {
  readonly w: number;
  readonly h: number;
  /** Each stroke's points as x, y pairs, flattened. */
  readonly strokes: readonly (readonly number[])[];
}

export const DRAWN_SIGNATURE_MAX_CHARS = 65_536;
const MAX_STROKES = 100;
const MAX_POINTS = 4_000;

const sizeOk = (n: unknown): n is number => Number.isInteger(n) && (n as number) >= 50 && (n as number) <= 2000;

/** The drawing, or a sentence saying what is wrong with it (for the signer); null for an empty pad. */
export function parseDrawnSignature(text: string): DrawnSignature | string | null {
  if (text.trim() === '') return null;
  if (text.length > DRAWN_SIGNATURE_MAX_CHARS) return 'The drawn signature is too detailed; clear it and draw it again more simply.';
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return 'The drawn signature could not be read; clear it and draw it again.';
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return 'The drawn signature could not be read; clear it and draw it again.';
  const { w, h, strokes } = raw as Record<string, unknown>;
  if (!sizeOk(w) || !sizeOk(h) || !Array.isArray(strokes)) return 'The drawn signature could not be read; clear it and draw it again.';
  if (strokes.length > MAX_STROKES) return `The drawn signature has more than ${MAX_STROKES} strokes; clear it and draw it again more simply.`;
  let points = 0;
  const kept: number[][] = [];
  for (const stroke of strokes) {
    if (!Array.isArray(stroke) || stroke.length % 2 !== 0) return 'The drawn signature could not be read; clear it and draw it again.';
    for (let i = 0; i < stroke.length; i += 2) {
      const x: unknown = stroke[i];
      const y: unknown = stroke[i + 1];
      if (!Number.isInteger(x) || !Number.isInteger(y) || (x as number) < 0 || (y as number) < 0 || (x as number) > w || (y as number) > h) {
        return 'The drawn signature could not be read; clear it and draw it again.';
      }
    }
    points += stroke.length / 2;
    if (points > MAX_POINTS) return 'The drawn signature is too detailed; clear it and draw it again more simply.';
    if (stroke.length) kept.push(stroke as number[]);
  }
  if (points < 2) return null;
  return { w, h, strokes: kept };
}

/** The drawing as stored (parsed again when read: a damaged value draws nothing). */
export function storedDrawnSignature(text: string | null | undefined): DrawnSignature | null {
  if (!text) return null;
  const parsed = parseDrawnSignature(text);
  return typeof parsed === 'object' ? parsed : null;
}

/** The part of the pad that was drawn on: the strokes' bounding box (at least 1×1). */
export function inkBox(d: DrawnSignature): { x: number; y: number; width: number; height: number } {
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  for (const s of d.strokes) {
    for (let i = 0; i < s.length; i += 2) {
      minX = Math.min(minX, s[i]!);
      maxX = Math.max(maxX, s[i]!);
      minY = Math.min(minY, s[i + 1]!);
      maxY = Math.max(maxY, s[i + 1]!);
    }
  }
  return { x: minX, y: minY, width: Math.max(maxX - minX, 1), height: Math.max(maxY - minY, 1) };
}
