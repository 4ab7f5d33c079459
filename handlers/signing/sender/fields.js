// The field editor of the send page (GET /documents/new): the uploaded PDF's pages drawn by pdf.js (the
// same copy of pdfjs-dist the signer's page uses, served by this service), and on them the fields each
// signer fills: signature, initials, name, date signed, text and check box. A field is added on the page
// in view, then dragged (pointer: mouse, pen or finger), resized by its corner handle, or moved and sized
// from the keyboard (arrows move it by 2 points, with Shift by 10; with Alt they change its size; Delete
// removes it). The placed fields are kept in the form's hidden `fields` input as JSON, in the shape of
// signing.RequestFileSignatures' `fields` (PDF points from each page's lower-left corner), so the page
// sends exactly what an API caller would. Without JavaScript the section stays hidden and a request is
// sent without fields, as through the API.

const editor = document.querySelector('[data-field-editor]');
const form = document.querySelector('[data-send-form]');
if (editor && form) {
  const ASSETS = '/assets/signing/';
  const KINDS = {
    signature: { words: 'Signature', w: 180, h: 44 },
    initials: { words: 'Initials', w: 64, h: 36 },
    name: { words: 'Name', w: 180, h: 22 },
    date: { words: 'Date signed', w: 110, h: 22 },
    text: { words: 'Text', w: 180, h: 22 },
    checkbox: { words: 'Check box', w: 16, h: 16 },
  };
  const MAX_FIELDS = 50;
  const output = form.querySelector('[data-fields-value]');
  const list = editor.querySelector('[data-field-pages]');
  const status = editor.querySelector('[data-field-status]');
  const placedList = editor.querySelector('[data-field-list]');
  const forSigner = editor.querySelector('[data-field-signer]');
  const props = editor.querySelector('[data-field-props]');
  const owner = editor.querySelector('[data-field-owner]');
  const propLabel = editor.querySelector('[data-field-label]');
  const propRequired = editor.querySelector('[data-field-required]');
  const propRemove = editor.querySelector('[data-field-remove]');
  const rows = form.querySelector('[data-signers]');

  /** @type {{signer:number, kind:string, page:number, x:number, y:number, width:number, height:number, required?:boolean, label?:string}[]} */
  let fields = [];
  try {
    const kept = JSON.parse(output.value || '[]');
    if (Array.isArray(kept)) fields = kept;
  } catch {
    fields = [];
  }
  /** Each page's box in points ([x0, y0, x1, y1]) and its list item, once the document is open. */
  let pages = [];
  let selected = -1;
  /** The file's `{{...}}` text tags (documents.CompleteUpload's text_tags): shown, and used by the request when no field is placed here. */
  let tags = [];

  const say = (text) => {
    status.textContent = text;
  };
  const round = (n) => Math.round(n * 10) / 10;
  const signerNames = () =>
    [...rows.querySelectorAll('.signer-row')].map((row, i) => {
      const name = row.querySelector('input[name="signer_name"]').value.trim();
      return name ? `${i + 1}. ${name}` : `Signer ${i + 1}`;
    });

  function save() {
    output.value = fields.length ? JSON.stringify(fields) : '';
  }

  /** The signer choices, following the signer rows as they are typed, added and removed. */
  function refreshSigners() {
    const names = signerNames();
    const keep = Number(forSigner.value) || 0;
    forSigner.replaceChildren(...names.map((name, i) => new Option(name, String(i), false, i === Math.min(keep, names.length - 1))));
    owner.replaceChildren(...names.map((name, i) => new Option(name, String(i))));
    draw();
  }

  function clamp(f) {
    const page = pages[f.page - 1];
    if (!page) return;
    const [x0, y0, x1, y1] = page.view;
    const w = x1 - x0;
    const h = y1 - y0;
    f.width = round(Math.min(Math.max(f.width, 4), w));
    f.height = round(Math.min(Math.max(f.height, 4), h));
    f.x = round(Math.min(Math.max(f.x, 0), w - f.width));
    f.y = round(Math.min(Math.max(f.y, 0), h - f.height));
  }

  const describe = (f) => `${f.label || KINDS[f.kind].words} for ${signerNames()[f.signer] ?? `signer ${f.signer + 1} (no longer listed)`}, page ${f.page}`;

  /** Draws every field's box on its page and the list of fields below the pages. */
  function draw() {
    for (const page of pages) for (const box of page.li.querySelectorAll('.field-box, .tag-box')) box.remove();
    // The document's own tags, outlined (they place the fields when none is placed here).
    for (const t of fields.length ? [] : tags) {
      const page = pages[t.page - 1];
      if (!page) continue;
      const [x0, y0, x1, y1] = page.view;
      const mark = document.createElement('span');
      mark.className = 'tag-box';
      mark.title = t.text;
      mark.style.left = `${(t.x / (x1 - x0)) * 100}%`;
      mark.style.top = `${(1 - (t.y + t.height) / (y1 - y0)) * 100}%`;
      mark.style.width = `${(t.width / (x1 - x0)) * 100}%`;
      mark.style.height = `${(t.height / (y1 - y0)) * 100}%`;
      page.li.append(mark);
    }
    const count = signerNames().length;
    fields.forEach((f, i) => {
      const page = pages[f.page - 1];
      if (!page) return;
      const [x0, y0, x1, y1] = page.view;
      const w = x1 - x0;
      const h = y1 - y0;
      const box = document.createElement('div');
      box.className = `field-box signer-${f.signer % 10}${i === selected ? ' selected' : ''}${f.signer >= count ? ' orphan' : ''}`;
      box.tabIndex = 0;
      box.dataset.index = String(i);
      box.setAttribute('role', 'button');
      box.setAttribute('aria-label', `${describe(f)}. Arrows move it, Alt and arrows resize it, Delete removes it.`);
      box.style.left = `${(f.x / w) * 100}%`;
      box.style.top = `${(1 - (f.y + f.height) / h) * 100}%`;
      box.style.width = `${(f.width / w) * 100}%`;
      box.style.height = `${(f.height / h) * 100}%`;
      const text = document.createElement('span');
      text.textContent = f.kind === 'checkbox' ? '☐' : `${f.label || KINDS[f.kind].words}`;
      const handle = document.createElement('span');
      handle.className = 'handle';
      handle.setAttribute('aria-hidden', 'true');
      box.append(text, handle);
      page.li.append(box);
    });
    placedList.replaceChildren(
      ...fields.map((f, i) => {
        const li = document.createElement('li');
        const pick = document.createElement('button');
        pick.type = 'button';
        pick.className = 'link-like';
        pick.dataset.pick = String(i);
        pick.textContent = describe(f);
        const remove = document.createElement('button');
        remove.type = 'button';
        remove.dataset.removeField = String(i);
        remove.textContent = 'Remove';
        remove.setAttribute('aria-label', `Remove ${describe(f)}`);
        li.append(pick, ' ', remove);
        return li;
      }),
    );
    props.hidden = selected < 0;
    if (selected >= 0) {
      const f = fields[selected];
      const fills = f.kind === 'text' || f.kind === 'checkbox';
      propLabel.closest('label').hidden = !fills;
      propRequired.closest('label').hidden = !fills;
      if (document.activeElement !== propLabel) propLabel.value = f.label ?? '';
      propRequired.checked = f.required !== false;
      owner.value = String(Math.min(f.signer, count - 1));
    }
    say(
      fields.length ? `${fields.length} field${fields.length === 1 ? '' : 's'} placed${tags.length ? ': they replace the document’s own text tags' : ''}.`
      : tags.length ? `This PDF has ${tags.length} text tag${tags.length === 1 ? '' : 's'} ({{…}}, outlined on the pages). With no field placed here, the request takes its fields from them, e.g. {{signature;signer=1}}.`
      : 'No fields yet: each signer’s signature then goes on the evidence pages only.',
    );
    save();
  }

  function select(i, focus) {
    selected = i;
    draw();
    if (focus && i >= 0) editor.querySelector(`.field-box[data-index="${i}"]`)?.focus({ preventScroll: false });
  }

  /** The page most in view in the pages' list (1 when none is). */
  function pageInView() {
    const area = list.getBoundingClientRect();
    let best = 1;
    let most = 0;
    for (const [i, page] of pages.entries()) {
      const r = page.li.getBoundingClientRect();
      const seen = Math.min(r.bottom, area.bottom) - Math.max(r.top, area.top);
      if (seen > most) {
        most = seen;
        best = i + 1;
      }
    }
    return best;
  }

  function add(kind) {
    if (!pages.length) return say('Upload the PDF first: its pages show here.');
    if (fields.length >= MAX_FIELDS) return say(`A request has at most ${MAX_FIELDS} fields.`);
    const n = pageInView();
    const [x0, y0, x1, y1] = pages[n - 1].view;
    const size = KINDS[kind];
    // Each new field a little lower than the last one added to the page, so none hides another.
    const onPage = fields.filter((f) => f.page === n).length;
    const f = { signer: Number(forSigner.value) || 0, kind, page: n, x: (x1 - x0 - size.w) / 2, y: (y1 - y0) / 2 - onPage * (size.h + 8), width: size.w, height: size.h };
    if (kind === 'text' || kind === 'checkbox') f.required = true;
    clamp(f);
    fields.push(f);
    select(fields.length - 1, true);
    say(`${describe(f)} added: drag it into place, or move it with the arrow keys.`);
  }

  editor.addEventListener('click', (e) => {
    const kind = e.target.closest('[data-add-field]')?.dataset.addField;
    if (kind) return add(kind);
    const pick = e.target.closest('[data-pick]');
    if (pick) return select(Number(pick.dataset.pick), true);
    const remove = e.target.closest('[data-remove-field]');
    if (remove) {
      fields.splice(Number(remove.dataset.removeField), 1);
      selected = -1;
      draw();
    }
  });
  propRemove.addEventListener('click', () => {
    if (selected < 0) return;
    fields.splice(selected, 1);
    selected = -1;
    draw();
    say('Field removed.');
  });
  owner.addEventListener('change', () => {
    if (selected < 0) return;
    fields[selected].signer = Number(owner.value);
    draw();
  });
  propLabel.addEventListener('input', () => {
    if (selected < 0) return;
    const label = propLabel.value.trim().slice(0, 100);
    if (label) fields[selected].label = label;
    else delete fields[selected].label;
    draw();
  });
  propRequired.addEventListener('change', () => {
    if (selected < 0) return;
    fields[selected].required = propRequired.checked;
    draw();
  });
  rows.addEventListener('input', refreshSigners);
  new MutationObserver(refreshSigners).observe(rows, { childList: true });

  // Keyboard: arrows move (Shift: further), Alt + arrows resize, Delete removes.
  list.addEventListener('keydown', (e) => {
    const box = e.target.closest('.field-box');
    if (!box) return;
    const i = Number(box.dataset.index);
    const f = fields[i];
    if (e.key === 'Delete' || e.key === 'Backspace') {
      e.preventDefault();
      fields.splice(i, 1);
      selected = -1;
      draw();
      say('Field removed.');
      return;
    }
    const step = e.shiftKey ? 10 : 2;
    const d = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, step], ArrowDown: [0, -step] }[e.key];
    if (!d) return;
    e.preventDefault();
    if (e.altKey) {
      f.width += d[0];
      // Taller with ArrowDown, as on the screen: the top edge stays where it is.
      const top = f.y + f.height;
      f.height -= d[1];
      f.y = top - f.height;
    } else {
      f.x += d[0];
      f.y += d[1];
    }
    clamp(f);
    select(i, true);
  });

  // Pointer: drag a box to move it, its corner handle to resize it.
  let drag = null;
  list.addEventListener('pointerdown', (e) => {
    const box = e.target.closest('.field-box');
    if (!box) return;
    e.preventDefault();
    const i = Number(box.dataset.index);
    const f = fields[i];
    const li = box.parentElement;
    const page = pages[f.page - 1];
    const scale = li.getBoundingClientRect().width / (page.view[2] - page.view[0]);
    drag = { i, resize: e.target.classList.contains('handle'), x: e.clientX, y: e.clientY, start: { ...f }, scale, pointer: e.pointerId };
    select(i, true);
  });
  window.addEventListener('pointermove', (e) => {
    if (!drag || e.pointerId !== drag.pointer) return;
    const f = fields[drag.i];
    const dx = (e.clientX - drag.x) / drag.scale;
    const dy = (e.clientY - drag.y) / drag.scale;
    if (drag.resize) {
      f.width = drag.start.width + dx;
      f.height = drag.start.height + dy;
      f.y = drag.start.y + drag.start.height - f.height;
    } else {
      f.x = drag.start.x + dx;
      f.y = drag.start.y - dy;
    }
    clamp(f);
    // Only the dragged box moves while dragging; the whole editor redraws when it is dropped.
    const box = list.querySelector(`.field-box[data-index="${drag.i}"]`);
    const [x0, y0, x1, y1] = pages[f.page - 1].view;
    box.style.left = `${(f.x / (x1 - x0)) * 100}%`;
    box.style.top = `${(1 - (f.y + f.height) / (y1 - y0)) * 100}%`;
    box.style.width = `${(f.width / (x1 - x0)) * 100}%`;
    box.style.height = `${(f.height / (y1 - y0)) * 100}%`;
  });
  const drop = (e) => {
    if (!drag || e.pointerId !== drag.pointer) return;
    const i = drag.i;
    drag = null;
    select(i, true);
  };
  window.addEventListener('pointerup', drop);
  window.addEventListener('pointercancel', drop);

  /** Opens the chosen PDF (the File the sender dropped) and lays out its pages, each drawn when near the view. */
  async function open(file) {
    say('Drawing the pages…');
    const pdfjs = await import(`${ASSETS}pdf.mjs`);
    pdfjs.GlobalWorkerOptions.workerSrc = `${ASSETS}pdf.worker.mjs`;
    const doc = await pdfjs.getDocument({
      data: new Uint8Array(await file.arrayBuffer()),
      isEvalSupported: false,
      standardFontDataUrl: `${ASSETS}standard_fonts/`,
      cMapUrl: `${ASSETS}cmaps/`,
      cMapPacked: true,
      wasmUrl: `${ASSETS}wasm/`,
      enableXfa: false,
    }).promise;
    pages = [];
    const items = [];
    for (let n = 1; n <= doc.numPages; n++) {
      const page = await doc.getPage(n);
      const li = document.createElement('li');
      li.className = 'sheet';
      li.dataset.page = String(n);
      const [x0, y0, x1, y1] = page.view;
      li.style.aspectRatio = `${x1 - x0} / ${y1 - y0}`;
      const canvas = document.createElement('canvas');
      canvas.setAttribute('role', 'img');
      canvas.setAttribute('aria-label', `Page ${n} of ${doc.numPages}`);
      li.append(canvas);
      items.push(li);
      pages.push({ view: page.view, li, page });
    }
    list.replaceChildren(...items);
    const observer = new IntersectionObserver(
      (entries) => {
        for (const entry of entries) {
          if (!entry.isIntersecting) continue;
          observer.unobserve(entry.target);
          const { page, li } = pages[Number(entry.target.dataset.page) - 1];
          const base = page.getViewport({ scale: 1 });
          const ratio = Math.min(window.devicePixelRatio || 1, 2);
          const viewport = page.getViewport({ scale: (Math.max(li.clientWidth, 200) / base.width) * ratio });
          const canvas = li.querySelector('canvas');
          canvas.width = Math.floor(viewport.width);
          canvas.height = Math.floor(viewport.height);
          page.render({ canvas, viewport }).promise.then(
            () => {
              li.dataset.rendered = 'true';
            },
            () => li.classList.add('failed'),
          );
        }
      },
      { root: list, rootMargin: '800px 0px' },
    );
    for (const li of items) observer.observe(li);
    // Fields kept from an earlier try past the document's end are dropped.
    fields = fields.filter((f) => f.page <= pages.length);
    editor.dataset.pages = String(pages.length);
    refreshSigners();
  }

  document.addEventListener('wso:uploaded', (e) => {
    // Fields placed before (on this file, kept by a refused send) stay; those past its last page go.
    selected = -1;
    tags = e.detail.tags ?? [];
    open(e.detail.file).catch(() => {
      pages = [];
      list.replaceChildren();
      say('The pages cannot be shown in this browser; the request can be sent without fields.');
    });
  });
  document.addEventListener('wso:upload-cleared', () => {
    fields = [];
    tags = [];
    selected = -1;
    pages = [];
    list.replaceChildren();
    draw();
  });
  editor.hidden = false;
  refreshSigners();
  if (fields.length && !pages.length) say(`${fields.length} field${fields.length === 1 ? '' : 's'} kept from before. Choose the file again to see and move them.`);
}
