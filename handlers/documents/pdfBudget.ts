/**
 * The parse budget of the PDF checking thread (pdfGuardWorker.ts): every stream @libpdf/core decodes
 * (cross-reference streams, object streams, anything a check reads) is counted against a cap on the
 * bytes decoded and on the objects declared, and a decode that would pass the cap stops before it
 * allocates the rest. Installed once per thread by `installBudget`, which checks that its hooks took.
 *
 * How: @libpdf/core decodes every stream through `PdfStream.prototype.getDecodedData` (wrapped here),
 * and its FlateDecode filter calls `pako.inflate` / `new pako.Inflate()` of its own pako copy (replaced
 * here: the inflated size is counted first, chunk by chunk and thrown away, then zlib inflates with
 * `maxOutputLength`, so a deflate bomb stops at the cap before its bytes exist).
 * LZW and RunLength expand too: their output size is computed from their input before they run.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import zlib from 'node:zlib';
import { PdfArray, PdfDict, PdfName, PdfNumber, PdfStream } from '@libpdf/core';

/** Thrown (and remembered: the parser swallows some errors) when a parse passes its budget. */
export class BudgetExceeded extends Error {
  constructor(readonly what: 'bytes' | 'objects', message: string) {
    super(message);
    this.name = 'BudgetExceeded';
  }
}

interface Budget {
  maxBytes: number;
  maxObjects: number;
  bytes: number;
  objects: number;
  exceeded: BudgetExceeded | null;
}

let current: Budget | null = null;

export const mib = (n: number) => `${Math.round(n / 1048576)} MiB`;

function exceed(what: 'bytes' | 'objects', message: string): never {
  const err = new BudgetExceeded(what, message);
  if (current && !current.exceeded) current.exceeded = err;
  throw current?.exceeded ?? err;
}

function assertOpen(): void {
  if (current?.exceeded) throw current.exceeded;
}

/** Counts `n` decoded bytes; throws once the parse has decoded more than its cap. */
function spend(n: number): void {
  if (!current) return;
  current.bytes += n;
  if (current.bytes > current.maxBytes) exceed('bytes', `its compressed streams expand to more than ${mib(current.maxBytes)}`);
}

function remaining(): number {
  return current ? Math.max(0, current.maxBytes - current.bytes) : Number.MAX_SAFE_INTEGER;
}

/** Counts objects declared by an object stream (/N) or a cross-reference stream (/Size). */
export function countObjects(n: number): void {
  if (!current) return;
  current.objects += n;
  if (current.objects > current.maxObjects) exceed('objects', `it declares more than ${current.maxObjects.toLocaleString('en-US')} objects`);
}

/** A cross-reference section's /Size: the objects the file declares in all. */
export function declaredObjects(n: number): void {
  if (current && n > current.maxObjects) exceed('objects', `it declares ${n.toLocaleString('en-US')} objects, more than ${current.maxObjects.toLocaleString('en-US')}`);
}

/** Runs `fn` with a fresh budget; answers its result, or the BudgetExceeded it ran into (even one the parser swallowed). */
export async function withBudget<T>(limits: { maxBytes: number; maxObjects: number }, fn: () => Promise<T>): Promise<T> {
  const budget: Budget = { ...limits, bytes: 0, objects: 0, exceeded: null };
  current = budget;
  try {
    const out = await fn();
    if (budget.exceeded) throw budget.exceeded;
    return out;
  } catch (err) {
    throw budget.exceeded ?? err;
  } finally {
    current = null;
  }
}

/** What the budget spent so far (for the bench and tests). */
export const spent = () => ({ bytes: current?.bytes ?? 0, objects: current?.objects ?? 0 });

/** RunLengthDecode's output size, read from its input without decoding. */
function runLengthSize(data: Uint8Array): number {
  let out = 0;
  let i = 0;
  while (i < data.length) {
    const len = data[i++]!;
    if (len === 128) break;
    if (len < 128) {
      const n = Math.min(len + 1, data.length - i);
      out += n;
      i += n;
    } else {
      out += 257 - len;
      i++;
    }
  }
  return out;
}

/** LZWDecode's output size (as @libpdf/core decodes it): entry lengths only, no bytes. */
function lzwSize(data: Uint8Array, earlyChange: number): number {
  const lengths = new Int32Array(4096);
  lengths.fill(1, 0, 256);
  let bitPos = 0;
  let codeLength = 9;
  let nextCode = 258;
  let prev = -1;
  let out = 0;
  const totalBits = data.length * 8;
  for (;;) {
    if (bitPos + codeLength > totalBits) break;
    let code = 0;
    for (let k = 0; k < codeLength; k++, bitPos++) code = (code << 1) | ((data[bitPos >> 3]! >> (7 - (bitPos & 7))) & 1);
    if (code === 257) break;
    if (code === 256) {
      codeLength = 9;
      nextCode = 258;
      prev = -1;
      continue;
    }
    let len: number;
    if (code < nextCode) len = lengths[code]!;
    else if (code === nextCode && prev >= 0) len = prev + 1;
    else break;
    out += len;
    if (prev >= 0 && nextCode < 4096) {
      lengths[nextCode] = prev + 1;
      nextCode++;
      const threshold = earlyChange === 1 ? nextCode : nextCode - 1;
      if (threshold === 512 && codeLength < 10) codeLength = 10;
      else if (threshold === 1024 && codeLength < 11) codeLength = 11;
      else if (threshold === 2048 && codeLength < 12) codeLength = 12;
    }
    prev = len;
    if (out > remaining()) break;
  }
  return out;
}

