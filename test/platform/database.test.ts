import assert from 'node:assert/strict';
import pg from 'pg';
import { acme, createPipeline } from '../support/fixtures.ts';
import { databases, startTestService } from '../support/service.ts';

const postgres = databases.find((d) => d.name === 'postgres');

describe('database connections [postgres]', function () {
  this.timeout(30_000);
  before(function () {
    if (!postgres) this.skip();
  });

  it('survives PostgreSQL ending its connections: no crash, the next requests are served on new connections', async () => {
    const svc = await startTestService(postgres!.url());
    try {
      const ws = await svc.apply(acme());
      const api = svc.client(ws.keys.ci!.secret);
      assert.equal((await api.customers.CreateSalesPipeline(createPipeline('Before'))).response.status, 200);
      // What a server restart or a failover does to every open connection of the service.
      const admin = new pg.Client({ connectionString: process.env.TEST_POSTGRES_URL });
      await admin.connect();
      try {
        const ended = await admin.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND usename = current_user AND state = 'idle'`,
        );
        assert.ok(ended.rowCount! > 0);
      } finally {
        await admin.end();
      }
      await new Promise((resolve) => setTimeout(resolve, 200)); // the sockets' close events reach the pools
      let status = 0;
      for (let i = 0; i < 5 && status !== 200; i++) status = (await api.customers.CreateSalesPipeline(createPipeline('After'))).response.status;
      assert.equal(status, 200);
      assert.equal((await api.customers.ListSalesPipelines({})).data!.items.length, 2);
    } finally {
      await svc.close();
    }
  });
});
