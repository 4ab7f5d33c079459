/**
 * Templates (handlers/signing/templates.ts), on both databases: a document with its roles saved and
 * sent again with the people filled in, through the same path as signing.RequestFileSignatures (roles'
 * steps become the signing order, CC roles CC recipients, the invitations go out by mail); who sees
 * and deletes a template; the refusals.
 */
import assert from 'node:assert/strict';
import { MAX_TEMPLATES } from '../../handlers/signing/request/templates.ts';
import type { ApplyResult } from '../../server/admin.ts';
import { databases, type TestService } from '../support/service.ts';
import { type MailServer, putFile, runJobs, signingService, signingWorkspace, startMailServer } from './requestSupport.ts';

for (const database of databases) {
  describe(`signing templates [${database.name}]`, function () {
    this.timeout(60_000);
    let smtp: MailServer;
    let svc: TestService;
    let ws: ApplyResult;

    before(async () => {
      smtp = await startMailServer(0);
      svc = await signingService(database.url(), smtp);
      ws = await signingWorkspace(svc);
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    const as = (member?: string) => svc.client(ws.keys.sender!.secret, member);

    it('saves a document with its roles and sends it with the people filled in: steps, CC and defaults apply', async () => {
      const { file } = await putFile(svc, ws.workspace_id, { filename: 'Consulting agreement' });
      const made = await as(ws.members.ada).signing.CreateTemplate({
        file_id: file.id,
        name: 'Consulting agreement',
        title: 'Consulting agreement 2027',
        message: 'Please sign.',
        roles: [{ role: 'Client', order: 1 }, { role: 'Consultant', order: 2 }, { role: 'Legal', cc: true }],
      });
      assert.equal(made.response.status, 200, JSON.stringify(made.error));
      const tpl = made.data!;
      assert.match(tpl.template_id, /^tpl_/);
      assert.deepEqual(tpl.roles, [{ role: 'Client', order: 1, cc: false }, { role: 'Consultant', order: 2, cc: false }, { role: 'Legal', order: 1, cc: true }]);
      assert.equal(tpl.private, false);

      const sent = await as(ws.members.ada).signing.SendTemplate({
        template_id: tpl.template_id,
        recipients: [
          { role: 'consultant', email: 'bo@consult.test', name: 'Bo Ek' },
          { role: 'Client', email: 'ana@client.test', name: 'Ana Lind' },
          { role: 'Legal', email: 'legal@client.test', name: 'Legal' },
        ],
      });
      assert.equal(sent.response.status, 200, JSON.stringify(sent.error));
      const r = sent.data!;
      assert.equal(r.title, 'Consulting agreement 2027');
      assert.equal(r.message, 'Please sign.');
      assert.equal(r.source_file_id, file.id);
      assert.equal(r.sender.member_id, ws.members.ada);
      assert.deepEqual(r.recipients.map((c) => [c.email, c.role, c.signing_order, c.invitation]), [
        ['ana@client.test', 'signer', 1, 'sent'],
        ['bo@consult.test', 'signer', 2, 'waiting'],
        ['legal@client.test', 'cc', 1, 'none'],
      ]);
      await runJobs(svc);
      assert.equal(smtp.to('ana@client.test').length, 1);
      assert.equal(smtp.to('bo@consult.test').length, 0);
      // Given here, the title wins over the template's.
      const again = await as(ws.members.ada).signing.SendTemplate({
        template_id: tpl.template_id,
        title: 'Consulting agreement, Acme',
        recipients: [
          { role: 'Client', email: 'x@client.test', name: 'X' },
          { role: 'Consultant', email: 'y@consult.test', name: 'Y' },
          { role: 'Legal', email: 'z@client.test', name: 'Z' },
        ],
      });
      assert.equal(again.data!.title, 'Consulting agreement, Acme');
    });

    it('carries fields: each role\'s fields land on the request for the person filling that role; refused for a CC role, past the last page or with BankID', async () => {
      const { file } = await putFile(svc, ws.workspace_id, { filename: 'Order form', pages: 2 });
      const made = await as(ws.members.ada).signing.CreateTemplate({
        file_id: file.id,
        name: 'Order form',
        roles: [{ role: 'Buyer' }, { role: 'Seller' }, { role: 'Archive', cc: true }],
        fields: [
          { role: 'seller', kind: 'signature', page: 2, x: 330, y: 96, width: 180, height: 44 },
          { role: 'Buyer', kind: 'text', page: 1, x: 72, y: 500, width: 200, height: 20, label: 'Purchase order number' },
          { role: 'Buyer', kind: 'checkbox', page: 1, x: 72, y: 460, width: 16, height: 16, required: false },
        ],
      });
      assert.equal(made.response.status, 200, JSON.stringify(made.error));
      assert.deepEqual(made.data!.fields.map((f) => [f.role, f.kind, f.required, f.label]), [
        ['Seller', 'signature', true, null],
        ['Buyer', 'text', true, 'Purchase order number'],
        ['Buyer', 'checkbox', false, null],
      ]);
      const sent = await as(ws.members.ada).signing.SendTemplate({
        template_id: made.data!.template_id,
        recipients: [
          { role: 'Seller', email: 'sam@seller.test', name: 'Sam Seller' },
          { role: 'Buyer', email: 'bea@buyer.test', name: 'Bea Buyer' },
          { role: 'Archive', email: 'archive@buyer.test', name: 'Archive' },
        ],
      });
      assert.equal(sent.response.status, 200, JSON.stringify(sent.error));
      const r = sent.data!;
      const who = new Map(r.recipients.map((c) => [c.recipient_id, c.email]));
      assert.deepEqual(r.fields.map((f) => [who.get(f.recipient_id), f.kind, f.page, f.required, f.label]), [
        ['sam@seller.test', 'signature', 2, true, null],
        ['bea@buyer.test', 'text', 1, true, 'Purchase order number'],
        ['bea@buyer.test', 'checkbox', 1, false, null],
      ]);
      const refused = async (body: Record<string, unknown>, pattern: RegExp) => {
        const res = await as(ws.members.ada).signing.CreateTemplate({ file_id: file.id, name: 'Refused', roles: [{ role: 'Buyer' }, { role: 'Archive', cc: true }], ...body } as never);
        assert.equal(res.response.status, 400, JSON.stringify(res.data));
        assert.match((res.error as { message: string }).message, pattern);
      };
      await refused({ fields: [{ role: 'Archive', kind: 'signature', page: 1, x: 0, y: 0, width: 10, height: 10 }] }, /fields\[0\]\.role "Archive" is not a signing role of this template \(Buyer\)/);
      await refused({ fields: [{ role: 'Buyer', kind: 'signature', page: 3, x: 0, y: 0, width: 10, height: 10 }] }, /fields\[0\]\.page is 3, but the document has 2 pages/);
      await refused({ signature_method: 'bankid', fields: [{ role: 'Buyer', kind: 'signature', page: 1, x: 0, y: 0, width: 10, height: 10 }] }, /BankID/);
    });

    it('refuses roles that are blank, repeated or all CC, and sends only with every role filled once', async () => {
      const { file } = await putFile(svc, ws.workspace_id);
      const create = (roles: Array<{ role: string; order?: number; cc?: boolean }>) => as(ws.members.ada).signing.CreateTemplate({ file_id: file.id, name: 'T', roles });
      for (const [roles, message] of [
        [[{ role: 'A' }, { role: 'a' }], /roles\[1\]\.role repeats roles\[0\]\.role/],
        [[{ role: '  ' }], /roles\[0\]\.role is blank/],
        [[{ role: 'A', cc: true }], /at least one role must sign/],
      ] as const) {
        const res = await create(roles as never);
        assert.equal(res.response.status, 400, JSON.stringify(roles));
        assert.match(res.error!.message, message);
      }
      const missingFile = await as(ws.members.ada).signing.CreateTemplate({ file_id: 'file_nothing', name: 'T', roles: [{ role: 'A' }] });
      assert.equal(missingFile.response.status, 404);
      const tpl = (await create([{ role: 'Buyer' }, { role: 'Seller' }])).data!;
      const send = (recipients: Array<{ role: string; email: string; name: string }>) => as(ws.members.ada).signing.SendTemplate({ template_id: tpl.template_id, recipients });
      const one = await send([{ role: 'Buyer', email: 'b@example.test', name: 'B' }]);
      assert.equal(one.response.status, 400);
      assert.match(one.error!.message, /the role "Seller" of template .* has nobody/);
      const unknown = await send([{ role: 'Buyer', email: 'b@example.test', name: 'B' }, { role: 'Seller', email: 's@example.test', name: 'S' }, { role: 'Notary', email: 'n@example.test', name: 'N' }]);
      assert.match(unknown.error!.message, /"Notary" is not a role of template/);
      const twice = await send([{ role: 'Buyer', email: 'b@example.test', name: 'B' }, { role: 'buyer', email: 'c@example.test', name: 'C' }]);
      assert.match(twice.error!.message, /given twice/);
      const same = await send([{ role: 'Buyer', email: 'b@example.test', name: 'B' }, { role: 'Seller', email: 'B@example.test', name: 'S' }]);
      assert.equal(same.response.status, 400, 'one address in two roles is refused as for RequestFileSignatures');
      assert.equal((await as(ws.members.ada).signing.SendTemplate({ template_id: 'tpl_nothing', recipients: [{ role: 'A', email: 'a@example.test', name: 'A' }] })).response.status, 404);
    });

    it('keeps at most MAX_TEMPLATES templates per workspace: past it, 409 and nothing made', async () => {
      const { file } = await putFile(svc, ws.workspace_id);
      const have = Number((await svc.db.sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM signing_templates WHERE workspace_id = ?`, [ws.workspace_id]))!.n);
      for (let i = have; i < MAX_TEMPLATES; i++) {
        await svc.db.sql.run(
          `INSERT INTO signing_templates (id, workspace_id, name, file_id, title, message, signature_method, roles, private, owner_member_id, created_by_key_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [`tpl_fill${i}`, ws.workspace_id, `Fill ${i}`, file.id, null, null, 'standard', '[{"role":"A","order":1,"cc":false}]', false, null, null, 0],
        );
      }
      const over = await as(ws.members.ada).signing.CreateTemplate({ file_id: file.id, name: 'One too many', roles: [{ role: 'A' }] });
      assert.equal(over.response.status, 409);
      assert.match(over.error!.message, /has 500 templates, the most it may keep/);
      await svc.db.sql.run(`DELETE FROM signing_templates WHERE id LIKE 'tpl_fill%'`);
    });

    it("lists the workspace's templates and a member's own private ones; deletes for who made it or an admin", async () => {
      const { file: shared } = await putFile(svc, ws.workspace_id, { filename: 'Shared' });
      const { file: mine } = await putFile(svc, ws.workspace_id, { filename: 'Mine', owner: ws.members.ada });
      const workspaceTpl = (await as(ws.members.ada).signing.CreateTemplate({ file_id: shared.id, name: 'Workspace one', roles: [{ role: 'A' }] })).data!;
      const privateTpl = (await as(ws.members.ada).signing.CreateTemplate({ file_id: mine.id, name: 'Private one', roles: [{ role: 'A' }] })).data!;
      assert.equal(privateTpl.private, true);
      const ids = async (member?: string) => {
        const all: string[] = [];
        let cursor: string | undefined;
        for (;;) {
          const page = await as(member).signing.ListTemplates({ limit: 1, ...(cursor ? { cursor } : {}) });
          assert.equal(page.response.status, 200, JSON.stringify(page.error));
          all.push(...page.data!.items.map((t) => t.template_id));
          if (!page.data!.has_more) return all;
          cursor = page.data!.next_cursor!;
        }
      };
      const ada = await ids(ws.members.ada);
      assert.ok(ada.includes(workspaceTpl.template_id) && ada.includes(privateTpl.template_id));
      const cleo = await ids(ws.members.cleo);
      assert.ok(cleo.includes(workspaceTpl.template_id) && !cleo.includes(privateTpl.template_id), "another member never sees Ada's private template");
      assert.ok(!(await ids()).includes(privateTpl.template_id), 'nor does the key alone');
      assert.equal((await as(ws.members.cleo).signing.SendTemplate({ template_id: privateTpl.template_id, recipients: [{ role: 'A', email: 'a@example.test', name: 'A' }] })).response.status, 404);
      // Delete: Cleo (a member who did not make it) may not; Bob (an admin) may; again: deleted false.
      const cleoDelete = await as(ws.members.cleo).signing.DeleteTemplate({ template_id: workspaceTpl.template_id });
      assert.equal(cleoDelete.response.status, 403);
      assert.equal((await as(ws.members.cleo).signing.DeleteTemplate({ template_id: privateTpl.template_id })).response.status, 404);
      assert.deepEqual((await as(ws.members.bob).signing.DeleteTemplate({ template_id: workspaceTpl.template_id })).data, { template_id: workspaceTpl.template_id, deleted: true });
      assert.deepEqual((await as(ws.members.bob).signing.DeleteTemplate({ template_id: workspaceTpl.template_id })).data, { template_id: workspaceTpl.template_id, deleted: false });
      assert.deepEqual((await as(ws.members.ada).signing.DeleteTemplate({ template_id: privateTpl.template_id })).data, { template_id: privateTpl.template_id, deleted: true });
    });
  });
}
