/** What analytics brings to the shared harness (test/support/kit.ts): stored traffic for the contract run. */
import { ingestEvents, normalizeEvent } from '../../handlers/analytics/ingest.ts';
import type { TestKit } from '../support/kit.ts';

export const kit: TestKit = {
  contract: {
    // A little traffic on the fixture's first site, so the analytics transactions return real rows (and a second breakdown page).
    async seed(seed) {
      const site = Object.values(seed.ws.bundles)[0];
      if (!site) throw new Error('the contract workspace has no site for its analytics traffic');
      const now = seed.clock.now();
      await ingestEvents(
        seed.db,
        [
          { type: 'pageview' as const, ts: now - 120_000, visitor: 'contract-a', path: '/', referrer: 'https://search.example/' },
          { type: 'engagement' as const, ts: now - 60_000, visitor: 'contract-a', path: '/', engaged_ms: 15_000 },
          { type: 'pageview' as const, ts: now - 30_000, visitor: 'contract-b', path: '/pricing' },
        ].map((e) => normalizeEvent(site, e)),
      );
      return undefined;
    },
  },
};
