/**
 * signing.ListSigningRequests: exactly the requests GetSigningRequest lets the caller read (the key
 * alone, a member sending, a recipient member, owners and admins, private requests), newest first,
 * paged with the platform cursor (bound to the status filter and the caller), filtered by status.
 */
import assert from 'node:assert/strict';
import type { ApplyResult } from '../../server/admin.ts';
import { databases, type TestService } from '../support/service.ts';
import { acme } from '../support/fixtures.ts';
import { type MailServer, putFile, runJobs, signingService, startMailServer } from './requestSupport.ts';

const MINUTE = 60_000;

for (const database of databases) {
  describe(`signing.ListSigningRequests [${database.name}]`, function () {
    this.timeout(60_000);
    let smtp: MailServer;
    let svc: TestService;
    let ws: ApplyResult;

    before(async () => {
      smtp = await startMailServer();
      svc = await signingService(database.url(), smtp);
      // signingWorkspace's members and keys, and Åsa, whose address is not ASCII (the listing's exact check).
      const spec = acme();
      spec.members!.cleo = { name: 'Cleo Member', email: 'cleo@acme.test', role: 'member' };
      spec.members!.asa = { name: 'Åsa Member', email: 'åsa@acme.test', role: 'member' };
      spec.keys!.sender = { name: 'Contracts integration', operations: ['signing.*', 'documents.*'], delegation: 'all', created_by: 'olga' };
      spec.keys!.other = { name: 'Another integration', operations: ['signing.*'] };
      ws = await svc.apply(spec);
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    type Client = ReturnType<TestService['client']>;
    const sender = (actAs?: string) => svc.client(ws.keys.sender!.secret, actAs);
    const other = () => svc.client(ws.keys.other!.secret);

    /** Every id the caller lists (following the cursor, `limit` at a time), in order. */
    async function listAll(client: Client, body: { status?: 'pending' | 'completed' | 'cancelled' | 'expired'; limit?: number } = {}): Promise<string[]> {
      const ids: string[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 50; page++) {
        const res = await client.signing.ListSigningRequests({ ...body, ...(cursor ? { cursor } : {}) });
        assert.equal(res.response.status, 200, JSON.stringify(res.error));
        const data = res.data!;
        if (body.limit) assert.ok(data.items.length <= body.limit);
        ids.push(...data.items.map((r) => r.signing_request_id));
        assert.equal(data.has_more, data.next_cursor !== null);
        if (!data.has_more) return ids;
        assert.equal(data.items.length, body.limit ?? 50, 'a page with more after it is full');
        cursor = data.next_cursor!;
      }
      throw new Error('too many pages');
    }

    async function create(client: Client, options: { owner?: string; signers: Array<{ email: string; name: string }> }): Promise<string> {
      const { file } = await putFile(svc, ws.workspace_id, options.owner ? { owner: options.owner } : {});
      const res = await client.signing.RequestFileSignatures({ file_id: file.id, signers: options.signers });
      assert.equal(res.response.status, 200, JSON.stringify(res.error));
      svc.clock.advance(MINUTE);
      return res.data!.signing_request_id;
    }

    it('lists exactly what GetSigningRequest lets each caller read, newest first, on every page size', async () => {
      const made = {
        keyAlone: await create(sender(), { signers: [{ email: 'ext-1@example.test', name: 'Ext' }] }),
        adaSends: await create(sender(ws.members.ada), { signers: [{ email: 'CLEO@acme.test', name: 'Cleo' }, { email: 'ext-2@example.test', name: 'Ext' }] }),
        adaPrivate: await create(sender(ws.members.ada), { owner: ws.members.ada, signers: [{ email: 'cleo@acme.test', name: 'Cleo' }] }),
        otherKey: await create(other(), { signers: [{ email: 'ext-3@example.test', name: 'Ext' }] }),
        toAsa: await create(sender(ws.members.ada), { owner: ws.members.ada, signers: [{ email: 'ÅSA@acme.test', name: 'Åsa' }] }),
        cleoPrivate: await create(sender(ws.members.cleo), { owner: ws.members.cleo, signers: [{ email: 'Ünal@example.test', name: 'Ünal' }] }),
      };
      const all = Object.values(made);
      const expected: Record<string, Array<keyof typeof made>> = {
        key: ['keyAlone', 'adaSends'],
        other: ['otherKey'],
        ada: ['adaSends', 'adaPrivate', 'toAsa'],
        cleo: ['adaSends', 'adaPrivate', 'cleoPrivate'],
        asa: ['toAsa'],
        olga: ['keyAlone', 'adaSends', 'otherKey'],
        bob: ['keyAlone', 'adaSends', 'otherKey'],
      };
      const callers: Record<string, Client> = {
        key: sender(),
        other: other(),
        ada: sender(ws.members.ada),
        cleo: sender(ws.members.cleo),
        asa: sender(ws.members.asa),
        olga: sender(ws.members.olga),
        bob: sender(ws.members.bob),
      };
      for (const [who, client] of Object.entries(callers)) {
        // The rule itself: GetSigningRequest answers 200 for exactly these.
        const readable: string[] = [];
        for (const id of all) if ((await client.signing.GetSigningRequest({ signing_request_id: id })).response.status === 200) readable.push(id);
        const want = all.filter((id) => expected[who]!.some((k) => made[k] === id));
        assert.deepEqual(new Set(readable), new Set(want), `${who}: the matrix is the rule`);
        const newestFirst = [...want].reverse();
        for (const limit of [1, 2, 100]) assert.deepEqual(await listAll(client, { limit }), newestFirst, `${who}, limit ${limit}`);
        assert.deepEqual(await listAll(client), newestFirst, `${who}, default limit`);
      }
      // Each item is the request as GetSigningRequest answers it.
      const first = (await sender(ws.members.ada).signing.ListSigningRequests({ limit: 1 })).data!.items[0]!;
      const got = (await sender(ws.members.ada).signing.GetSigningRequest({ signing_request_id: first.signing_request_id })).data!;
      assert.deepEqual(first, got);
    });

    it('status filter, ties on created_at ordered by id, and cursors bound to the filter and the caller (400)', async () => {
      const before = new Set(await listAll(other()));
      const same: string[] = [];
      const { file } = await putFile(svc, ws.workspace_id);
      for (let i = 0; i < 3; i++) {
        const res = await other().signing.RequestFileSignatures({ file_id: file.id, signers: [{ email: `tie-${i}@example.test`, name: 'Tie' }] });
        same.push(res.data!.signing_request_id); // the same created_at: the clock does not move
      }
      svc.clock.advance(MINUTE);
      const cancelled = await create(other(), { signers: [{ email: 'ext-9@example.test', name: 'Ext' }] });
      assert.equal((await other().signing.CancelSigningRequest({ signing_request_id: cancelled, reason: 'no' })).response.status, 200);
      const listed = (await listAll(other(), { limit: 2 })).filter((id) => !before.has(id));
      assert.deepEqual(listed, [cancelled, ...[...same].sort().reverse()]);

      const onlyCancelled = await listAll(other(), { status: 'cancelled', limit: 1 });
      assert.deepEqual(onlyCancelled, [cancelled]);
      const pending = await listAll(other(), { status: 'pending', limit: 2 });
      assert.ok(!pending.includes(cancelled) && same.every((id) => pending.includes(id)));
      for (const status of ['completed', 'expired'] as const) assert.deepEqual(await listAll(other(), { status }), []);

      const page = await other().signing.ListSigningRequests({ status: 'pending', limit: 1 });
      const cursor = page.data!.next_cursor!;
      assert.ok(cursor);
      const wrongStatus = await other().signing.ListSigningRequests({ status: 'cancelled', cursor });
      assert.equal(wrongStatus.response.status, 400);
      assert.equal(wrongStatus.error!.error, 'invalid_input');
      assert.match(wrongStatus.error!.message, /other filters or another caller/);
      const noStatus = await other().signing.ListSigningRequests({ cursor });
      assert.equal(noStatus.response.status, 400);
      const otherCaller = await sender().signing.ListSigningRequests({ status: 'pending', cursor });
      assert.equal(otherCaller.response.status, 400);
      const memberCursor = (await sender(ws.members.olga).signing.ListSigningRequests({ limit: 1 })).data!.next_cursor!;
      assert.equal((await sender(ws.members.bob).signing.ListSigningRequests({ limit: 1, cursor: memberCursor })).response.status, 400, 'another member');
      assert.equal((await sender(ws.members.olga).signing.ListSigningRequests({ limit: 1, cursor: memberCursor })).response.status, 200);
      const edited = await other().signing.ListSigningRequests({ status: 'pending', cursor: `${cursor.slice(0, -2)}AA` });
      assert.equal(edited.response.status, 400);
      assert.match(edited.error!.message, /not a cursor this operation returned/);
      for (const body of [{ status: 'declined' }, { limit: 0 }, { limit: 101 }, { cursor: '' }, { extra: 1 }]) {
        const res = await other().signing.ListSigningRequests(body as never);
        assert.equal(res.response.status, 400, JSON.stringify(body));
        assert.equal(res.error!.error, 'invalid_input');
      }
    });

    it('search, sender, recipient and date filters narrow what the caller may read; cursors keep them', async () => {
      const make = async (client: Client, title: string, signers: Array<{ email: string; name: string }>) => {
        const { file } = await putFile(svc, ws.workspace_id);
        const res = await client.signing.RequestFileSignatures({ file_id: file.id, title, signers });
        assert.equal(res.response.status, 200, JSON.stringify(res.error));
        svc.clock.advance(MINUTE);
        return { id: res.data!.signing_request_id, at: res.data!.created_at };
      };
      const nda = await make(sender(ws.members.ada), 'Mutual NDA 100% final', [{ email: 'Zed@Partner.test', name: 'Zed Partner' }]);
      const lease = await make(sender(ws.members.bob), 'Office lease', [{ email: 'landlord@example.test', name: 'Lena Landlord' }]);
      const ndaTwo = await make(sender(ws.members.bob), 'NDA_two', [{ email: 'zed@partner.test', name: 'Zed' }]);
      const olga = sender(ws.members.olga);
      const ids = async (body: Record<string, unknown>) => {
        const res = await olga.signing.ListSigningRequests(body as never);
        assert.equal(res.response.status, 200, JSON.stringify(res.error));
        return res.data!.items.map((r) => r.signing_request_id);
      };
      assert.deepEqual(await ids({ search: 'nda' }), [ndaTwo.id, nda.id], 'title, without case');
      assert.deepEqual(await ids({ search: '  LENA  ' }), [lease.id], "a recipient's name, spaces trimmed");
      assert.deepEqual(await ids({ search: 'partner.TEST' }), [ndaTwo.id, nda.id], "a recipient's address");
      assert.deepEqual(await ids({ search: '100%' }), [nda.id], '% is a character, not a wildcard');
      assert.deepEqual(await ids({ search: 'A_t' }), [ndaTwo.id], '_ is a character, not a wildcard');
      assert.deepEqual(await ids({ search: 'nda', sent_by: ws.members.bob }), [ndaTwo.id], 'filters apply together');
      assert.deepEqual(await ids({ recipient: 'ZED@partner.test' }), [ndaTwo.id, nda.id]);
      assert.deepEqual(await ids({ created_from: lease.at, created_to: ndaTwo.at, search: 'a' }), [ndaTwo.id, lease.id]);
      // A filter never widens: Cleo (a member) sees none of these.
      assert.deepEqual((await sender(ws.members.cleo).signing.ListSigningRequests({ search: 'nda' })).data!.items, []);
      const first = await olga.signing.ListSigningRequests({ search: 'nda', limit: 1 });
      assert.equal(first.data!.has_more, true);
      const next = await olga.signing.ListSigningRequests({ search: 'nda', limit: 1, cursor: first.data!.next_cursor! });
      assert.deepEqual(next.data!.items.map((r) => r.signing_request_id), [nda.id]);
      const changed = await olga.signing.ListSigningRequests({ search: 'lease', limit: 1, cursor: first.data!.next_cursor! });
      assert.equal(changed.response.status, 400);
      for (const body of [{ search: '' }, { search: 'x'.repeat(201) }, { sent_by: '' }, { created_from: -1 }, { recipient: 'a' }]) {
        assert.equal((await olga.signing.ListSigningRequests(body as never)).response.status, 400, JSON.stringify(body));
      }
    });

    it('expired requests are listed as expired once the expiry job moved them', async () => {
      const id = await create(other(), { signers: [{ email: 'late@example.test', name: 'Late' }] });
      await svc.jobs.scheduleRecurring();
      svc.clock.advance(31 * 86_400_000);
      await runJobs(svc);
      const expired = await listAll(other(), { status: 'expired' });
      assert.ok(expired.includes(id));
      assert.ok(!(await listAll(other(), { status: 'pending' })).includes(id));
    });

    it('a key without the signing grant is refused (403)', async () => {
      const bare = await svc.client(ws.keys.bare!.secret).signing.ListSigningRequests({});
      assert.equal(bare.response.status, 403);
    });
  });
}
