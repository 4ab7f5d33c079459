// Renders the API reference (/docs) with Redoc, served from the redoc package (no CDN), from the
// reader's copy of the document (/docs/reference.json): guides apart from the reference, a curl and a
// typed-client sample per operation, search. Redoc has no try-it or Authorize button.
/* global Redoc */
const root = document.getElementById('docs');
Redoc.init(
  root.dataset.spec,
  {
    hideDownloadButton: true,
    expandResponses: '200',
    jsonSampleExpandLevel: 3,
    requiredPropsFirst: true,
    theme: { sidebar: { width: '280px' }, rightPanel: { width: '42%' } },
  },
  root,
  (error) => {
    document.body.dataset.ready = error ? 'error' : 'true';
  },
);
