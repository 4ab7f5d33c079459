/**
 * The signer's review page in the browser (bundled by esbuild on first use, served as
 * `/assets/signing/viewer.js`): renders the document's pages with pdf.js (pdfjs-dist's legacy build,
 * served by this service from node_modules: no CDN, and the page's Content-Security-Policy allows only
 * this origin's scripts and workers). Every page gets a placeholder of its size at once; a page is drawn
 * on a canvas when it comes near the screen (IntersectionObserver), so a long document costs little.
 * Without this script (or when the PDF cannot be drawn) the page still works: the download link and the
 * forms are plain HTML.
 */
import type * as PdfJs from 'pdfjs-dist';

const ASSETS = '/assets/signing/';
/** Pages this far below (or above) the visible part of the list are drawn ahead, so scrolling shows them ready. */
const AHEAD = '1200px 0px';
/** Drawn pages this far away give their canvas memory back (a phone cannot hold 500 drawn pages), and are drawn again when they come back. */
const KEEP = '6000px 0px';
/** Sharper than the screen's pixels is wasted memory. */
const MAX_RATIO = 2;

function say(status: HTMLElement, text: string): void {
  status.textContent = text;
}

async function loadPdfJs(): Promise<typeof PdfJs> {
  const url = `${ASSETS}pdf.mjs`;
  const pdfjs = (await import(url)) as typeof PdfJs;
  pdfjs.GlobalWorkerOptions.workerSrc = `${ASSETS}pdf.worker.mjs`;
  return pdfjs;
}

async function render(viewer: HTMLElement): Promise<void> {
  const status = viewer.querySelector<HTMLElement>('.viewer-status')!;
  const list = viewer.querySelector<HTMLOListElement>('ol.sheets')!;
  const src = viewer.dataset.document!;
  const pdfjs = await loadPdfJs();
  const doc = await pdfjs.getDocument({
    url: src,
    isEvalSupported: false, // the page's policy allows no eval; pdf.js draws fonts without it
    standardFontDataUrl: `${ASSETS}standard_fonts/`,
    cMapUrl: `${ASSETS}cmaps/`,
    cMapPacked: true,
    wasmUrl: `${ASSETS}wasm/`,
    enableXfa: false,
    disableAutoFetch: true,
  }).promise;
  const count = doc.numPages;
  const first = (await doc.getPage(1)).getViewport({ scale: 1 });
  const sheets: HTMLLIElement[] = [];
  for (let n = 1; n <= count; n++) {
    const li = document.createElement('li');
    li.className = 'sheet';
    li.dataset.page = String(n);
    // The first page's shape until a page is drawn (most documents have one page size).
    li.style.aspectRatio = `${first.width} / ${first.height}`;
    const canvas = document.createElement('canvas');
    canvas.setAttribute('role', 'img');
    canvas.setAttribute('aria-label', `Page ${n} of ${count}`);
    li.append(canvas);
    sheets.push(li);
  }
  list.replaceChildren(...sheets);
  viewer.dataset.pages = String(count);
  say(status, count === 1 ? '1 page' : `${count} pages`);

  let drawn = 0;
  const draw = async (li: HTMLLIElement) => {
    const n = Number(li.dataset.page);
    const page = await doc.getPage(n);
    const base = page.getViewport({ scale: 1 });
    const ratio = Math.min(window.devicePixelRatio || 1, MAX_RATIO);
    const width = Math.max(li.clientWidth, 200);
    const viewport = page.getViewport({ scale: (width / base.width) * ratio });
    const canvas = li.querySelector('canvas')!;
    canvas.width = Math.floor(viewport.width);
    canvas.height = Math.floor(viewport.height);
    li.style.aspectRatio = `${base.width} / ${base.height}`;
    await page.render({ canvas, viewport }).promise;
    li.dataset.rendered = 'true';
    drawn++;
    viewer.dataset.rendered = String(drawn);
    keeper.observe(li);
  };
  const release = (li: HTMLLIElement) => {
    keeper.unobserve(li);
    const canvas = li.querySelector('canvas')!;
    canvas.width = 0;
    canvas.height = 0;
    delete li.dataset.rendered;
    observer.observe(li);
  };
  const observer = new IntersectionObserver(
    (entries) => {
      for (const entry of entries) {
        if (!entry.isIntersecting) continue;
        const li = entry.target as HTMLLIElement;
        observer.unobserve(li);
        draw(li).catch(() => {
          li.dataset.rendered = 'failed';
          li.classList.add('failed');
        });
      }
    },
    // The pages scroll inside the list: draw those near its visible part.
    { root: list, rootMargin: AHEAD },
  );
  const keeper = new IntersectionObserver(
    (entries) => {
      for (const entry of entries) if (!entry.isIntersecting && (entry.target as HTMLElement).dataset.rendered === 'true') release(entry.target as HTMLLIElement);
    },
    { root: list, rootMargin: KEEP },
  );
  for (const li of sheets) observer.observe(li);
  const fields = readFields(viewer);
  if (fields.length) await placeFields(viewer, fields, sheets, (n) => doc.getPage(n));
}

