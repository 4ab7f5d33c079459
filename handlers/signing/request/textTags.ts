/**
 * Text tags: fields written into the document itself, as Documenso and DocuSeal read them. The
 * documents module finds every `{{...}}` span at upload (with its page and box); this file says which
 * are field tags and what they ask for:
 *
 *   {{signature}}  {{initials;signer=2}}  {{date;signer=2}}  {{name}}
 *   {{text;signer=1;label=Company registration number;width=200}}  {{checkbox;optional}}
 *
 * The kind comes first (signature, initials, name, date, text, checkbox; case-insensitive), then
 * `;`-separated attributes: `signer=N` (1 to 10, the Nth signer; default 1), `label=...` (up to 100
 * characters), `required=false` or `optional` (text and check box fields), `width=N` and `height=N`
 * (PDF points: the field's box grows right and up from the tag's lower-left corner; never smaller
 * than the tag). Any other `{{...}}` is not a field tag and is left alone; unknown attributes are
 * ignored. The field covers its tag: signers see the field box over it, and the archive paints the
 * box white under what the signer gave, so the tag's text is not in the signed document's pages.
 */
import type { TextTag } from '../../interfaces/documentFiles.ts';
import { type FieldKind, storedRequired } from '../queries.ts';

export interface TaggedField {
  /** The signer's index (0 for the first), from `signer=N`. */
  signer: number;
  kind: FieldKind;
  page: number;
  x: number;
  y: number;
  width: number;
  height: number;
  required: boolean;
  label?: string;
  /** The tag's own text, e.g. `{{signature;signer=1}}`. */
  tag: string;
}

const KINDS: Record<string, FieldKind> = {
  signature: 'signature',
  sign: 'signature',
  initials: 'initials',
  initial: 'initials',
  name: 'name',
  date: 'date',
  datesigned: 'date',
  date_signed: 'date',
  text: 'text',
  checkbox: 'checkbox',
  check: 'checkbox',
};

const MAX_SIDE = 2000;
/** Control and bidirectional-formatting characters: a PDF's text may carry them; labels and tags are shown to people, so they go. */
// eslint-disable-next-line no-control-regex
const UNSHOWN = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const shown = (s: string) => s.replace(UNSHOWN, '').replace(/\s+/g, ' ').trim();
const cap = (n: number) => Math.min(n, MAX_SIDE);

/** The field a tag asks for, or null when the tag is not a field tag. */
export function fieldOfTag(tag: TextTag): TaggedField | null {
  const inner = /^\{\{([^{}]*)\}\}$/.exec(tag.text.trim())?.[1];
  if (inner === undefined) return null;
  const [head = '', ...rest] = inner.split(';').map((p) => p.trim());
  const kind = KINDS[head.toLowerCase().replace(/[\s-]/g, '')];
  if (!kind) return null;
  let signer = 0;
  let required = true;
  let label: string | undefined;
  let width = tag.width;
  let height = tag.height;
  for (const part of rest) {
    const eq = part.indexOf('=');
    const key = (eq < 0 ? part : part.slice(0, eq)).trim().toLowerCase();
    const value = eq < 0 ? '' : part.slice(eq + 1).trim();
    const n = Number(value);
    if (key === 'signer' && Number.isInteger(n) && n >= 1) signer = n - 1;
    else if (key === 'optional' && eq < 0) required = false;
    else if (key === 'required') required = !/^(false|no|0)$/i.test(value);
    else if (key === 'label' && shown(value)) label = shown(value).slice(0, 100);
    else if (key === 'width' && Number.isFinite(n) && n > 0) width = Math.max(width, n);
    else if (key === 'height' && Number.isFinite(n) && n > 0) height = Math.max(height, n);
  }
  return {
    signer,
    kind,
    page: tag.page,
    x: tag.x,
    y: tag.y,
    width: cap(Math.max(width, 4)),
    height: cap(Math.max(height, 4)),
    required: storedRequired(kind, required),
    ...(label ? { label } : {}),
    tag: shown(tag.text).slice(0, 210),
  };
}

/** The field tags of a file's text tags, in page order. */
export const fieldsOfTags = (tags: readonly TextTag[] | undefined): TaggedField[] => (tags ?? []).flatMap((t) => fieldOfTag(t) ?? []);
