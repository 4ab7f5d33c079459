/**
 * Text on the evidence pages in whatever script a name is written in. A string is split into bidi levels
 * (the Unicode bidirectional algorithm, bidi-js, on a left-to-right page), each level run into pieces by
 * the first font of a fallback chain that has the characters, and each piece is shaped by HarfBuzz (Arabic
 * joining, Devanagari conjuncts and vowel reordering, Thai marks, kerning). The glyphs are written by glyph ID
 * into Type0 / Identity-H fonts that are subset with hb-subset (glyph IDs kept) when the document is
 * finished, so an archive carries only the glyphs it shows. A ToUnicode map gives each glyph its characters;
 * where glyphs and characters do not line up one to one (a Devanagari vowel sign drawn before its consonant,
 * a conjunct) the piece also carries /ActualText, so copying and searching give the text as typed.
 *
 * A character no font has is drawn as the text font's missing-glyph box; the text layer still holds it.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Bidi } from 'bidi-js';
import { type Color, ops, type PDF, PdfArray, PdfDict, PdfName, PdfNumber, type PDFPage, type PdfRef, PdfStream, PdfString } from '@libpdf/core';

type HarfBuzz = typeof import('harfbuzzjs');
type HbFont = InstanceType<HarfBuzz['Font']>;

const require = createRequire(import.meta.url);
const bidiFactory = require('bidi-js') as () => Bidi; // CommonJS: module.exports is the factory
const FONT_DIR = new URL('./fonts/', import.meta.url);

/** The directory of an installed npm package (its `exports` may hide package.json). */
function packageDir(name: string): string {
  let dir = path.dirname(require.resolve(name));
  for (;;) {
    const manifest = path.join(dir, 'package.json');
    if (fs.existsSync(manifest) && JSON.parse(fs.readFileSync(manifest, 'utf8')).name === name) return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`package ${name} not found`);
    dir = up;
  }
}

const local = (file: string) => () => new URL(file, FONT_DIR);
const fromPackage = (name: string, file: string) => () => path.join(packageDir(name), file);

/** Every font the pages may use; each is read (and parsed) the first time a string needs it. */
const FONT_FILES = {
  DejaVuSans: local('DejaVuSans.ttf'),
  'DejaVuSans-Bold': local('DejaVuSans-Bold.ttf'),
  KaushanScript: local('KaushanScript-Regular.otf'),
  NotoSansArabic: fromPackage('@expo-google-fonts/noto-sans-arabic', '400Regular/NotoSansArabic_400Regular.ttf'),
  NotoSansHebrew: fromPackage('@embedpdf/fonts-hebrew', 'fonts/NotoSansHebrew-Regular.ttf'),
  NotoSansDevanagari: fromPackage('@expo-google-fonts/noto-sans-devanagari', '400Regular/NotoSansDevanagari_400Regular.ttf'),
  NotoSansThai: fromPackage('@expo-google-fonts/noto-sans-thai', '400Regular/NotoSansThai_400Regular.ttf'),
  NotoSansSC: fromPackage('@expo-google-fonts/noto-sans-sc', '400Regular/NotoSansSC_400Regular.ttf'),
  NotoSansKR: fromPackage('@expo-google-fonts/noto-sans-kr', '400Regular/NotoSansKR_400Regular.ttf'),
  NotoEmoji: fromPackage('@expo-google-fonts/noto-emoji', '400Regular/NotoEmoji_400Regular.ttf'),
} as const;
type FontKey = keyof typeof FONT_FILES;

// Simplified Chinese before Korean: Noto Sans SC has the Han characters and kana, Noto Sans KR the Hangul.
const FALLBACKS: FontKey[] = ['NotoSansArabic', 'NotoSansHebrew', 'NotoSansDevanagari', 'NotoSansThai', 'NotoSansSC', 'NotoSansKR', 'NotoEmoji'];