// ---- the signer's fields on the pages ---------------------------------------------------------------

interface PlacedField {
  id: string;
  kind: 'signature' | 'initials' | 'name' | 'date' | 'text' | 'checkbox';
  page: number;
  x: number;
  y: number;
  width: number;
  height: number;
  required: boolean;
  label: string;
  /** The kind in words (the server's FIELD_KIND_WORDS). */
  words: string;
  /** Found from a text tag: the box hides the tag under it. */
  covers?: boolean;
}


function readFields(viewer: HTMLElement): PlacedField[] {
  try {
    const parsed: unknown = JSON.parse(viewer.dataset.fields ?? '[]');
    return Array.isArray(parsed) ? (parsed as PlacedField[]) : [];
  } catch {
    return [];
  }
}

const initialsOf = (name: string) =>
  name
    .split(/\s+/)
    .filter(Boolean)
    .map((w) => [...w][0]!.toUpperCase())
    .slice(0, 3)
    .join('');

/**
 * Boxes over the pages where the signer's fields are, filled as the signer types (the form below the
 * document holds the inputs; a box leads to its input, and "Next field" walks the required fields in
 * page order, top to bottom).
 */
async function placeFields(viewer: HTMLElement, fields: PlacedField[], sheets: HTMLLIElement[], page: (n: number) => Promise<PdfJs.PDFPageProxy>): Promise<void> {
  const typed = document.querySelector<HTMLInputElement>('#typed_name');
  const pad = document.querySelector<HTMLCanvasElement>('[data-pad]');
  const padValue = document.querySelector<HTMLInputElement>('[data-pad-value]');
  const guide = viewer.querySelector<HTMLElement>('[data-field-guide]');
  const count = viewer.querySelector<HTMLElement>('[data-field-count]');
  const next = viewer.querySelector<HTMLButtonElement>('[data-next-field]');
  const input = (f: PlacedField) => (f.kind === 'text' || f.kind === 'checkbox' ? document.querySelector<HTMLInputElement>(`#f-${CSS.escape(f.id)}`) : typed);
  // Reading order: page by page, top to bottom, left to right.
  const ordered = [...fields].sort((a, b) => a.page - b.page || b.y + b.height - (a.y + a.height) || a.x - b.x);
  const boxes = new Map<string, HTMLButtonElement>();
  const views = new Map<number, number[]>();
  for (const f of ordered) {
    const li = sheets[f.page - 1];
    if (!li) continue;
    if (!views.has(f.page)) views.set(f.page, (await page(f.page)).view);
    const [x0, y0, x1, y1] = views.get(f.page)!;
    const w = x1! - x0!;
    const h = y1! - y0!;
    const box = document.createElement('button');
    box.type = 'button';
    box.className = `field-box kind-${f.kind}${f.required ? ' required' : ''}${f.covers ? ' covers' : ''}`;
    box.dataset.fieldId = f.id;
    // Field positions count from the shown page's lower-left corner (pdf.js's view: the CropBox), as the editor and the archive do.
    box.style.left = `${(f.x / w) * 100}%`;
    box.style.top = `${(1 - (f.y + f.height) / h) * 100}%`;
    box.style.width = `${(f.width / w) * 100}%`;
    box.style.height = `${(f.height / h) * 100}%`;
    li.append(box);
    boxes.set(f.id, box);
    box.addEventListener('click', () => {
      const target = input(f);
      if (f.kind === 'checkbox' && target) {
        target.checked = !target.checked;
        target.dispatchEvent(new Event('change', { bubbles: true }));
      }
      go(f);
    });
  }

  const filled = (f: PlacedField): boolean => {
    const target = input(f);
    if (f.kind === 'checkbox') return Boolean(target?.checked);
    if (f.kind === 'text') return Boolean(target?.value.trim());
    return Boolean(typed?.value.trim()) || (f.kind === 'signature' && Boolean(padValue?.value));
  };
  const show = () => {
    const name = typed?.value.trim() ?? '';
    let done = 0;
    for (const f of ordered) {
      const box = boxes.get(f.id);
      if (!box) continue;
      const ok = filled(f);
      if (ok) done++;
      box.classList.toggle('filled', ok);
      const target = input(f);
      const words = f.label || f.words;
      box.setAttribute('aria-label', `${words}, page ${f.page}${f.required ? ', required' : ''}${ok ? ', filled' : ''}`);
      let content: Node;
      if (f.kind === 'signature' && padValue?.value && pad) {
        const mini = document.createElement('canvas');
        mini.width = pad.width;
        mini.height = pad.height;
        mini.getContext('2d')?.drawImage(pad, 0, 0);
        content = mini;
      } else {
        const text =
          f.kind === 'checkbox' ? (target?.checked ? '✓' : words)
          : f.kind === 'text' ? target?.value.trim() || words
          : f.kind === 'date' ? (name ? new Date().toISOString().slice(0, 10) : words)
          : f.kind === 'initials' ? (name ? initialsOf(name) : words)
          : name || words;
        const span = document.createElement('span');
        span.className = `value${(f.kind === 'signature' || f.kind === 'initials') && name ? ' script' : ''}`;
        span.textContent = text;
        content = span;
      }
      box.replaceChildren(content);
    }
    const required = ordered.filter((f) => f.required);
    const left = required.filter((f) => !filled(f)).length;
    if (count) count.textContent = left ? `${left} of ${required.length} required field${required.length === 1 ? '' : 's'} left` : `All ${ordered.length} field${ordered.length === 1 ? '' : 's'} filled`;
    if (next) next.textContent = left ? (done || current ? 'Next field' : 'Start: first field') : 'Go to Sign';
  };

  let current: PlacedField | null = null;
  function go(f: PlacedField): void {
    current = f;
    for (const b of boxes.values()) b.classList.remove('current');
    const box = boxes.get(f.id);
    box?.classList.add('current');
    box?.scrollIntoView({ block: 'center', behavior: 'smooth' });
    // The input takes the typing (the box shows it) without scrolling the document away.
    input(f)?.focus({ preventScroll: true });
  }
  next?.addEventListener('click', () => {
    const from = current ? ordered.indexOf(current) : -1;
    const pending = ordered.filter((f) => f.required && !filled(f));
    const after = pending.find((f) => ordered.indexOf(f) > from) ?? pending[0];
    if (after) return go(after);
    current = null;
    for (const b of boxes.values()) b.classList.remove('current');
    document.querySelector<HTMLElement>('#sign')?.scrollIntoView({ block: 'start' });
    document.querySelector<HTMLInputElement>('#agree')?.focus({ preventScroll: true });
  });
  document.querySelector('#sign-form')?.addEventListener('input', show);
  document.querySelector('#sign-form')?.addEventListener('change', show);
  document.addEventListener('wso:drawn', show);
  if (guide) guide.hidden = false;
  show();
}

