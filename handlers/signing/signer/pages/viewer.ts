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
}

const viewer = document.querySelector<HTMLElement>('[data-document]');
if (viewer) {
  render(viewer).catch(() => {
    viewer.dataset.pages = 'failed';
    say(viewer.querySelector<HTMLElement>('.viewer-status')!, 'The pages cannot be shown in this browser. Download the document to read it before you sign.');
  });
}
