// The send page (GET /documents/new): uploads the chosen PDF through the documents operations with the
// member's own session (the same /v1 operations as any API caller: CreateUpload, GetUploadPart and a
// PUT of each part, CompleteUpload), showing progress, then lets the form send it. An interrupted
// upload resumes: the upload's id is kept in this tab (sessionStorage) under the file's name, size and
// date, and choosing the same file again sends only the parts that have not arrived (GetUpload).
// Signer rows are added and removed here; without JavaScript the page says to use the API.

const form = document.querySelector('[data-send-form]');
if (form) {
  const zone = form.querySelector('[data-dropzone]');
  const input = form.querySelector('[data-file-input]');
  const label = form.querySelector('[data-drop-label]');
  const progress = form.querySelector('[data-progress]');
  const status = form.querySelector('[data-upload-status]');
  const fileId = form.querySelector('[data-file-id]');
  const fileName = form.querySelector('[data-filename]');
  const title = form.querySelector('[data-title]');
  const send = form.querySelector('[data-send]');
  const privacy = form.querySelector('[data-private]');
  const MAX = 52428800;
  let busy = false;

  const randomKey = () => Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');

  async function call(operation, body, idempotencyKey) {
    const headers = { 'Content-Type': 'application/json' };
    if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey;
    const res = await fetch(`/v1/operations/${operation}`, { method: 'POST', headers, body: JSON.stringify(body), credentials: 'same-origin' });
    let json = {};
    try {
      json = await res.json();
    } catch {
      // An answer without a JSON body: the status says enough.
    }
    if (!res.ok) {
      const err = new Error(json.message || `The service answered ${res.status}.`);
      err.status = res.status;
      throw err;
    }
    return json;
  }

  function putPart(url, blob, onProgress) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open('PUT', url);
      xhr.upload.addEventListener('progress', (e) => onProgress(e.loaded));
      xhr.addEventListener('load', () => {
        if (xhr.status >= 200 && xhr.status < 300) return resolve();
        let message = `The part was refused (${xhr.status}).`;
        try {
          message = JSON.parse(xhr.responseText).message || message;
        } catch {
          // Not JSON.
        }
        reject(new Error(message));
      });
      xhr.addEventListener('error', () => reject(new Error('The connection broke while sending a part; choose the file again to resume.')));
      xhr.send(blob);
    });
  }

  const say = (text, bad) => {
    status.textContent = text;
    status.classList.toggle('error', Boolean(bad));
  };

  async function upload(file) {
    if (busy) return;
    if (!file) return;
    if (!/\.pdf$/i.test(file.name) && file.type !== 'application/pdf') return say(`${file.name} is not a PDF.`, true);
    if (file.size === 0) return say(`${file.name} is empty.`, true);
    if (file.size > MAX) return say(`${file.name} is larger than 50 MiB.`, true);
    busy = true;
    send.disabled = true;
    fileId.value = '';
    delete zone.dataset.done;
    label.textContent = file.name;
    progress.hidden = false;
    progress.value = 0;
    const memo = `wso-upload:${file.name}:${file.size}:${file.lastModified}:${privacy && privacy.checked ? 'p' : 'w'}`;
    try {
      let up = null;
      const known = sessionStorage.getItem(memo);
      if (known) {
        try {
          up = await call('documents.GetUpload', { upload_id: known });
          if (up.state !== 'open') up = up.state === 'completed' ? up : null;
        } catch {
          up = null;
        }
      }
      if (!up) {
        say('Starting the upload…');
        up = await call('documents.CreateUpload', { filename: file.name.slice(0, 255), content_type: 'application/pdf', size: file.size, private: Boolean(privacy && privacy.checked) }, randomKey());
        sessionStorage.setItem(memo, up.upload_id);
      } else if (up.state === 'open') {
        say('Resuming the upload: sending only the missing parts…');
      }
      if (up.state === 'open') {
        const done = new Map(up.parts.filter((p) => p.received).map((p) => [p.part_number, p.size]));
        let sent = [...done.values()].reduce((a, b) => a + b, 0);
        progress.value = Math.floor((sent / file.size) * 100);
        for (const part of up.parts) {
          if (part.received) continue;
          const start = (part.part_number - 1) * up.part_size;
          const target = await call('documents.GetUploadPart', { upload_id: up.upload_id, part_number: part.part_number });
          say(`Uploading part ${part.part_number} of ${up.part_count}…`);
          // The part URL names the service's public origin; this page is on the same service.
          const url = new URL(target.url);
          await putPart(`${url.pathname}${url.search}`, file.slice(start, start + part.size), (loaded) => {
            progress.value = Math.floor(((sent + loaded) / file.size) * 100);
          });
          sent += part.size;
        }
        say('Checking the file…');
        up = await call('documents.CompleteUpload', { upload_id: up.upload_id }, randomKey());
        sessionStorage.removeItem(memo);
        fileId.value = up.file_id;
      } else {
        fileId.value = up.file_id;
      }
      progress.value = 100;
      fileName.value = file.name;
      zone.dataset.done = '';
      label.textContent = `Uploaded: ${file.name}`;
      if (title && !title.value.trim()) title.value = file.name.replace(/\.pdf$/i, '').slice(0, 200);
      say('Uploaded and checked. Add the signers, place their fields if you like, and send.');
      send.disabled = false;
      // The field editor (fields.js) draws the pages of this file.
      document.dispatchEvent(new CustomEvent('wso:uploaded', { detail: { file, tags: Array.isArray(up.text_tags) ? up.text_tags : [] } }));
    } catch (err) {
      if (err.status === 404) sessionStorage.removeItem(memo);
      say(err.message, true);
      label.textContent = 'Drop a PDF here';
    } finally {
      busy = false;
    }
  }

  input.addEventListener('change', () => {
    const file = input.files[0];
    // Cleared, so that choosing the same file again (to resume, or after changing Private) is a change too.
    input.value = '';
    upload(file);
  });
  zone.addEventListener('dragover', (e) => {
    e.preventDefault();
    zone.classList.add('over');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (e) => {
    e.preventDefault();
    zone.classList.remove('over');
    upload(e.dataTransfer.files[0]);
  });
  // Privacy belongs to the uploaded file: changing the box afterwards asks for the file again.
  privacy?.addEventListener('change', () => {
    if (!fileId.value) return;
    fileId.value = '';
    send.disabled = true;
    delete zone.dataset.done;
    label.textContent = 'Drop a PDF here';
    progress.hidden = true;
    say('The privacy setting changed: choose the file again to upload it with this setting.');
    document.dispatchEvent(new Event('wso:upload-cleared'));
  });
  if (fileId.value) send.disabled = false;

  // Signer rows.
  const rows = form.querySelector('[data-signers]');
  const add = form.querySelector('[data-add-signer]');
  const max = Number(rows.dataset.max) || 10;
  const refresh = () => {
    const all = rows.querySelectorAll('.signer-row');
    for (const button of rows.querySelectorAll('[data-remove-signer]')) button.hidden = all.length === 1;
    add.hidden = all.length >= max;
  };
  add.addEventListener('click', () => {
    const row = rows.querySelector('.signer-row').cloneNode(true);
    for (const field of row.querySelectorAll('input')) {
      field.value = '';
      field.required = false;
    }
    rows.append(row);
    refresh();
    row.querySelector('input').focus();
  });
  rows.addEventListener('click', (e) => {
    const button = e.target.closest('[data-remove-signer]');
    if (!button) return;
    button.closest('.signer-row').remove();
    const first = rows.querySelector('.signer-row');
    for (const field of first.querySelectorAll('input')) field.required = true;
    refresh();
  });
  refresh();
}
