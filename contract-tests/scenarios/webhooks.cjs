'use strict';
/**
 * Webhooks. Subscriptions are created by people (an owner or admin approves a proposal on the settings
 * page), never through the API, so local runs use the ones the webhooks kit made in the fixture workspace
 * (`ctx.webhooks`, see test/webhooks/kit.ts: proposed by the main key, approved as an owner; a new
 * workspace every run, so reruns on a reused database get fresh ones):
 *  - `main` (enabled): a delivery that failed (8 attempts, two recorded) and one still pending: the
 *    listings read them, ReplayWebhookEvent replays the failed one (200) and is refused for the pending
 *    one (409);
 *  - `recover` (enabled): one failed delivery, which RecoverWebhookEvents replays (200, nothing else
 *    replays on it);
 *  - `disabled` (disabled by an owner): RecoverWebhookEvents is refused (409).
 * The server runs with JOBS=off: nothing is delivered, so every delivery stays as made until Dredd's
 * requests change it. PrepareWebhook proposes the document's example (a proposal, waiting for an
 * owner; it expires after 72 hours); its 403 is a key granted the operation but not read on the type
 * (`keys.narrow`), after the shared case (a key without the grant) is checked by a direct request.
 *
 * A deployment run changes nothing that reaches a receiver or an administrator: it proposes nothing
 * (a proposal cannot be withdrawn through the API and would wait on the owners' page), replays and
 * recovers nothing (that delivers to a real receiver); it reads the first visible subscription and its
 * newest delivery when there are any, and uses ids no record has for the 404 cases.
 */

/** The transaction is this status's own (not a 400, 413 or 429 that only borrows the 200 request). */
const isOwn = (t, status) => Number(t.expected.statusCode) === status;

/** The run's subscriptions (local runs), or null. */
const made = (kit) => kit.ctx.webhooks || null;

/** Ids no record has (WebhookId and the delivery and event ids: at most 40 characters). */
const missingWebhook = (kit) => kit.missingId('wh');

/** Fails the check unless the error body has this code and its message matches. */
const errorSays = (code, pattern) => (body) =>
  body.error === code && pattern.test(body.message) ? null : `expected ${code} with a message matching ${pattern}, got ${body.error}: ${body.message}`;