// ---- the drawn signature -----------------------------------------------------------------------------

/** The pad: strokes drawn with a mouse, pen or finger, kept in the hidden input as JSON (see drawnSignature.ts). */
function signaturePad(): void {
  const holder = document.querySelector<HTMLElement>('[data-pad-field]');
  const pad = document.querySelector<HTMLCanvasElement>('[data-pad]');
  const value = document.querySelector<HTMLInputElement>('[data-pad-value]');
  const clear = document.querySelector<HTMLButtonElement>('[data-pad-clear]');
  if (!holder || !pad || !value) return;
  const ctx = pad.getContext('2d');
  if (!ctx) return;
  holder.hidden = false;
  let strokes: number[][] = [];
  try {
    const kept = JSON.parse(value.value || 'null') as { strokes?: number[][] } | null;
    if (kept && Array.isArray(kept.strokes)) strokes = kept.strokes;
  } catch {
    strokes = [];
  }
  const paint = () => {
    // Nothing to clear on an empty pad: the button is not in the way of keyboard users until then.
    if (clear) clear.hidden = strokes.length === 0;
    ctx.clearRect(0, 0, pad.width, pad.height);
    ctx.lineWidth = 3;
    ctx.lineCap = 'round';
    ctx.lineJoin = 'round';
    ctx.strokeStyle = '#0b2a73';
    for (const s of strokes) {
      ctx.beginPath();
      ctx.moveTo(s[0]!, s[1]!);
      if (s.length === 2) ctx.lineTo(s[0]!, s[1]!);
      for (let i = 2; i < s.length; i += 2) ctx.lineTo(s[i]!, s[i + 1]!);
      ctx.stroke();
    }
  };
  const save = () => {
    const points = strokes.reduce((n, s) => n + s.length / 2, 0);
    value.value = points >= 2 ? JSON.stringify({ w: pad.width, h: pad.height, strokes }) : '';
    document.dispatchEvent(new Event('wso:drawn'));
  };
  const at = (e: PointerEvent): [number, number] => {
    const r = pad.getBoundingClientRect();
    const x = Math.round(((e.clientX - r.left) / r.width) * pad.width);
    const y = Math.round(((e.clientY - r.top) / r.height) * pad.height);
    return [Math.min(Math.max(x, 0), pad.width), Math.min(Math.max(y, 0), pad.height)];
  };
  let drawing: number[] | null = null;
  pad.addEventListener('pointerdown', (e) => {
    if (strokes.length >= 100) return;
    e.preventDefault();
    pad.setPointerCapture(e.pointerId);
    drawing = [...at(e)];
    strokes.push(drawing);
    paint();
  });
  pad.addEventListener('pointermove', (e) => {
    if (!drawing) return;
    const [x, y] = at(e);
    // Points closer than 2 pixels add nothing but size.
    if (Math.abs(x - drawing[drawing.length - 2]!) + Math.abs(y - drawing[drawing.length - 1]!) < 2) return;
    if (strokes.reduce((n, s) => n + s.length / 2, 0) >= 4000) return;
    drawing.push(x, y);
    paint();
  });
  const end = () => {
    if (!drawing) return;
    drawing = null;
    save();
  };
  pad.addEventListener('pointerup', end);
  pad.addEventListener('pointercancel', end);
  clear?.addEventListener('click', () => {
    strokes = [];
    paint();
    save();
  });
  paint();
}

signaturePad();
const viewer = document.querySelector<HTMLElement>('[data-document]');
if (viewer) {
  render(viewer).catch(() => {
    viewer.dataset.pages = 'failed';
    say(viewer.querySelector<HTMLElement>('.viewer-status')!, 'The pages cannot be shown in this browser. Download the document to read it before you sign.');
  });
}
