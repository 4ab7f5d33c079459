// Renders the API reference (/docs) from the service's own document with Swagger UI, served from the
// swagger-ui-dist package (no CDN). Vendor extensions are shown, so each operation lists its
// x-service-* facts (kind, act-as, resource, access, contract version).
/* global SwaggerUIBundle */
const root = document.getElementById('docs');
SwaggerUIBundle({
  url: root.dataset.spec,
  domNode: root,
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  docExpansion: 'list',
  defaultModelsExpandDepth: 0,
  displayOperationId: true,
  supportedSubmitMethods: [],
  onComplete: () => {
    document.body.dataset.ready = 'true';
  },
});
