/* Workspace Operations analytics tracker: no cookies, no storage. Served as /v1/track.js. */
(function () {
  'use strict';
  var script = document.currentScript;
  var key = script && script.getAttribute('data-key');
  if (!key || !window.history) return;
  var endpoint = new URL('track', script.src).href;

  var page = null; // { url, referrer, path } of the page being measured
  var activeMs = 0;
  var visibleSince = document.visibilityState === 'visible' ? Date.now() : null;

  function send(body) {
    var data = JSON.stringify(body);
    try {
      if (navigator.sendBeacon && navigator.sendBeacon(endpoint, data)) return;
    } catch (e) {
      /* fall back to fetch */
    }
    if (window.fetch) fetch(endpoint, { method: 'POST', body: data, keepalive: true, headers: { 'Content-Type': 'text/plain' } }).catch(function () {});
  }

  function stopClock() {
    if (visibleSince !== null) {
      activeMs += Date.now() - visibleSince;
      visibleSince = null;
    }
  }

  function sendEngagement() {
    stopClock();
    if (page && activeMs > 0) {
      var body = { key: key, type: 'engagement', url: page.url, engaged_ms: Math.round(activeMs) };
      if (page.referrer) body.referrer = page.referrer;
      send(body);
    }
    activeMs = 0;
    if (document.visibilityState === 'visible') visibleSince = Date.now();
  }

  function pageview(referrer) {
    page = { url: location.href, referrer: referrer, path: location.pathname };
    activeMs = 0;
    if (document.visibilityState === 'visible') visibleSince = Date.now();
    var body = { key: key, type: 'pageview', url: page.url };
    if (referrer) body.referrer = referrer;
    send(body);
  }

  function navigated() {
    if (page && location.pathname === page.path) return;
    var previous = page ? page.url : document.referrer;
    sendEngagement();
    pageview(previous);
  }

  ['pushState', 'replaceState'].forEach(function (name) {
    var original = history[name];
    history[name] = function () {
      var result = original.apply(this, arguments);
      navigated();
      return result;
    };
  });
  window.addEventListener('popstate', navigated);
  document.addEventListener('visibilitychange', function () {
    if (document.visibilityState === 'hidden') sendEngagement();
    else if (visibleSince === null) visibleSince = Date.now();
  });
  window.addEventListener('pagehide', sendEngagement);

  pageview(document.referrer);
})();
