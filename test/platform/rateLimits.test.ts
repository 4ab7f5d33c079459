import assert from 'node:assert/strict';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

forEachDatabase(
  'rate limits',
  (svc) => {
    it('allows the burst, then answers 429 with Retry-After, and refills over time', async () => {
      const ws = await svc().apply(acme());
      const api = svc().client(ws.keys.ci!.secret);
      for (let i = 0; i < 3; i++) assert.equal((await api.workspace.ListBundles({})).response.status, 200, `request ${i}`);
      const limited = await api.workspace.ListBundles({});
      assert.equal(limited.response.status, 429);
      assert.deepEqual(limited.error, { error: 'rate_limited', message: 'Rate limit exceeded for this credential; retry after 1 s.', request_id: limited.response.headers.get('request-id') });
      assert.equal(limited.response.headers.get('Retry-After'), '1');
      svc().clock.advance(500);
      assert.equal((await api.workspace.ListBundles({})).response.status, 200);
      assert.equal((await api.workspace.ListBundles({})).response.status, 429);
      svc().clock.advance(5000);
      for (let i = 0; i < 3; i++) assert.equal((await api.workspace.ListBundles({})).response.status, 200);
    });

    it('shares one budget per credential across members and operations, not across keys', async () => {
      const ws = await svc().apply(acme());
      const secret = ws.keys.ci!.secret;
      assert.equal((await svc().client(secret, ws.members.ada).customers.ListSalesPipelines({})).response.status, 200);
      assert.equal((await svc().client(secret, ws.members.olga).customers.ListSalesPipelines({})).response.status, 200);
      assert.equal((await svc().client(secret).listOperations()).response.status, 200);
      assert.equal((await svc().client(secret, ws.members.ada).workspace.ListBundles({})).response.status, 429);
      assert.equal((await svc().client(ws.keys.all!.secret).customers.ListSalesPipelines({})).response.status, 200);
    });

    it('refuses a command without effect while limited; its retry with the same key then runs once', async () => {
      const ws = await svc().apply(acme());
      const api = svc().client(ws.keys.ci!.secret);
      for (let i = 0; i < 3; i++) await api.workspace.ListBundles({});
      for (let i = 0; i < 5; i++) await api.workspace.ListBundles({});
      const create = await api.customers.CreateSalesPipeline({ data: { name: 'x' } }, { idempotencyKey: 'after-429' });
      assert.equal(create.response.status, 429);
      assert.equal(create.response.headers.get('Retry-After'), '1');
      svc().clock.advance(2000);
      const retried = await api.customers.CreateSalesPipeline({ data: { name: 'x' } }, { idempotencyKey: 'after-429' });
      assert.equal(retried.response.status, 200);
      assert.equal(retried.response.headers.get('Idempotency-Replayed'), null);
    });
  },
  { rateLimitPerSecond: 2, rateLimitBurst: 3 },
);
