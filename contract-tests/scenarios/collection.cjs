'use strict';
/**
 * POST /track and GET /track.js (x-service-kind: collection): public, keyed by a site's publishable
 * collect key, outside the operation convention, so this table prepares every status itself.
 */
const crypto = require('node:crypto');

module.exports = {
  async setup(kit) {
    const tracker = await fetch(`${kit.ctx.baseUrl}/track.js`, { signal: AbortSignal.timeout(30_000) });
    await tracker.arrayBuffer();
    kit.seed.trackerEtag = tracker.headers.get('etag');
  },
  prepare(t, operation, status, kit) {
    const { ctx } = kit;
    delete t.request.headers.Authorization;
    if (operation.id === 'collection.GetTracker') {
      if (status === 304) {
        if (!kit.seed.trackerEtag) throw new Error('beforeAll could not read the ETag of /track.js');
        t.request.headers['If-None-Match'] = kit.seed.trackerEtag;
      }
      return;
    }
    const event = { key: ctx.collectKey, type: 'pageview', url: `https://contract.example/${ctx.runId}?utm_source=contract`, referrer: 'https://referrer.example/' };
    switch (status) {
      case 202:
        if (!ctx.collectKey) return kit.skip(t, '202 needs a site\'s collect key; pass --collect-key.');
        return kit.setBody(t, event);
      case 400:
        return kit.setBody(t, { ...event, key: ctx.collectKey || 'pk_contract', contract_unknown_field: true });
      case 404:
        return kit.setBody(t, { ...event, key: `pk_contract_missing_${crypto.randomBytes(6).toString('hex')}` });
      case 413:
        return kit.setBody(t, { ...event, key: ctx.collectKey || 'pk_contract', referrer: `https://referrer.example/${'x'.repeat(9000)}` });
      case 429:
        return kit.skip(t, '429 needs more than COLLECT_ADDRESS_BURST (500) events from one address or COLLECT_KEY_BURST (5,000) for one key, and a bucket refills a token every 20 ms: it cannot be made to land on this one request deterministically; test/analytics/collection.test.ts makes it happen on both databases.');
      case 500:
        return kit.skip(t, '500 internal_error only comes from a fault inside the service; it cannot be caused from outside.');
      case 503:
        return kit.skip(t, '503 needs COLLECT_BUFFER_MAX (10,000) events waiting to be written (the database not keeping up); it cannot be caused deterministically from outside.');
      default:
        throw new Error(`no scenario for status ${status} of ${operation.id} in contract-tests/scenarios/collection.cjs`);
    }
  },
};