// A script's own font before the chain: DejaVu Sans has Arabic and Hebrew letters too, drawn less well.
const PREFERRED: Array<[RegExp, FontKey]> = [
  [/\p{Script=Arabic}/u, 'NotoSansArabic'],
  [/\p{Script=Hebrew}/u, 'NotoSansHebrew'],
  [/\p{Script=Devanagari}/u, 'NotoSansDevanagari'],
  [/\p{Script=Thai}/u, 'NotoSansThai'],
  [/[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Bopomofo}]/u, 'NotoSansSC'],
  [/\p{Script=Hangul}/u, 'NotoSansKR'],
  [/\p{Emoji_Presentation}|\p{Extended_Pictographic}\uFE0F/u, 'NotoEmoji'],
];

/** `text` for the evidence text, `bold` for headings, `script` for a typed name drawn as a signature. */
export type TextStyle = 'text' | 'bold' | 'script';
const CHAINS: Record<TextStyle, [FontKey, ...FontKey[]]> = {
  text: ['DejaVuSans', ...FALLBACKS],
  bold: ['DejaVuSans-Bold', ...FALLBACKS],
  script: ['KaushanScript', 'DejaVuSans', ...FALLBACKS],
};

interface Face {
  key: FontKey;
  bytes: Uint8Array;
  hbFace: InstanceType<HarfBuzz['Face']>;
  font: HbFont;
  upem: number;
  cmap: Set<number>;
  cff: boolean;
  psName: string;
  bbox: [number, number, number, number];
  ascent: number;
  descent: number;
  capHeight: number;
  /** hb_face_t in the subsetter's memory, made on the first subset. */
  subsetFace?: number;
}

interface SubsetExports {
  memory: WebAssembly.Memory;
  malloc(n: number): number;
  free(p: number): void;
  hb_blob_create(data: number, length: number, mode: number, user: number, destroy: number): number;
  hb_blob_destroy(blob: number): void;
  hb_blob_get_data(blob: number, length: number): number;
  hb_blob_get_length(blob: number): number;
  hb_face_create(blob: number, index: number): number;
  hb_face_destroy(face: number): void;
  hb_face_reference_blob(face: number): number;
  hb_set_add(set: number, value: number): void;
  hb_subset_input_create_or_fail(): number;
  hb_subset_input_destroy(input: number): void;
  hb_subset_input_glyph_set(input: number): number;
  hb_subset_input_set(input: number, which: number): number;
  hb_subset_input_get_flags(input: number): number;
  hb_subset_input_set_flags(input: number, flags: number): void;
  hb_subset_or_fail(face: number, input: number): number;
  _initialize(): void;
}

const HB_MEMORY_MODE_READONLY = 1;
const HB_SUBSET_SETS_DROP_TABLE_TAG = 3;
const HB_SUBSET_FLAGS_NO_HINTING = 0x1;
const HB_SUBSET_FLAGS_RETAIN_GIDS = 0x2;
const HB_SUBSET_FLAGS_NOTDEF_OUTLINE = 0x40;
// The glyphs are shaped already: the subset needs outlines and metrics, not layout rules.
const DROP_TABLES = ['GSUB', 'GPOS', 'GDEF', 'BASE', 'JSTF', 'MATH', 'kern', 'morx', 'mort', 'kerx', 'vhea', 'vmtx', 'VORG', 'DSIG', 'COLR', 'CPAL', 'SVG ', 'sbix', 'CBDT', 'CBLC'];
const tag = (s: string) => ((s.charCodeAt(0) << 24) | (s.charCodeAt(1) << 16) | (s.charCodeAt(2) << 8) | s.charCodeAt(3)) >>> 0;

/** Per process: HarfBuzz, the subsetter, the bidi tables and the fonts read so far. */
class Engine {
  private readonly faces = new Map<FontKey, Face>();
  readonly buffer: InstanceType<HarfBuzz['Buffer']>;
  readonly bidi = bidiFactory();