const nameOf = (o: unknown) => (o instanceof PdfName ? o.value : undefined);

/** The stream's filters and their parameters, as /Filter and /DecodeParms list them. */
function filtersOf(stream: PdfStream): Array<{ name: string; params: unknown }> {
  const f = stream.get('Filter');
  const p = stream.get('DecodeParms');
  const names = f instanceof PdfArray ? f.toArray().map(nameOf) : [nameOf(f)];
  const params = p instanceof PdfArray ? p.toArray() : [p];
  return names.map((name, i) => ({ name: name ?? '', params: params[i] }));
}

let installed = false;

/** Hooks the budget into @libpdf/core's stream decoding (once per thread) and checks that the hooks work. */
export async function installBudget(): Promise<void> {
  if (installed) return;
  // @libpdf/core imports its own pako; the hook must replace that copy's functions, so it is found the way the library finds it.
  const libpdfRequire = createRequire(fileURLToPath(import.meta.resolve('@libpdf/core')));
  const pakoDir = path.dirname(libpdfRequire.resolve('pako/package.json'));
  const pako = (await import(pathToFileURL(path.join(pakoDir, 'dist/pako.esm.mjs')).href)).default as {
    inflate: (data: Uint8Array) => Uint8Array | undefined;
    Inflate: new (options?: object) => { onData(chunk: Uint8Array): void; push(data: Uint8Array, mode?: boolean): boolean };
  };
  const PakoInflate = pako.Inflate;
  /** The inflated size of `data`, counted chunk by chunk and thrown away, stopping once it passes `limit`. */
  const inflatedSize = (data: Uint8Array, limit: number): number => {
    let n = 0;
    const stop = new Error('over the limit');
    const counter = new PakoInflate({ chunkSize: 256 * 1024 });
    counter.onData = (chunk: Uint8Array) => {
      n += chunk.length;
      if (n > limit) throw stop;
    };
    try {
      counter.push(data, true);
    } catch (err) {
      if (err !== stop) throw err;
    }
    return n;
  };
  pako.inflate = (data: Uint8Array) => {
    assertOpen();
    // Counted first with a small window of memory: a bomb is refused before its bytes exist.
    const size = inflatedSize(data, remaining());
    if (size > remaining()) spend(size);
    let out: Buffer;
    try {
      // Z_SYNC_FLUSH: a stream without a final block (PDFium writes those) gives what it holds, as pako does.
      out = zlib.inflateSync(data, { maxOutputLength: Math.max(1, remaining()), finishFlush: zlib.constants.Z_SYNC_FLUSH });
    } catch (err) {
      if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' || err instanceof RangeError) spend(remaining() + 1);
      throw err;
    }
    spend(out.length);
    return new Uint8Array(out.buffer, out.byteOffset, out.length);
  };
  // The library's fallback for a stream zlib refuses: pako's streaming inflater, counted chunk by chunk.
  pako.Inflate = class CountedInflate extends PakoInflate {
    override onData(chunk: Uint8Array) {
      spend(chunk.length);
      super.onData(chunk);
    }
    override push(data: Uint8Array, mode?: boolean) {
      assertOpen();
      return super.push(data, mode);
    }
  } as typeof PakoInflate;

  const decode = PdfStream.prototype.getDecodedData;
  PdfStream.prototype.getDecodedData = function (this: PdfStream): Uint8Array {
    assertOpen();
    const type = nameOf(this.get('Type'));
    if (type === 'ObjStm') countObjects(this.getNumber('N')?.value ?? 0);
    if (type === 'XRef') declaredObjects(this.getNumber('Size')?.value ?? 0);
    const filters = filtersOf(this);
    if (!filters.some((f) => f.name === 'LZWDecode' || f.name === 'RunLengthDecode')) return decode.call(this);
    // A chain with an expanding filter runs one filter at a time, each one's output size checked first.
    let data = this.data;
    for (const f of filters) {
      const step = new PdfStream([['Filter', PdfName.of(f.name)], ...(f.params instanceof PdfDict ? [['DecodeParms', f.params] as [string, PdfDict]] : [])], data);
      if (f.name === 'RunLengthDecode' || f.name === 'LZWDecode') {
        const early = f.params instanceof PdfDict ? (f.params.get('EarlyChange') instanceof PdfNumber ? (f.params.get('EarlyChange') as PdfNumber).value : 1) : 1;
        const size = f.name === 'RunLengthDecode' ? runLengthSize(data) : lzwSize(data, early);
        if (size > remaining()) spend(size);
        data = decode.call(step);
        spend(data.length);
      } else data = decode.call(step);
    }
    return data;
  };
  installed = true;

  // The hooks must hold for this library version: a 64 KiB deflate stream against a 1 KiB budget must stop.
  const probe = new PdfStream([['Filter', PdfName.of('FlateDecode')]], zlib.deflateSync(Buffer.alloc(65536)));
  let held = false;
  try {
    await withBudget({ maxBytes: 1024, maxObjects: 10 }, async () => probe.getDecodedData());
  } catch (err) {
    held = err instanceof BudgetExceeded;
  }
  if (!held) throw new Error('the PDF parse budget could not be installed (the @libpdf/core or pako version changed); refusing to parse without it');
}
