import assert from 'node:assert/strict';
import { acme, createPipeline } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

forEachDatabase('logs', (svc) => {
  it('logs every request with key id and operation, and never a key secret', async () => {
    const ws = await svc().apply(acme());
    const secret = ws.keys.ci!.secret;
    await svc().client(secret).customers.CreateSalesPipeline(createPipeline());
    await svc().post('workspace.ListBundles', {}, { Authorization: `Bearer ${secret.slice(0, -1)}x` });
    await svc().post('workspace.ListBundles', '{not json', { Authorization: `Bearer ${secret}` });
    const logs = svc().logs();
    const secretPart = secret.slice(secret.indexOf('_', 4) + 1);
    assert.ok(!logs.includes(secretPart), 'a key secret reached the logs');
    const lines = logs.trim().split('\n').map((l) => JSON.parse(l));
    const create = lines.find((l) => l.operation === 'customers.CreateSalesPipeline');
    assert.equal(create.key, ws.keys.ci!.id);
    assert.equal(create.res.statusCode, 200);
    assert.ok(lines.some((l) => l.res?.statusCode === 401));
  });
});
