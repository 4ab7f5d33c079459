import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import { loggerOptions, requestScope } from '../../server/logger.ts';
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

  it('carries the Request-Id in the error body and in the request\'s log line', async () => {
    const ws = await svc().apply(acme());
    const res = await svc().post('customers.GetSalesPipeline', { id: 'sp_missing' }, { Authorization: `Bearer ${ws.keys.ci!.secret}` });
    assert.equal(res.status, 404);
    const id = res.headers.get('request-id');
    assert.match(id ?? '', /^[0-9a-f-]{36}$/);
    assert.equal(res.body.request_id, id);
    const line = svc().logs().trim().split('\n').map((l) => JSON.parse(l)).find((l) => l.request_id === id);
    assert.ok(line, 'no log line carries the request id');
    assert.equal(line.res.statusCode, 404);
    const ok = await svc().post('workspace.ListBundles', {}, { Authorization: `Bearer ${ws.keys.ci!.secret}` });
    assert.match(ok.headers.get('request-id') ?? '', /^[0-9a-f-]{36}$/);
    assert.notEqual(ok.headers.get('request-id'), id);
  });
});

describe('logger', () => {
  it('adds request_id to every line written inside a request, and none outside', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({ write: (chunk, _enc, done) => (lines.push(JSON.parse(String(chunk))), done()) });
    const logger = pino(loggerOptions('info'), sink);
    logger.info('outside');
    await requestScope.run({ requestId: 'req-1' }, async () => {
      await new Promise((resolve) => setImmediate(resolve));
      logger.warn({ detail: 1 }, 'inside, after an await');
      logger.child({ module: 'x' }).error('from a child logger');
    });
    assert.equal(lines[0]!.request_id, undefined);
    assert.equal(lines[1]!.request_id, 'req-1');
    assert.equal(lines[2]!.request_id, 'req-1');
  });
});
