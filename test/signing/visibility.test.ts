/**
 * Who sees and who manages a signing request (seed 4.8, 5): the key that created it, the member it
 * was sent for, recipients who are members, owners and admins; a private source narrows it to its
 * owner and the recipient members. Not visible is 404 (as an unknown id); visible but not the
 * sender's is 403 for the commands.
 */
import assert from 'node:assert/strict';
import type { ApplyResult } from '../../server/admin.ts';
import { databases, type TestService } from '../support/service.ts';
import { type MailServer, putFile, signingService, signingWorkspace, startMailServer } from './requestSupport.ts';

for (const database of databases) {
  describe(`signing request visibility and delegation [${database.name}]`, function () {
    this.timeout(30_000);
    let smtp: MailServer;
    let svc: TestService;
    let ws: ApplyResult;

    before(async () => {
      smtp = await startMailServer();
      svc = await signingService(database.url(), smtp);
      ws = await signingWorkspace(svc);
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    const sender = (actAs?: string) => svc.client(ws.keys.sender!.secret, actAs);
    const other = () => svc.client(ws.keys.other!.secret);

    /** Every caller's status for GetSigningRequest, ListSigningEvents, GetSigningDocument and a command (RemindSigners after the interval: 200, or 403/404). */
    async function reads(id: string, client: ReturnType<typeof sender>): Promise<number> {
      const get = await client.signing.GetSigningRequest({ signing_request_id: id });
      const events = await client.signing.ListSigningEvents({ signing_request_id: id });
      const doc = await client.signing.GetSigningDocument({ signing_request_id: id, version: 'original' });
      assert.equal(events.response.status, get.response.status, 'the history answers as the request');
      assert.equal(doc.response.status, get.response.status, 'the document answers as the request');
      if (get.response.status === 404) assert.match(get.error!.message, new RegExp(`No signing request ${id} is visible to this credential`));
      return get.response.status;
    }

    async function deadline(id: string, client: ReturnType<typeof sender>): Promise<number> {
      const res = await client.signing.UpdateSigningDeadline({ signing_request_id: id, deadline_at: svc.clock.now() + 40 * 86_400_000 });
      return res.response.status;
    }

    it('workspace access: the key that created a request reads and manages it; another key does not see it', async () => {
      const { file } = await putFile(svc, ws.workspace_id);
      const created = await sender().signing.RequestFileSignatures({ file_id: file.id, signers: [{ email: 'ext-1@example.test', name: 'Ext' }] });
      const id = created.data!.signing_request_id;
      assert.equal(created.data!.private, false);
      assert.equal(await reads(id, sender()), 200);
      assert.equal(await deadline(id, sender()), 200);
      assert.equal(await reads(id, other()), 404);
      assert.equal(await deadline(id, other()), 404);
      // Acting for a plain member who neither sent it nor is a recipient: that member's access, not the key's.
      assert.equal(await reads(id, sender(ws.members.ada)), 404);
      assert.equal(await deadline(id, sender(ws.members.ada)), 404);
      // Owners and admins see and manage every request of the workspace that is not private.
      assert.equal(await reads(id, sender(ws.members.olga)), 200);
      assert.equal(await reads(id, sender(ws.members.bob)), 200);
      assert.equal(await deadline(id, sender(ws.members.bob)), 200);
    });

    it('acting for a member: the sender member, recipient members (read only: 403 on commands), owners and admins', async () => {
      const { file } = await putFile(svc, ws.workspace_id);
      const created = await sender(ws.members.ada).signing.RequestFileSignatures({
        file_id: file.id,
        signers: [
          { email: 'CLEO@acme.test', name: 'Cleo' },
          { email: 'ext-2@example.test', name: 'Ext' },
        ],
      });
      assert.equal(created.response.status, 200);
      const id = created.data!.signing_request_id;
      assert.equal(await reads(id, sender(ws.members.ada)), 200);
      assert.equal(await deadline(id, sender(ws.members.ada)), 200);
      // Cleo is a recipient (her address, compared without case): reads, may not manage.
      assert.equal(await reads(id, sender(ws.members.cleo)), 200);
      const cancel = await sender(ws.members.cleo).signing.CancelSigningRequest({ signing_request_id: id });
      assert.equal(cancel.response.status, 403);
      assert.match(cancel.error!.message, /Only the sender of signing request/);
      // The key that created it, without a member: reads (not private) and manages.
      assert.equal(await reads(id, sender()), 200);
      assert.equal(await reads(id, other()), 404);
      assert.equal(await reads(id, sender(ws.members.olga)), 200);
      const cancelled = await sender(ws.members.olga).signing.CancelSigningRequest({ signing_request_id: id, reason: 'Owner stops it' });
      assert.equal(cancelled.response.status, 200);
    });

    it("a private file makes a private request: only its owner and the recipient members see it; others' files are not usable", async () => {
      const { file } = await putFile(svc, ws.workspace_id, { owner: ws.members.ada });
      // Not visible to anyone else: 404 for the key alone and for another member, even an owner.
      for (const actAs of [undefined, ws.members.olga, ws.members.cleo]) {
        const res = await sender(actAs).signing.RequestFileSignatures({ file_id: file.id, signers: [{ email: 'x@example.test', name: 'X' }] });
        assert.equal(res.response.status, 404, String(actAs));
      }
      const created = await sender(ws.members.ada).signing.RequestFileSignatures({
        file_id: file.id,
        signers: [
          { email: 'cleo@acme.test', name: 'Cleo' },
          { email: 'ext-3@example.test', name: 'Ext' },
        ],
      });
      assert.equal(created.response.status, 200);
      const id = created.data!.signing_request_id;
      assert.equal(created.data!.private, true);
      assert.equal(await reads(id, sender(ws.members.ada)), 200);
      assert.equal(await reads(id, sender(ws.members.cleo)), 200, 'a recipient member');
      assert.equal(await reads(id, sender()), 404, 'the key alone does not see a private request');
      assert.equal(await reads(id, sender(ws.members.olga)), 404, 'nor an owner');
      assert.equal(await reads(id, sender(ws.members.bob)), 404, 'nor an admin');
      assert.equal(await deadline(id, sender(ws.members.olga)), 404);
      assert.equal(await deadline(id, sender(ws.members.cleo)), 403);
      assert.equal(await deadline(id, sender(ws.members.ada)), 200);
      // The owner's notice when it ends goes to the owner alone.
      const cancelled = await sender(ws.members.ada).signing.CancelSigningRequest({ signing_request_id: id });
      assert.equal(cancelled.data!.status, 'cancelled');
    });

    it('a disabled member cannot be acted for (403), and a key without the signing grant is refused (403)', async () => {
      const { file } = await putFile(svc, ws.workspace_id);
      const res = await sender(ws.members.max).signing.RequestFileSignatures({ file_id: file.id, signers: [{ email: 'y@example.test', name: 'Y' }] });
      assert.equal(res.response.status, 403);
      const bare = await svc.client(ws.keys.bare!.secret).signing.GetSigningRequest({ signing_request_id: 'sr_000000000000000000000000' });
      assert.equal(bare.response.status, 403);
    });
  });
}
