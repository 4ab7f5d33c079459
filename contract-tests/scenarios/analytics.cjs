'use strict';
/** Analytics queries: the workspace's first site (the document's example bundle id belongs to no workspace). */

function siteId(kit) {
  if (!kit.seed.bundleId) throw new Error('the main key\'s workspace has no site (workspace.ListBundles is empty); the analytics transactions need one');
  return kit.seed.bundleId;
}

/** A site id no workspace has (another workspace's site answers the same 404). */
const missingBundle = (kit) => kit.missingId('bn');

module.exports = {
  async setup(kit) {
    const bundles = await kit.call('workspace.ListBundles', {});
    kit.seed.bundleId = bundles.items[0] && bundles.items[0].content_id;
  },
  200: {
    'analytics.GetSiteAnalyticsSummary': (t, kit) => kit.setBody(t, { bundle_id: siteId(kit) }),
    'analytics.GetWorkspaceAnalyticsSummary': (t, kit) => kit.setBody(t, {}),
    // One row a page, so has_more and a non-null next_cursor are checked when the site has traffic.
    'analytics.GetSiteAnalyticsBreakdown': (t, kit) => kit.setBody(t, { bundle_id: siteId(kit), dimension: 'page', limit: 1 }),
    'analytics.GetSiteAnalyticsRealtime': (t, kit) => kit.setBody(t, { bundle_id: siteId(kit) }),
  },
  404: {
    'analytics.GetSiteAnalyticsSummary': (t, kit) => kit.setBody(t, { bundle_id: missingBundle(kit) }),
    'analytics.GetSiteAnalyticsBreakdown': (t, kit) => kit.setBody(t, { bundle_id: missingBundle(kit), dimension: 'page' }),
    'analytics.GetSiteAnalyticsRealtime': (t, kit) => kit.setBody(t, { bundle_id: missingBundle(kit) }),
  },
};
