import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import { logFormat, prettyLine } from '../../server/logFormat.ts';
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
    // The error the caller got, beside the request id.
    assert.equal(line.error, 'not_found');
    assert.equal(line.error_message, res.body.message);
    // Errors decided before the operation (401, 400 invalid_json) and replayed receipts too.
    const bad = await svc().post('workspace.ListBundles', '{not json', { Authorization: `Bearer ${ws.keys.ci!.secret}` });
    const badLine = svc().logs().trim().split('\n').map((l) => JSON.parse(l)).find((l) => l.request_id === bad.headers.get('request-id'));
    assert.equal(badLine.error, 'invalid_json');
    const unknown = await svc().post('workspace.ListBundles', {}, { Authorization: 'Bearer wso_nope' });
    const unknownLine = svc().logs().trim().split('\n').map((l) => JSON.parse(l)).find((l) => l.request_id === unknown.headers.get('request-id'));
    assert.equal(unknownLine.error, 'invalid_key');
    assert.ok(!svc().logs().includes('wso_nope'));
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

describe('log format', () => {
  it('is pretty on a terminal and JSON elsewhere unless LOG_FORMAT says; a bad value is a readable error', () => {
    assert.equal(logFormat({}, true), 'pretty');
    assert.equal(logFormat({}, false), 'json');
    assert.equal(logFormat({ LOG_FORMAT: 'json' }, true), 'json');
    assert.equal(logFormat({ LOG_FORMAT: 'pretty' }, false), 'pretty');
    assert.throws(() => logFormat({ LOG_FORMAT: 'xml' }, true), /LOG_FORMAT must be pretty or json/);
  });

  it('writes one readable line: ISO time, level, message, request, status, the error answered, then the fields', () => {
    const json = JSON.stringify({
      level: 30,
      time: Date.UTC(2026, 10, 26, 18, 0, 0, 5),
      service: 'workspace-operations',
      request_id: '42df01bf',
      req: { id: '42df01bf', method: 'POST', url: '/v1/operations/customers.GetDeal' },
      res: { statusCode: 404 },
      key: 'ak_1',
      operation: 'customers.GetDeal',
      error: 'not_found',
      error_message: 'No deal dl_1 is visible to this key.',
      ms: 3.2,
      msg: 'request completed',
    });
    assert.equal(
      prettyLine(json, false),
      '2026-11-26T18:00:00.005Z  INFO   request completed  POST /v1/operations/customers.GetDeal  404  not_found: "No deal dl_1 is visible to this key."  request_id=42df01bf  key=ak_1  operation=customers.GetDeal  ms=3.2',
    );
    const failed = prettyLine(JSON.stringify({ level: 50, time: 0, msg: 'unhandled error', err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at f (x.ts:1:1)' } }), true);
    assert.match(failed, /^1970-01-01T00:00:00\.000Z {2}\u001b\[31mERROR\u001b\[0m {2}unhandled error\n {4}Error: boom\n {8}at f/);
    assert.equal(prettyLine('not json\n', false), 'not json');
  });
});