/** Sends a command with the given key (not Dredd's request): resolves to { status, body }. */
async function send(kit, operationId, key, body) {
  const res = await fetch(`${kit.ctx.baseUrl}/operations/${operationId}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json', 'Idempotency-Key': kit.newIdempotencyKey() },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let parsed = null;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* reported below */
  }
  return { status: res.status, body: parsed, text };
}

/** The subscription and delivery a deployment run reads, or a skip (with the 400, 413 and 429 cases sent anyway: they never reach it). */
function deployed(t, kit, what) {
  const seed = kit.seed.webhooks;
  const found = what === 'delivery' ? seed.delivery : seed.subscription;
  if (!found && isOwn(t, 200)) kit.skip(t, `this workspace has no webhook ${what} this key may see (subscriptions are approved by people, never through the API).`);
  return found;
}

module.exports = {
  async setup(kit) {
    kit.seed.webhooks = { subscription: null, delivery: null, disabled: null };
    const hooks = made(kit);
    if (hooks) {
      // The subscriptions the kit made must be listed as made, or the cases below prove nothing.
      const listed = await kit.call('webhooks.ListWebhookSubscriptions', { limit: 100 });
      const byId = new Map(listed.items.map((s) => [s.webhook_id, s]));
      for (const [what, enabled] of [['main', true], ['recover', true], ['disabled', false]]) {
        const s = byId.get(hooks[what].webhook_id);
        if (!s || s.enabled !== enabled) throw new Error(`the contract workspace's webhook subscription "${what}" (${hooks[what].webhook_id}) is not listed ${enabled ? 'enabled' : 'disabled'}: ${JSON.stringify(s)}`);
      }
      return;
    }
    // Deployment: the first subscription this key sees, its newest delivery, and a disabled one.
    const listed = await kit.call('webhooks.ListWebhookSubscriptions', { limit: 100 });
    kit.seed.webhooks.subscription = listed.items[0] || null;
    kit.seed.webhooks.disabled = listed.items.find((s) => !s.enabled) || null;
    if (kit.seed.webhooks.subscription) {
      const events = await kit.call('webhooks.ListWebhookEvents', { webhook_id: kit.seed.webhooks.subscription.webhook_id, limit: 1 });
      kit.seed.webhooks.delivery = events.items[0] || null;
    }
  },

  200: {
    // The document's example (an https destination with a public name, not resolved at proposal time).
    'webhooks.PrepareWebhook': (t, kit) => {
      if (!made(kit)) {
        if (isOwn(t, 200)) kit.skip(t, 'a deployment run proposes no webhook: a proposal cannot be withdrawn through the API and would wait 72 hours on the owners\' settings page.');
        return;
      }
      const sent = kit.bodyOf(t);
      kit.expect(t, (body) => {
        const page = `/settings/webhooks/proposals/${body.proposal_id}`;
        if (body.status !== 'pending') return `expected status pending, got ${body.status}`;
        if (!/^whp_/.test(body.proposal_id) || !body.approval_url.endsWith(page)) return `expected an approval_url ending in ${page}, got ${body.approval_url}`;
        if (body.event !== sent.event || JSON.stringify(body.resource_types) !== JSON.stringify(sent.resource_types)) return `expected ${sent.event} of ${sent.resource_types}, got ${body.event} of ${body.resource_types}`;
        return body.expires_at > Date.now() ? null : `expected expires_at in the future, got ${body.expires_at}`;
      });
    },
    // Two to a page (the run's three subscriptions), so has_more and a non-null next_cursor are checked
    // too; never a destination or a secret.
    'webhooks.ListWebhookSubscriptions': (t, kit) => {
      kit.setBody(t, { limit: 2 });
      const hooks = made(kit);
      kit.expect(t, (body) => {
        const text = JSON.stringify(body);
        const leaked = body.items.find((s) => 'url' in s || 'secret' in s);
        if (leaked || /https?:\/\/|whsec_/.test(text)) return `a subscription was listed with its destination or secret: ${text}`;
        if (!hooks) return null;
        if (body.items.length !== 2 || !body.has_more || !body.next_cursor) return `expected a full page of 2 subscriptions with has_more, got ${body.items.length} (has_more ${body.has_more})`;
        const foreign = body.items.find((s) => !hooks.all.includes(s.webhook_id));
        return foreign ? `listed ${foreign.webhook_id}, not a subscription of this run's workspace` : null;
      });
    },
    // The document's example (status: failed) on the main subscription: exactly its failed delivery.
    'webhooks.ListWebhookEvents': (t, kit) => {
      const hooks = made(kit);
      if (!hooks) {
        const s = deployed(t, kit, 'subscription');
        return kit.setBody(t, { webhook_id: s ? s.webhook_id : missingWebhook(kit), limit: 2 });
      }
      const failed = hooks.main.failed;
      kit.setBody(t, { webhook_id: hooks.main.webhook_id, status: 'failed' });
      kit.expect(t, (body) => {
        const [d] = body.items;
        return body.items.length === 1 && d.delivery_id === failed.delivery_id && d.event_id === failed.event_id && d.status === 'failed' && d.attempts === 8 && d.replay_of === null
          ? null
          : `expected only the failed delivery ${failed.delivery_id} (8 attempts), got ${JSON.stringify(body.items)}`;
      });
    },
    // One to a page of the failed delivery's two recorded attempts: the first, with has_more.
    'webhooks.ListWebhookAttempts': (t, kit) => {
      const hooks = made(kit);
      if (!hooks) {
        const d = deployed(t, kit, 'delivery');
        return kit.setBody(t, d ? { webhook_id: kit.seed.webhooks.subscription.webhook_id, delivery_id: d.delivery_id } : { webhook_id: missingWebhook(kit), delivery_id: kit.missingId('whd') });
      }
      const failed = hooks.main.failed;
      kit.setBody(t, { webhook_id: hooks.main.webhook_id, delivery_id: failed.delivery_id, limit: 1 });
      kit.expect(t, (body) => {
        const [a] = body.items;
        return body.items.length === 1 && a.attempt_id === failed.attempts[0] && a.attempt === 1 && a.status_code === 500 && body.has_more && body.next_cursor
          ? null
          : `expected attempt 1 (${failed.attempts[0]}, HTTP 500) with has_more, got ${JSON.stringify(body)}`;
      });
    },
    // Replays the main subscription's failed delivery: a new pending delivery of the same event.
    'webhooks.ReplayWebhookEvent': (t, kit) => {
      const hooks = made(kit);
      if (!hooks) {
        kit.setBody(t, { webhook_id: missingWebhook(kit), event_id: kit.missingId('evt') }); // only ever sent by the 400, 413 and 429 cases
        if (isOwn(t, 200)) kit.skip(t, 'a deployment run replays nothing: a replay is delivered to the subscription\'s real receiver.');
        return;
      }
      const failed = hooks.main.failed;
      kit.setBody(t, { webhook_id: hooks.main.webhook_id, event_id: failed.event_id });
      kit.expect(t, ({ item }) =>
        item.replay_of === failed.delivery_id && item.event_id === failed.event_id && item.delivery_id !== failed.delivery_id && item.status === 'pending' && item.attempts === 0
          ? null
          : `expected a new pending delivery of ${failed.event_id} with replay_of ${failed.delivery_id}, got ${JSON.stringify(item)}`,
      );
    },
    // Recovers the recover subscription's failed delivery (of the last day): replayed 1 the first time.
    'webhooks.RecoverWebhookEvents': (t, kit) => {
      const hooks = made(kit);
      const since = Date.now() - 24 * 3_600_000;
      if (!hooks) {
        kit.setBody(t, { webhook_id: missingWebhook(kit), since }); // only ever sent by the 400, 413 and 429 cases
        if (isOwn(t, 200)) kit.skip(t, 'a deployment run recovers nothing: recovered events are delivered to the subscription\'s real receiver.');
        return;
      }
      const webhookId = hooks.recover.webhook_id;
      kit.setBody(t, { webhook_id: webhookId, since });
      kit.expect(t, (body) => (body.webhook_id === webhookId && body.replayed >= 1 ? null : `expected at least 1 event of ${webhookId} replayed, got ${JSON.stringify(body)}`));
    },
  },

  // The webhook's own 400: a destination that is not public (nothing is stored).
  400: {
    'webhooks.PrepareWebhook': (t, kit) => {
      kit.setBody(t, { ...kit.bodyOf(t), url: 'https://127.0.0.1/workspace-operations' });
      kit.expect(t, errorSays('invalid_input', /^url: .*not a public address/));
    },
  },

  403: {
    // A key granted the operation but not read on the type (a subscription carries only what its
    // proposer may read). The shared 403, a key without the grant, is sent first, directly.
    'webhooks.PrepareWebhook': async (t, kit) => {
      const { keys } = kit.ctx;
      if (!keys.restricted) return kit.skip(t, '403 needs a key without grants; pass --restricted-key.');
      const body = kit.bodyOf(t);
      const bare = await send(kit, 'webhooks.PrepareWebhook', keys.restricted, body);
      if (bare.status !== 403 || !bare.body || bare.body.error !== 'forbidden') throw new Error(`PrepareWebhook with a key without the grant answered ${bare.status}, not 403: ${bare.text.slice(0, 300)}`);
      if (!keys.narrow) {
        t.request.headers.Authorization = `Bearer ${keys.restricted}`; // a deployment run has no such key: the shared case
        return;
      }
      const type = made(kit).type;
      kit.setBody(t, { ...body, resource_types: [type] });
      t.request.headers.Authorization = `Bearer ${keys.narrow}`;
      kit.expect(t, errorSays('forbidden', new RegExp(`may not read ${type}`)));
    },
  },

  // Ids no record has, on a real subscription where there is one (the delivery or the event is unknown).
  404: {
    'webhooks.ListWebhookEvents': (t, kit) => {
      kit.setBody(t, { webhook_id: missingWebhook(kit) });
      kit.expect(t, errorSays('not_found', /webhook subscription/));
    },
    'webhooks.ListWebhookAttempts': (t, kit) => {
      const hooks = made(kit);
      const webhookId = hooks ? hooks.main.webhook_id : kit.seed.webhooks.subscription ? kit.seed.webhooks.subscription.webhook_id : missingWebhook(kit);
      kit.setBody(t, { webhook_id: webhookId, delivery_id: kit.missingId('whd') });
    },
    'webhooks.ReplayWebhookEvent': (t, kit) => {
      const hooks = made(kit);
      const webhookId = hooks ? hooks.main.webhook_id : kit.seed.webhooks.subscription ? kit.seed.webhooks.subscription.webhook_id : missingWebhook(kit);
      kit.setBody(t, { webhook_id: webhookId, event_id: kit.missingId('evt') });
    },
    'webhooks.RecoverWebhookEvents': (t, kit) => {
      kit.setBody(t, { webhook_id: missingWebhook(kit), since: Date.now() - 24 * 3_600_000 });
      kit.expect(t, errorSays('not_found', /webhook subscription/));
    },
  },

  409: {
    // The main subscription's delivery still waiting for its next attempt (JOBS=off: it stays pending).
    'webhooks.ReplayWebhookEvent': (t, kit) => {
      const hooks = made(kit);
      if (!hooks) return kit.skip(t, 'ReplayWebhookEvent answers 409 for a delivery still pending or a disabled subscription; a deployment run cannot hold a delivery pending.');
      kit.setBody(t, { webhook_id: hooks.main.webhook_id, event_id: hooks.main.pending.event_id });
      kit.expect(t, errorSays('conflict', /still being delivered/));
    },
    // The disabled subscription (it has a failed delivery: only the disabling refuses).
    'webhooks.RecoverWebhookEvents': (t, kit) => {
      const hooks = made(kit);
      const disabled = hooks ? hooks.disabled.webhook_id : kit.seed.webhooks.disabled && kit.seed.webhooks.disabled.webhook_id;
      if (!disabled) return kit.skip(t, 'RecoverWebhookEvents answers 409 for a disabled subscription and this workspace has none this key may see.');
      kit.setBody(t, { webhook_id: disabled, since: Date.now() - 24 * 3_600_000 });
      kit.expect(t, errorSays('conflict', /is disabled/));
    },
  },
};
