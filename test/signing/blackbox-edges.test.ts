/**
 * Black box of documents.* and signing.*: history, documents and visibility (paging, cut-off PUTs, re-
 * signing, discovery, private archives, odd ids). One of the files split from one suite; the shared setup
 * is blackboxKit.ts. Written from the seed (sections 2.5, 3, 4.7-4.12, 5) and the OpenAPI document only:
 * every call goes over HTTP, the mail through a real SMTP server; the service's code and tables are never
 * touched.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { ApplyResult } from '../../server/admin.ts';
import { databases, type TestService } from '../support/service.ts';
import { type MailServer, runJobs } from './requestSupport.ts';
import { onService } from './signerKit.ts';
import { DAY, documented, refused, blackboxService } from './blackboxKit.ts';

for (const database of databases) {
  describe(`documents and signing, black box [${database.name}]`, function () {
    this.timeout(60_000);
    const kit = blackboxService(database);
    const { secret, call, put, partUrl, fileId, addr, request, signAs, get, allEvents } = kit;
    let smtp: MailServer;
    let svc: TestService;
    let ws: ApplyResult;
    let pdf: Buffer;
    before(() => ({ smtp, svc, ws, pdf } = kit.state()));

    describe('history, documents and visibility', () => {
      it('listing files made in the same millisecond pages without skipping or repeating any', async () => {
        const made: string[] = [];
        for (let i = 0; i < 5; i++) made.push(await fileId({ actAs: ws.members.bob! }));
        const all = await call('documents.ListDocuments', { scope: 'user', limit: 100 }, { actAs: ws.members.bob! });
        const full = all.body.items.map((f: { file_id: string }) => f.file_id);
        for (const id of made) assert.ok(full.includes(id));
        for (const limit of [1, 2, 3]) {
          const paged: string[] = [];
          let cursor: string | undefined;
          for (;;) {
            const page = await call('documents.ListDocuments', { scope: 'user', limit, ...(cursor ? { cursor } : {}) }, { actAs: ws.members.bob! });
            assert.equal(page.status, 200);
            paged.push(...page.body.items.map((f: { file_id: string }) => f.file_id));
            if (!page.body.has_more) break;
            cursor = page.body.next_cursor;
          }
          assert.deepEqual(paged, full, `pages of ${limit}`);
        }
        const times = all.body.items.map((f: { created_at: number }) => f.created_at);
        assert.deepEqual(times, [...times].sort((x: number, y: number) => y - x), 'newest first');
        const dflt = await call('documents.ListDocuments', { scope: 'workspace' });
        assert.ok(dflt.body.items.length <= 50, 'default limit 50');
      });

      it('a failed invitation is re-sent by RemindSigners at once (no hour wait); receipts of RequestFileSignatures are per member', async () => {
        const ok = addr();
        const r = await request([{ email: 'refused-again@example.test', name: 'Rolf' }, { email: ok, name: 'Olle' }]);
        const res = await call('signing.RemindSigners', { signing_request_id: r.signing_request_id });
        assert.equal(res.status, 200, `the failed one is sent again at once: ${JSON.stringify(res.body)}`);
        assert.deepEqual(res.body.invitation_failures, ['refused-again@example.test']);
        assert.equal(smtp.to(ok).length, 1, 'the one mailed less than an hour ago is not reminded');
        const file = await fileId();
        const body = { file_id: file, signers: [{ email: addr(), name: 'Per member' }] };
        const none = await call('signing.RequestFileSignatures', body, { idem: `bb-member-${file}` });
        const asAda = await call('signing.RequestFileSignatures', body, { idem: `bb-member-${file}`, actAs: ws.members.ada! });
        assert.equal(none.status, 200);
        assert.equal(asAda.status, 200, JSON.stringify(asAda.body));
        assert.notEqual(asAda.body.signing_request_id, none.body.signing_request_id, 'the same key for another member is another receipt');
        assert.equal(asAda.headers.get('idempotency-replayed'), null);
      });

      it('a PUT cut off mid-body keeps nothing and blocks nothing; an oversized chunked body is 413; other methods on the URLs are not 500', async () => {
        const created = await call('documents.CreateUpload', { filename: 'drop.pdf', content_type: 'application/pdf', size: pdf.length });
        const id = created.body.upload_id;
        const url = new URL(onService(await partUrl(id, 1), svc.origin));
        await new Promise<void>((resolve) => {
          const req = http.request({ host: url.hostname, port: url.port, path: url.pathname + url.search, method: 'PUT', headers: { 'Content-Length': String(pdf.length) } });
          req.on('error', () => resolve());
          req.on('response', (res) => {
            res.resume();
            resolve();
          });
          req.write(pdf.subarray(0, 100), () => {
            req.destroy();
            resolve();
          });
        });
        const read = await call('documents.GetUpload', { upload_id: id });
        assert.equal(read.body.parts[0].received, false, 'nothing kept from the dropped PUT');
        const chunked = await fetch(url, {
          method: 'PUT',
          body: new ReadableStream({
            start(c) {
              c.enqueue(new Uint8Array(pdf));
              c.enqueue(new Uint8Array(10));
              c.close();
            },
          }),
          duplex: 'half',
        } as RequestInit);
        assert.equal(chunked.status, 413, await chunked.text());
        const good = await put(url.toString(), pdf);
        assert.equal(good.status, 200, `the part is not blocked: ${JSON.stringify(good.body)}`);
        for (const method of ['GET', 'POST', 'DELETE', 'PATCH']) {
          const r = await fetch(url, { method });
          await r.arrayBuffer();
          assert.ok(r.status >= 400 && r.status < 500, `${method} on a part URL: ${r.status}`);
        }
        assert.equal((await call('documents.CompleteUpload', { upload_id: id })).status, 200);
      });

      it('a signed archive can itself be sent for signature; a member recipient is matched by address without case', async () => {
        const a = addr();
        const r = await request([{ email: a, name: 'Anna' }]);
        await signAs(a, 'Anna');
        await runJobs(svc);
        const archive = (await get(r.signing_request_id)).body.file_id;
        assert.match(archive, /^file_/);
        const again = await call('signing.RequestFileSignatures', { file_id: archive, signers: [{ email: addr(), name: 'Second round' }] });
        assert.equal(again.status, 200, JSON.stringify(again.body));
        assert.equal(again.body.source_file_id, archive);
        const adaFile = await fileId({ actAs: ws.members.ada! });
        const priv = await request([{ email: 'CLEO@Acme.TEST', name: 'Cleo' }], { file_id: adaFile }, { actAs: ws.members.ada! });
        assert.equal((await get(priv.signing_request_id, { actAs: ws.members.cleo! })).status, 200, 'addresses are compared without case');
        const doc = await call('signing.GetSigningDocument', { signing_request_id: priv.signing_request_id, version: 'original' }, { actAs: ws.members.cleo! });
        assert.equal(doc.status, 200, 'a recipient member may download the original');
        const key = `bb-deadline-${priv.signing_request_id}`;
        assert.equal((await call('signing.UpdateSigningDeadline', { signing_request_id: priv.signing_request_id, deadline_at: svc.clock.now() + 3 * DAY }, { idem: key, actAs: ws.members.ada! })).status, 200);
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: priv.signing_request_id, deadline_at: svc.clock.now() + 4 * DAY }, { idem: key, actAs: ws.members.ada! }), 400, 'invalid_input', 'same key, other deadline');
      });

      it('discovery and the document: every documents.* and signing.* operation is listed for the key and declared as the seed says', async () => {
        const res = await fetch(`${svc.baseUrl}/operations`, { headers: { Authorization: `Bearer ${secret('sender')}` } });
        assert.equal(res.status, 200);
        const listed = JSON.stringify(await res.json());
        const doc = await (await fetch(`${svc.baseUrl}/openapi.json`)).json();
        const ops = Object.entries(doc.paths as Record<string, Record<string, any>>)
          .map(([, item]) => item.post)
          .filter((o) => o && /^(documents|signing)\./.test(o.operationId));
        assert.ok(ops.length >= 12, `found ${ops.length}`);
        for (const o of ops) {
          assert.ok(listed.includes(o.operationId), `${o.operationId} is listed for the key`);
          assert.ok(['query', 'command'].includes(o['x-service-kind']), o.operationId);
          assert.equal(o['x-service-contract-version'], 1, o.operationId);
          assert.equal(typeof o['x-service-workspace-supported'], 'boolean', o.operationId);
          assert.equal(o.deprecated, false, o.operationId);
          const idem = (o.parameters ?? []).some((p: { name?: string; $ref?: string }) => p.name === 'Idempotency-Key' || String(p.$ref).includes('IdempotencyKey'));
          assert.equal(idem, o['x-service-kind'] === 'command', `${o.operationId}: an Idempotency-Key exactly on commands`);
        }
        const bare = await fetch(`${svc.baseUrl}/operations`, { headers: { Authorization: `Bearer ${secret('bare')}` } });
        assert.doesNotMatch(JSON.stringify(await bare.json()), /signing\.|documents\./, 'a key without the grants lists none');
        refused(await call('documents.DeleteDocument', { file_id: 'file_x' }), 404, 'not_found', 'an operation that does not exist');
        const wrong = await fetch(`${svc.baseUrl}/operations/documents.ListDocuments`, { headers: { Authorization: `Bearer ${secret('sender')}` } });
        assert.equal(wrong.status, 405);
      });

      it('a private request\'s archive stays private to its owner: not in the workspace list, not verifiable or downloadable by others', async () => {
        const { ada, olga, cleo } = ws.members;
        const adaFile = await fileId({ actAs: ada });
        const a = addr();
        const priv = await request([{ email: a, name: 'Anna' }], { file_id: adaFile }, { actAs: ada });
        await signAs(a, 'Anna');
        await runJobs(svc);
        const done = await get(priv.signing_request_id, { actAs: ada });
        assert.equal(done.body.status, 'completed');
        const archive = done.body.file_id;
        assert.match(archive, /^file_/);
        const wsList = await call('documents.ListDocuments', { scope: 'workspace', limit: 100 });
        assert.ok(!wsList.body.items.some((f: { file_id: string }) => f.file_id === archive), 'not a workspace file');
        const olgaList = await call('documents.ListDocuments', { scope: 'user', limit: 100 }, { actAs: olga });
        assert.ok(!olgaList.body.items.some((f: { file_id: string }) => f.file_id === archive), "not in another member's files");
        const adaList = await call('documents.ListDocuments', { scope: 'user', limit: 100 }, { actAs: ada });
        const mine = adaList.body.items.find((f: { file_id: string }) => f.file_id === archive);
        assert.ok(mine, "in the owner's files");
        assert.equal(mine.source, 'signing_archive');
        assert.equal(mine.owner_member_id, ada);
        refused(await call('signing.VerifySignedDocument', { file_id: archive }), 404, 'not_found', 'verify without the member');
        refused(await call('signing.VerifySignedDocument', { file_id: archive }, { actAs: olga }), 404, 'not_found', 'verify as another member');
        refused(await call('signing.GetSigningDocument', { signing_request_id: priv.signing_request_id, version: 'signed' }, { actAs: olga }), 404, 'not_found', 'download as the owner of the workspace');
        refused(await call('signing.RequestFileSignatures', { file_id: archive, signers: [{ email: addr(), name: 'X' }] }, { actAs: cleo }), 404, 'not_found', 'send as another member');
        assert.equal((await call('signing.VerifySignedDocument', { file_id: archive }, { actAs: ada })).body.seal.valid, true);
      });

      it('paging follows new events that arrive between pages; a member\'s documents cursor does not open another member\'s files', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }]);
        const id = r.signing_request_id;
        const first = await call('signing.ListSigningEvents', { signing_request_id: id, limit: 2 });
        assert.equal(first.body.items.length, 2);
        assert.equal(first.body.has_more, true);
        await signAs(a, 'Anna');
        const rest: any[] = [];
        let cursor: string | null = first.body.next_cursor;
        while (cursor) {
          const page = await call('signing.ListSigningEvents', { signing_request_id: id, limit: 2, cursor });
          assert.equal(page.status, 200, JSON.stringify(page.body));
          rest.push(...page.body.items);
          cursor = page.body.has_more ? page.body.next_cursor : null;
        }
        const all = await allEvents(id, 100);
        assert.deepEqual([...first.body.items, ...rest].map((e) => e.event_id), all.map((e) => e.event_id), 'nothing skipped or repeated');
        assert.ok(rest.some((e) => e.kind === 'recipient.signed'));

        const { ada, olga } = ws.members;
        await fileId({ actAs: ada });
        await fileId({ actAs: ada });
        const page = await call('documents.ListDocuments', { scope: 'user', limit: 1 }, { actAs: ada });
        assert.equal(page.body.has_more, true);
        const asOlga = await call('documents.ListDocuments', { scope: 'user', limit: 1, cursor: page.body.next_cursor }, { actAs: olga });
        assert.ok(asOlga.status === 400 || asOlga.status === 200, String(asOlga.status));
        if (asOlga.status === 200) assert.ok(asOlga.body.items.every((f: { owner_member_id: string }) => f.owner_member_id === olga), "never Ada's files");
        else refused(asOlga, 400, 'invalid_input');
      });

      it('ListSigningRequests lists exactly what GetSigningRequest lets each caller read; its cursor is bound to the caller and filter', async () => {
        const { ada, olga, cleo } = ws.members;
        const adaFile = await fileId({ actAs: ada });
        const priv = await request([{ email: 'cleo@acme.test', name: 'Cleo' }], { file_id: adaFile }, { actAs: ada });
        await request([{ email: addr(), name: 'Key made' }]);
        await request([{ email: addr(), name: 'Key made too' }]);
        const list = async (o: { key?: string; actAs?: string }, body: object = {}) => {
          const ids: string[] = [];
          let cursor: string | undefined;
          for (let guard = 0; guard < 100; guard++) {
            const page = await call('signing.ListSigningRequests', { limit: 7, ...body, ...(cursor ? { cursor } : {}) }, o);
            assert.equal(page.status, 200, JSON.stringify(page.body));
            for (const item of page.body.items) documented(item, 'SigningRequest', 'listed request');
            ids.push(...page.body.items.map((x: { signing_request_id: string }) => x.signing_request_id));
            if (!page.body.has_more) return ids;
            cursor = page.body.next_cursor;
          }
          throw new Error('paging never ended');
        };
        for (const [who, o] of [['key', {}], ['ada', { actAs: ada }], ['olga', { actAs: olga }], ['cleo', { actAs: cleo }], ['twin', { key: secret('twin') }]] as Array<[string, { key?: string; actAs?: string }]>) {
          const ids = await list(o);
          assert.equal(new Set(ids).size, ids.length, `${who}: no request twice`);
          for (const id of ids.slice(0, 15)) assert.equal((await get(id, o)).status, 200, `${who} can read what is listed`);
          const privListed = ids.includes(priv.signing_request_id);
          assert.equal(privListed, who === 'ada' || who === 'cleo', `${who}: the private request only for its owner and member recipient`);
        }
        const pending = await list({}, { status: 'pending' });
        for (const id of pending.slice(0, 10)) assert.equal((await get(id)).body.status, 'pending');
        const first = await call('signing.ListSigningRequests', { limit: 1 }, { actAs: olga });
        assert.equal(first.body.has_more, true);
        refused(await call('signing.ListSigningRequests', { limit: 1, cursor: first.body.next_cursor }, { actAs: ada }), 400, 'invalid_input', 'a cursor of another member');
        refused(await call('signing.ListSigningRequests', { limit: 1, cursor: first.body.next_cursor, status: 'pending' }, { actAs: olga }), 400, 'invalid_input', 'a cursor of another filter');
        refused(await call('signing.ListSigningRequests', { status: 'declined' }), 400, 'invalid_input', 'an unknown state');
      });

      it('odd ids and types on every signing operation answer 400 or 404, never 500', async () => {
        const ops = ['signing.GetSigningRequest', 'signing.ListSigningEvents', 'signing.CancelSigningRequest', 'signing.RemindSigners'];
        const ids: unknown[] = [12, null, true, [], {}, '', 'x'.repeat(41), 'sr_' + '\u0000', 'sr_👍', "sr_' OR 1=1 --", 'sr_%00', '../../etc/passwd', 'SR_ABC'];
        for (const op of ops) {
          for (const v of ids) {
            const res = await call(op, { signing_request_id: v });
            assert.ok(res.status === 400 || res.status === 404, `${op} ${JSON.stringify(v)}: ${res.status} ${JSON.stringify(res.body)}`);
            refused(res, res.status, res.status === 400 ? 'invalid_input' : 'not_found', `${op} ${JSON.stringify(v)}`);
          }
        }
        for (const v of ids) {
          const res = await call('signing.UpdateSigningDeadline', { signing_request_id: v, deadline_at: svc.clock.now() + DAY });
          assert.ok(res.status === 400 || res.status === 404, `${JSON.stringify(v)}: ${res.status}`);
          const doc = await call('signing.GetSigningDocument', { signing_request_id: v, version: 'original' });
          assert.ok(doc.status === 400 || doc.status === 404, `${JSON.stringify(v)}: ${doc.status}`);
          const verify = await call('signing.VerifySignedDocument', { file_id: v });
          assert.ok(verify.status === 400 || verify.status === 404, `verify ${JSON.stringify(v)}: ${verify.status}`);
          const up = await call('documents.GetUpload', { upload_id: v });
          assert.ok(up.status === 400 || up.status === 404, `GetUpload ${JSON.stringify(v)}: ${up.status}`);
        }
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: 'sr_x', deadline_at: 8_640_000_000_000_001 }), 400, 'invalid_input', 'deadline beyond a Date');
        for (const raw of ['{"__proto__":{"admin":true},"scope":"workspace"}', '{"constructor":{"prototype":{"x":1}},"scope":"workspace"}', '{"scope":"workspace","limit":1e2}', '{"scope":"workspace","limit":"1"}', '{"scope":["workspace"]}', '{"scope":"workspace","scope":"user"}']) {
          const r = await call('documents.ListDocuments', raw);
          assert.ok(r.status === 200 || r.status === 400, `${raw}: ${r.status} ${JSON.stringify(r.body)}`);
        }
        const deep = '{"scope":' + '['.repeat(10_000) + ']'.repeat(10_000) + '}';
        const d = await call('documents.ListDocuments', deep);
        assert.equal(d.status, 400, `deeply nested: ${d.status}`);
        const inf = await call('signing.UpdateSigningDeadline', '{"signing_request_id":"sr_x","deadline_at":1e400}');
        assert.equal(inf.status, 400, `a number a double cannot hold: ${JSON.stringify(inf.body)}`);
      });
    });
  });
}