  constructor(
    readonly hb: HarfBuzz,
    private readonly subsetter: SubsetExports,
  ) {
    this.buffer = new hb.Buffer();
  }

  face(key: FontKey): Face {
    let face = this.faces.get(key);
    if (face) return face;
    const bytes = new Uint8Array(fs.readFileSync(FONT_FILES[key]()));
    const hbFace = new this.hb.Face(new this.hb.Blob(bytes));
    const table = (name: string) => {
      const t = hbFace.referenceTable(name)?.slice(); // a view of wasm memory, which moves when it grows
      return t && t.length ? new DataView(t.buffer) : null;
    };
    const head = table('head');
    const hhea = table('hhea');
    const os2 = table('OS/2');
    const ascent = hhea ? hhea.getInt16(4) : hbFace.upem;
    face = {
      key,
      bytes,
      hbFace,
      font: new this.hb.Font(hbFace),
      upem: hbFace.upem,
      cmap: new Set(hbFace.collectUnicodes()),
      cff: !!table('CFF '),
      psName: (hbFace.getName(6, 'en') || key).replace(/[^\x21-\x7e]|[()<>[\]{}/%#]/g, ''),
      bbox: head ? [head.getInt16(36), head.getInt16(38), head.getInt16(40), head.getInt16(42)] : [0, 0, 0, 0],
      ascent,
      descent: hhea ? hhea.getInt16(6) : 0,
      capHeight: os2 && os2.byteLength >= 90 && os2.getUint16(0) >= 2 ? os2.getInt16(88) : ascent,
    };
    this.faces.set(key, face);
    return face;
  }

  /** The font with only `glyphs` (glyph IDs unchanged, the others empty). */
  subset(face: Face, glyphs: Iterable<number>): Uint8Array {
    const hb = this.subsetter;
    if (!face.subsetFace) {
      const data = hb.malloc(face.bytes.byteLength);
      new Uint8Array(hb.memory.buffer).set(face.bytes, data);
      const blob = hb.hb_blob_create(data, face.bytes.byteLength, HB_MEMORY_MODE_READONLY, 0, 0);
      face.subsetFace = hb.hb_face_create(blob, 0);
      hb.hb_blob_destroy(blob);
    }
    const input = hb.hb_subset_input_create_or_fail();
    if (!input) throw new Error('hb-subset: out of memory');
    try {
      const set = hb.hb_subset_input_glyph_set(input);
      hb.hb_set_add(set, 0);
      for (const gid of glyphs) hb.hb_set_add(set, gid);
      const drop = hb.hb_subset_input_set(input, HB_SUBSET_SETS_DROP_TABLE_TAG);
      for (const t of DROP_TABLES) hb.hb_set_add(drop, tag(t));
      hb.hb_subset_input_set_flags(
        input,
        hb.hb_subset_input_get_flags(input) | HB_SUBSET_FLAGS_RETAIN_GIDS | HB_SUBSET_FLAGS_NO_HINTING | HB_SUBSET_FLAGS_NOTDEF_OUTLINE,
      );
      const result = hb.hb_subset_or_fail(face.subsetFace, input);
      if (!result) throw new Error(`hb-subset could not subset ${face.key}`);
      const blob = hb.hb_face_reference_blob(result);
      const bytes = new Uint8Array(hb.memory.buffer, hb.hb_blob_get_data(blob, 0), hb.hb_blob_get_length(blob)).slice();
      hb.hb_blob_destroy(blob);
      hb.hb_face_destroy(result);
      return bytes;
    } finally {
      hb.hb_subset_input_destroy(input);
    }
  }
}

let engine: Promise<Engine> | null = null;
function loadEngine(): Promise<Engine> {
  engine ??= (async () => {
    const hb = await import('harfbuzzjs');
    const wasm = await WebAssembly.instantiate(fs.readFileSync(require.resolve('harfbuzzjs/dist/harfbuzz-subset.wasm')));
    const subsetter = wasm.instance.exports as unknown as SubsetExports;
    subsetter._initialize();
    return new Engine(hb, subsetter);
  })().catch((err) => {
    engine = null;
    throw err;
  });
  return engine;
}

/** A shaped piece: glyphs of one font at one bidi level, left to right on the page. */
interface Piece {
  face: Face;
  rtl: boolean;
  text: string;
  glyphs: Array<{ gid: number; cluster: number; ax: number; dx: number; dy: number }>;
  /** Advance in font units. */
  advance: number;
}

const segmenter = new Intl.Segmenter('und', { granularity: 'grapheme' });
// Format characters, variation selectors and tags: drawn by no font, they only steer the shaping.
const IGNORABLE = /[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\u{1bca0}-\u{1bca3}\u{1d173}-\u{1d17a}\u{e0000}-\u{e0fff}]/u;
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/** Draws text into one PDF; `finish()` writes its fonts before the PDF is saved. */
export class TextDrawer {
  private readonly used = new Map<FontKey, { face: Face; ref: PdfRef; dict: PdfDict; toUnicode: Map<number, string> }>();
  private readonly widths = new Map<string, number>();
  private resourceNames = new WeakMap<PDFPage, Map<FontKey, string>>();

  private constructor(
    private readonly engine: Engine,
    private readonly pdf: PDF,
  ) {}

  static async create(pdf: PDF): Promise<TextDrawer> {
    return new TextDrawer(await loadEngine(), pdf);
  }

  /** Controls become spaces (a line is one line). */
  static clean(text: string): string {
    return text.replace(CONTROL, ' ');
  }

  /** Width in points. */
  width(text: string, style: TextStyle, size: number): number {
    const key = `${style}\u0000${text}`;
    let em = this.widths.get(key);
    if (em === undefined) {
      em = this.layout(text, style).reduce((sum, p) => sum + p.advance / p.face.upem, 0);
      if (this.widths.size > 20_000) this.widths.clear();
      this.widths.set(key, em);
    }
    return em * size;
  }

  /** Draws one line with its left end at (x, y), the baseline. */
  draw(page: PDFPage, text: string, options: { x: number; y: number; size: number; style: TextStyle; color: Color }): void {
    const pieces = this.layout(text, options.style);
    if (!pieces.length) return;
    const { size, color } = options;
    const out = [ops.beginText(), colorOperator(color)];
    let x = options.x;
    for (const piece of pieces) {
      const font = this.fontFor(piece.face);
      const toUnicode = font.toUnicode;
      const actual = !this.mapGlyphs(piece, toUnicode);
      if (actual) out.push(ops.beginMarkedContentProps('/Span', PdfDict.of({ ActualText: PdfString.fromString(piece.text) })));
      out.push(ops.setFont(this.resourceName(page, piece.face.key, font.ref), size), ops.setTextMatrix(1, 0, 0, 1, round(x), round(options.y)));
      const k = 1000 / piece.face.upem;
      let pen = 0; // where the glyph should start, 1/1000 em
      let at = 0; // where the PDF's text position is, 1/1000 em
      let rise = 0;
      let array: Array<PdfString | PdfNumber> = [];
      let run: number[] = [];
      const flushRun = () => {
        if (run.length) array.push(PdfString.fromBytes(gidBytes(run)));
        run = [];
      };
      const flush = () => {
        flushRun();
        if (array.length) out.push(ops.showTextArray(new PdfArray(array)));
        array = [];
      };
      for (const g of piece.glyphs) {
        const wanted = pen + g.dx * k;
        const r = round((g.dy * k * size) / 1000);
        if (r !== rise) {
          flush();
          out.push(ops.setTextRise(r));
          rise = r;
        }
        const gap = round(wanted - at);
        if (gap !== 0) {
          flushRun();
          array.push(PdfNumber.of(-gap));
          at += gap;
        }
        run.push(g.gid);
        at += glyphWidth(piece.face, g.gid);
        pen += g.ax * k;
      }
      flush();
      if (rise) out.push(ops.setTextRise(0));
      if (actual) out.push(ops.endMarkedContent());
      x += (piece.advance / piece.face.upem) * size;
    }
    out.push(ops.endText());
    page.drawOperators(out);
  }

  /** Subsets every font used and writes its objects; call once, before saving. */
  finish(): void {
    for (const { face, dict, toUnicode } of this.used.values()) {
      const gids = [...toUnicode.keys()].sort((a, b) => a - b);
      const program = this.engine.subset(face, gids);
      const name = `${subsetTag(face, gids)}+${face.psName}`;
      const k = 1000 / face.upem;
      const fontFile = face.cff
        ? PdfStream.fromDict({ Subtype: PdfName.of('OpenType') }, program)
        : PdfStream.fromDict({ Length1: PdfNumber.of(program.length) }, program);
      const descriptor = this.pdf.register(
        PdfDict.of({
          Type: PdfName.of('FontDescriptor'),
          FontName: PdfName.of(name),
          Flags: PdfNumber.of(4),
          FontBBox: new PdfArray(face.bbox.map((v) => PdfNumber.of(Math.round(v * k)))),
          ItalicAngle: PdfNumber.of(0),
          Ascent: PdfNumber.of(Math.round(face.ascent * k)),
          Descent: PdfNumber.of(Math.round(face.descent * k)),
          CapHeight: PdfNumber.of(Math.round(face.capHeight * k)),
          StemV: PdfNumber.of(80),
          [face.cff ? 'FontFile3' : 'FontFile2']: this.pdf.register(fontFile),
        }),
      );
      const cidFont = PdfDict.of({
        Type: PdfName.of('Font'),
        Subtype: PdfName.of(face.cff ? 'CIDFontType0' : 'CIDFontType2'),
        BaseFont: PdfName.of(name),
        CIDSystemInfo: PdfDict.of({ Registry: PdfString.fromString('Adobe'), Ordering: PdfString.fromString('Identity'), Supplement: PdfNumber.of(0) }),
        FontDescriptor: descriptor,
        W: widthsArray(face, gids),
      });
      if (!face.cff) cidFont.set('CIDToGIDMap', PdfName.of('Identity'));
      dict.set('BaseFont', PdfName.of(name));
      dict.set('DescendantFonts', new PdfArray([this.pdf.register(cidFont)]));
      dict.set('ToUnicode', this.pdf.register(PdfStream.fromDict({}, toUnicodeCMap(toUnicode))));
    }
  }

  private fontFor(face: Face) {
    let font = this.used.get(face.key);
    if (!font) {
      const dict = PdfDict.of({ Type: PdfName.of('Font'), Subtype: PdfName.of('Type0'), Encoding: PdfName.of('Identity-H') });
      font = { face, dict, ref: this.pdf.register(dict), toUnicode: new Map() };
      this.used.set(face.key, font);
    }
    return font;
  }

  private resourceName(page: PDFPage, key: FontKey, ref: PdfRef): string {
    let names = this.resourceNames.get(page);
    if (!names) this.resourceNames.set(page, (names = new Map()));
    let name = names.get(key);
    if (!name) {
      const resources = page.getResources();
      let fonts = resources.get('Font');
      if (!(fonts instanceof PdfDict)) resources.set('Font', (fonts = new PdfDict()));
      name = `TxF${names.size}`;
      (fonts as PdfDict).set(name, ref);
      names.set(key, name);
    }
    return name;
  }

  /**
   * Records each glyph's characters for ToUnicode; true when they spell the piece's text exactly (one glyph
   * per cluster, each mapped to its own cluster), so no /ActualText is needed.
   */
  private mapGlyphs(piece: Piece, toUnicode: Map<number, string>): boolean {
    const logical = piece.rtl ? [...piece.glyphs].reverse() : piece.glyphs;
    const starts = [...new Set(logical.map((g) => g.cluster))].sort((a, b) => a - b);
    const end = (cluster: number) => starts[starts.indexOf(cluster) + 1] ?? piece.text.length;
    if (piece.rtl) {
      // Readers put right-to-left text back in logical order glyph by glyph, and poppler reverses an
      // /ActualText over such a piece: each cluster's text goes on its first glyph that is not a mark
      // (Arabic dots and vowel signs drawn as marks carry none).
      for (const cluster of starts) {
        const glyphs = logical.filter((g) => g.cluster === cluster);
        const carrier = glyphs.find((g) => piece.face.hbFace.getGlyphClass(g.gid) !== this.engine.hb.GlyphClass.MARK) ?? glyphs[0]!;
        for (const g of glyphs) {
          const known = toUnicode.get(g.gid);
          if (g === carrier && !known) toUnicode.set(g.gid, piece.text.slice(cluster, end(cluster)));
          else if (known === undefined) toUnicode.set(g.gid, '');
        }
      }
      return true;
    }
    let exact = true;
    const seen = new Set<number>();
    for (const g of logical) {
      const chars = piece.text.slice(g.cluster, end(g.cluster));
      if (seen.has(g.cluster)) {
        exact = false;
        if (!toUnicode.has(g.gid)) toUnicode.set(g.gid, '');
        continue;
      }
      seen.add(g.cluster);
      const known = toUnicode.get(g.gid);
      if (known === undefined || known === '') toUnicode.set(g.gid, chars);
      else if (known !== chars) exact = false;
    }
    return exact;
  }

  /** Shaped pieces of `text` in the order they appear on the page, left to right. */
  private layout(raw: string, style: TextStyle): Piece[] {
    const text = TextDrawer.clean(raw);
    if (!text) return [];
    const { levels } = this.engine.bidi.getEmbeddingLevels(text, 'ltr');
    const chain = CHAINS[style];
    const items: Array<{ start: number; end: number; face: Face; level: number }> = [];
    for (const { segment, index } of segmenter.segment(text)) {
      const level = levels[index] ?? 0;
      const prev = items.at(-1);
      const face = this.pick(segment, chain);
      if (prev && prev.face === face && prev.level === level) prev.end = index + segment.length;
      else items.push({ start: index, end: index + segment.length, face, level });
    }
    // Unicode bidi rule L2: from the highest level down to the lowest odd one, reverse every run at that level or above.
    const visual = [...items];
    const max = Math.max(...items.map((i) => i.level));
    const minOdd = Math.min(...items.map((i) => i.level).filter((l) => l % 2 === 1), Infinity);
    for (let level = max; level >= minOdd; level--) {
      for (let i = 0; i < visual.length; ) {
        if (visual[i]!.level < level) {
          i++;
          continue;
        }
        let j = i;
        while (j < visual.length && visual[j]!.level >= level) j++;
        visual.splice(i, j - i, ...visual.slice(i, j).reverse());
        i = j;
      }
    }
    return visual.map((item) => this.shape(text.slice(item.start, item.end), item.face, item.level % 2 === 1));
  }

  /** The script's own font or the first font of the chain with every character of the grapheme, else the first with its base character. */
  private pick(grapheme: string, chain: [FontKey, ...FontKey[]]): Face {
    const cps = [...grapheme].map((c) => c.codePointAt(0)!).filter((cp) => !IGNORABLE.test(String.fromCodePoint(cp)));
    if (!cps.length) return this.engine.face(chain[0]);
    const has = (face: Face) => cps.every((cp) => face.cmap.has(cp));
    const preferred = PREFERRED.find(([pattern]) => pattern.test(grapheme))?.[1];
    if (preferred && has(this.engine.face(preferred))) return this.engine.face(preferred);
    for (const key of chain) {
      const face = this.engine.face(key);
      if (has(face)) return face;
    }
    for (const key of chain) {
      const face = this.engine.face(key);
      if (face.cmap.has(cps[0]!)) return face;
    }
    return this.engine.face(chain[0]);
  }

  private shape(text: string, face: Face, rtl: boolean): Piece {
    const { hb, buffer } = this.engine;
    buffer.reset();
    buffer.addText(text);
    buffer.setDirection(rtl ? hb.Direction.RTL : hb.Direction.LTR);
    buffer.guessSegmentProperties();
    hb.shape(face.font, buffer);
    const infos = buffer.getGlyphInfos();
    const positions = buffer.getGlyphPositions();
    let advance = 0;
    const glyphs = infos.map((info, i) => {
      const p = positions[i]!;
      advance += p.xAdvance;
      return { gid: info.codepoint, cluster: info.cluster, ax: p.xAdvance, dx: p.xOffset, dy: p.yOffset };
    });
    return { face, rtl, text, glyphs, advance };
  }
}

const round = (v: number) => Math.round(v * 100) / 100;

function colorOperator(color: Color) {
  if (color.type === 'RGB') return ops.setNonStrokingRGB(color.red, color.green, color.blue);
  if (color.type === 'Grayscale') return ops.setNonStrokingGray(color.gray);
  return ops.setNonStrokingCMYK(color.cyan, color.magenta, color.yellow, color.black);
}

function gidBytes(gids: number[]): Uint8Array {
  const bytes = new Uint8Array(gids.length * 2);
  gids.forEach((g, i) => {
    bytes[2 * i] = g >> 8;
    bytes[2 * i + 1] = g & 0xff;
  });
  return bytes;
}

/** The glyph's advance as the PDF's /W array gives it, 1/1000 em. */
function glyphWidth(face: Face, gid: number): number {
  return Math.round((face.font.glyphHAdvance(gid) * 1000) / face.upem);
}

function widthsArray(face: Face, gids: number[]): PdfArray {
  const items: Array<PdfNumber | PdfArray> = [];
  for (let i = 0; i < gids.length; ) {
    let j = i;
    while (j + 1 < gids.length && gids[j + 1] === gids[j]! + 1) j++;
    items.push(PdfNumber.of(gids[i]!), new PdfArray(gids.slice(i, j + 1).map((g) => PdfNumber.of(glyphWidth(face, g)))));
    i = j + 1;
  }
  return new PdfArray(items);
}

const utf16Hex = (s: string) => [...s].map((c) => {
  const cp = c.codePointAt(0)!;
  const units = cp > 0xffff ? [0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff)] : [cp];
  return units.map((u) => u.toString(16).padStart(4, '0')).join('');
}).join('');

function toUnicodeCMap(map: Map<number, string>): Uint8Array {
  const entries = [...map].filter(([, s]) => s !== '').sort(([a], [b]) => a - b);
  const blocks: string[] = [];
  for (let i = 0; i < entries.length; i += 100) {
    const chunk = entries.slice(i, i + 100);
    blocks.push(`${chunk.length} beginbfchar\n${chunk.map(([g, s]) => `<${g.toString(16).padStart(4, '0')}> <${utf16Hex(s)}>`).join('\n')}\nendbfchar`);
  }
  const cmap = [
    '/CIDInit /ProcSet findresource begin',
    '12 dict begin',
    'begincmap',
    '/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def',
    '/CMapName /Adobe-Identity-UCS def',
    '/CMapType 2 def',
    '1 begincodespacerange',
    '<0000> <FFFF>',
    'endcodespacerange',
    ...blocks,
    'endcmap',
    'CMapName currentdict /CMap defineresource pop',
    'end',
    'end',
  ].join('\n');
  return new TextEncoder().encode(cmap);
}

/** Six capitals from the font and its glyphs, as PDF subset names have them (the same glyphs, the same tag). */
function subsetTag(face: Face, gids: number[]): string {
  const digest = createHash('sha256').update(`${face.key}:${gids.join(',')}`).digest();
  return [...digest.subarray(0, 6)].map((b) => String.fromCharCode(65 + (b % 26))).join('');
}
