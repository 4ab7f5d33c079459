import assert from 'node:assert/strict';
import { acme, createPipeline } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

const TOKEN = 'metrics-token-for-tests';

forEachDatabase(
  'Prometheus metrics',
  (svc) => {
    it('needs the METRICS_TOKEN, then counts requests by operation and status with latency, queue, jobs and connections', async () => {
      const ws = await svc().apply(acme());
      const api = svc().client(ws.keys.ci!.secret);
      assert.equal((await api.customers.CreateSalesPipeline(createPipeline('Counted'))).response.status, 200);
      assert.equal((await api.customers.GetSalesPipeline({ id: 'pl_missing' })).response.status, 404);
      await svc().jobs.scheduleRecurring();

      const anonymous = await fetch(`${svc().origin}/metrics`);
      assert.equal(anonymous.status, 401);
      assert.equal(anonymous.headers.get('www-authenticate'), 'Bearer realm="metrics"');
      assert.equal((await fetch(`${svc().origin}/metrics`, { headers: { Authorization: 'Bearer wrong' } })).status, 401);

      const res = await fetch(`${svc().origin}/metrics`, { headers: { Authorization: `Bearer ${TOKEN}` } });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type')!, /^text\/plain/);
      const text = await res.text();
      const value = (line: RegExp) => Number(text.split('\n').find((l) => line.test(l))?.split(' ').at(-1));
      assert.equal(value(/^wsops_requests_total\{operation="customers.CreateSalesPipeline",status="200"\}/), 1);
      assert.equal(value(/^wsops_requests_total\{operation="customers.GetSalesPipeline",status="404"\}/), 1);
      assert.equal(value(/^wsops_request_duration_seconds_count\{operation="customers.CreateSalesPipeline"\}/), 1);
      assert.equal(value(/^wsops_queue_depth\{endpoint="analytics"\}/), 0);
      assert.equal(value(/^wsops_queue_refused_total\{endpoint="analytics"\}/), 0);
      assert.ok(value(/^wsops_jobs\{state="due"\}/) >= 1, 'the recurring jobs are due');
      assert.ok(value(/^wsops_db_connections\{state="open"\}/) >= 1);
      assert.doesNotMatch(text, new RegExp(ws.keys.ci!.secret), 'no secret');
    });
  },
  { metricsToken: TOKEN },
);

forEachDatabase('Prometheus metrics, off by default', (svc) => {
  it('answers 404 while METRICS_TOKEN is unset', async () => {
    const res = await fetch(`${svc().origin}/metrics`);
    assert.equal(res.status, 404);
    assert.match(((await res.json()) as { message: string }).message, /METRICS_TOKEN/);
  });
});
