'use strict';
/** Discovery (`GET /operations`, `GET /delegation/members`): platform endpoints every valid key may call. */
module.exports = {
  200: {
    'discovery.ListOperations': () => {},
    'discovery.ListDelegationMembers': () => {},
  },
  // A key is never refused here; a member's sign-in session is, when its request comes from another site.
  403: Object.fromEntries(
    ['discovery.ListOperations', 'discovery.ListDelegationMembers'].map((id) => [
      id,
      (t, kit) => {
        if (!kit.ctx.sessionCookie) return kit.skip(t, '403 needs a member\'s sign-in session cookie (local runs make one); a key is never refused here.');
        delete t.request.headers.Authorization;
        t.request.headers.Cookie = kit.ctx.sessionCookie;
        t.request.headers.Origin = 'https://elsewhere.example';
      },
    ]),
  ),
};
