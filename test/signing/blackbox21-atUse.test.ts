/**
 * Revocation and permission changes reach background work and secret-bearing URLs (seed 5.6, member
 * delegation 6): automatic reminders of a request stop when the credential that made it is revoked or
 * the member it acted for is disabled (the request stays valid for its signers, and no mail says a
 * disabled member "is still waiting"); a part URL and a signing document's download URL are refused
 * (403 forbidden) once the key is revoked, the member disabled, the key may no longer act for them or
 * their role changed.
 */
import assert from 'node:assert/strict';
import { mintSignerLink } from '../../handlers/signing/signer/links.ts';
import { changeDelegation, disableMember, replaceKey, revokeKey } from '../../server/admin.ts';
import { put } from '../documents/support.ts';
import { databases, type TestService } from '../support/service.ts';
import { eventKinds, type MailServer, putFile, runJobs, signingService, signingWorkspace, startMailServer } from './requestSupport.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** A URL of this service moved onto the test server (PUBLIC_URL is not where it listens). */
const here = (svc: TestService, url: string) => {
  const u = new URL(url);
  return `${svc.origin}${u.pathname}${u.search}`;
};

for (const database of databases) {
  describe(`revocation reaches reminders and URLs at use [${database.name}]`, function () {
    this.timeout(40_000);
    let smtp: MailServer;
    let svc: TestService;

    before(async () => {
      smtp = await startMailServer();
      svc = await signingService(database.url(), smtp);
      await svc.jobs.scheduleRecurring();
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    /** A fresh workspace (its own members, so disabling one touches no other case) and a request made acting for ada. */
    async function requestForAda(email: string, more: { reminder_interval_days?: number } = { reminder_interval_days: 1 }) {
      const ws = await signingWorkspace(svc);
      const api = svc.client(ws.keys.sender!.secret);
      const { file } = await putFile(svc, ws.workspace_id, { filename: 'Lease' });
      const res = await api.signing.RequestFileSignatures(
        { file_id: file.id, signers: [{ email, name: 'Sam Signer' }], deadline_at: svc.clock.now() + 20 * DAY, ...more },
        { actAs: ws.members.ada! },
      );
      assert.equal(res.response.status, 200, JSON.stringify(res.error));
      return { ws, api, request: res.data! };
    }

    async function remindersAfter(days: number) {
      for (let i = 0; i < days; i++) {
        svc.clock.advance(DAY + 1);
        await runJobs(svc);
      }
    }

    async function requestRow(id: string) {
      return (await svc.db.sql.one<{ status: string; reminder_interval_days: number | null }>(`SELECT status, reminder_interval_days FROM signing_requests WHERE id = ?`, [id]))!;
    }

    async function stopEvents(id: string) {
      const rows = await svc.db.sql.all<{ data: string }>(`SELECT data FROM signing_events WHERE request_id = ? AND kind = 'reminders.stopped'`, [id]);
      return rows.map((r) => JSON.parse(r.data) as { reason: string; detail: string });
    }

    it('automatic reminders stop once the key that made the request is revoked; the request stays valid for its signer', async () => {
      const { ws, request } = await requestForAda('revoked-key@example.test');
      await remindersAfter(1);
      assert.equal(smtp.to('revoked-key@example.test').length, 2, 'the invitation and one reminder');
      await revokeKey(svc.db, svc.clock, ws.keys.sender!.id);
      await remindersAfter(4);
      assert.equal(smtp.to('revoked-key@example.test').length, 2, 'no reminder after the revocation');
      const row = await requestRow(request.signing_request_id);
      assert.equal(row.status, 'pending', 'the request itself is untouched');
      assert.equal(row.reminder_interval_days, null, 'automatic reminders are off');
      const stopped = await stopEvents(request.signing_request_id);
      assert.equal(stopped.length, 1, 'recorded once');
      assert.equal(stopped[0]!.reason, 'credential_revoked');
      assert.match(stopped[0]!.detail, /revoked/);
      // The signer can still open and sign: their link works.
      const token = await svc.db.tx((sql) => mintSignerLink(sql, { recipientId: request.recipients[0]!.recipient_id, requestId: request.signing_request_id }, svc.clock.now()));
      assert.equal((await fetch(`${svc.origin}/sign/${token}`)).status, 200);
    });

    it('automatic reminders stop once the member the request was made for is disabled, and no mail says that member is still waiting', async () => {
      const { ws, api, request } = await requestForAda('disabled-member@example.test');
      await remindersAfter(1);
      const mails = smtp.to('disabled-member@example.test');
      assert.equal(mails.length, 2);
      assert.match(mails[1]!.mail.text ?? '', /Ada Member \(Acme\) is still waiting/, 'while ada is active, the reminder names her');
      await disableMember(svc.db, svc.clock, ws.members.ada!);
      await remindersAfter(4);
      assert.equal(smtp.to('disabled-member@example.test').length, 2, 'no automatic reminder after ada was disabled');
      const stopped = await stopEvents(request.signing_request_id);
      assert.deepEqual(stopped.map((s) => s.reason), ['member_disabled']);
      // An admin may still remind by hand; the mail then speaks for the workspace, not for ada.
      const reminded = await api.signing.RemindSigners({ signing_request_id: request.signing_request_id }, { actAs: ws.members.bob! });
      assert.equal(reminded.response.status, 200, JSON.stringify(reminded.error));
      const last = smtp.to('disabled-member@example.test').at(-1)!.mail;
      assert.doesNotMatch(`${last.text ?? ''}${String(last.html)}`, /Ada Member/);
      assert.match(last.text ?? '', /Acme is still waiting/);
    });

    it('automatic reminders stop once the key may no longer act for the member; a replaced key hands its requests over', async () => {
      const { ws, request } = await requestForAda('delegation@example.test');
      const { request: second } = await requestForAda('rotated@example.test');
      const secondWs = (await svc.db.sql.one<{ workspace_id: string }>(`SELECT workspace_id FROM signing_requests WHERE id = ?`, [second.signing_request_id]))!;
      const secondKey = (await svc.db.sql.one<{ created_by_key_id: string }>(`SELECT created_by_key_id FROM signing_requests WHERE id = ?`, [second.signing_request_id]))!;
      assert.ok(secondWs.workspace_id);
      await changeDelegation(svc.db, svc.clock, ws.keys.sender!.id, [ws.members.bob!]);
      // The second workspace rotates its key: the replacement carries on.
      await replaceKey(svc.db, svc.clock, secondKey.created_by_key_id);
      await revokeKey(svc.db, svc.clock, secondKey.created_by_key_id);
      await remindersAfter(2);
      assert.equal(smtp.to('delegation@example.test').length, 1, 'only the invitation');
      assert.deepEqual((await stopEvents(request.signing_request_id)).map((s) => s.reason), ['delegation_lost']);
      assert.equal(smtp.to('rotated@example.test').length, 3, 'the invitation and two reminders, through the replacing key');
      assert.deepEqual(await stopEvents(second.signing_request_id), []);
      assert.ok((await eventKinds(svc, second.signing_request_id)).includes('reminder.sent'));
    });

    it('a part URL issued while acting for a member stores nothing once that member is disabled, the key may no longer act for them, or their role changed', async () => {
      for (const change of ['disabled', 'delegation', 'role'] as const) {
        const ws = await signingWorkspace(svc);
        const api = svc.client(ws.keys.sender!.secret);
        const created = await api.documents.CreateUpload({ filename: 'part.pdf', content_type: 'application/pdf', size: 10 }, { actAs: ws.members.ada! });
        assert.ok(created.data, JSON.stringify(created.error));
        const part = await api.documents.GetUploadPart({ upload_id: created.data.upload_id, part_number: 1 }, { actAs: ws.members.ada! });
        assert.ok(part.data, JSON.stringify(part.error));
        if (change === 'disabled') await disableMember(svc.db, svc.clock, ws.members.ada!);
        if (change === 'delegation') await changeDelegation(svc.db, svc.clock, ws.keys.sender!.id, [ws.members.bob!]);
        if (change === 'role') await svc.db.sql.run(`UPDATE members SET role = 'admin' WHERE id = ?`, [ws.members.ada!]);
        const res = await put(here(svc, part.data.url), Buffer.from('%PDF-1.7\n\n'));
        assert.equal(res.status, 403, `${change}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.error, 'forbidden');
        assert.equal(typeof res.body.message, 'string');
        const stored = await svc.db.sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM document_upload_parts WHERE upload_id = ?`, [created.data.upload_id]);
        assert.equal(Number(stored!.n), 0, `${change}: nothing stored`);
      }
    });

    it('a part URL still works while nothing changed', async () => {
      const ws = await signingWorkspace(svc);
      const api = svc.client(ws.keys.sender!.secret);
      const created = await api.documents.CreateUpload({ filename: 'part.pdf', content_type: 'application/pdf', size: 10 }, { actAs: ws.members.ada! });
      const part = await api.documents.GetUploadPart({ upload_id: created.data!.upload_id, part_number: 1 }, { actAs: ws.members.ada! });
      const res = await put(here(svc, part.data!.url), Buffer.from('%PDF-1.7\n\n'));
      assert.equal(res.status, 200, JSON.stringify(res.body));
    });

    it('a GetSigningDocument URL is refused once the key is revoked, the member disabled, delegation lost or the role changed; it works until then', async () => {
      for (const change of ['revoked', 'disabled', 'delegation', 'role', 'workspace-revoked'] as const) {
        const ws = await signingWorkspace(svc);
        const api = svc.client(ws.keys.sender!.secret);
        const actAs = change === 'workspace-revoked' ? null : ws.members.ada!;
        const { file } = await putFile(svc, ws.workspace_id, { filename: 'Download me' });
        const created = await api.signing.RequestFileSignatures({ file_id: file.id, signers: [{ email: `dl-${change}@example.test`, name: 'D' }] }, { actAs });
        assert.ok(created.data, JSON.stringify(created.error));
        const doc = await api.signing.GetSigningDocument({ signing_request_id: created.data.signing_request_id, version: 'original' }, { actAs });
        assert.ok(doc.data, JSON.stringify(doc.error));
        const url = here(svc, doc.data.url);
        assert.equal((await fetch(url)).status, 200, 'works before the change');
        if (change === 'revoked' || change === 'workspace-revoked') await revokeKey(svc.db, svc.clock, ws.keys.sender!.id);
        if (change === 'disabled') await disableMember(svc.db, svc.clock, ws.members.ada!);
        if (change === 'delegation') await changeDelegation(svc.db, svc.clock, ws.keys.sender!.id, [ws.members.bob!]);
        if (change === 'role') await svc.db.sql.run(`UPDATE members SET role = 'admin' WHERE id = ?`, [ws.members.ada!]);
        for (const method of ['GET', 'HEAD']) {
          const res = await fetch(url, { method });
          assert.equal(res.status, 403, `${change} ${method}`);
          if (method === 'GET') {
            const body = (await res.json()) as { error: string; message: string };
            assert.equal(body.error, 'forbidden');
            assert.equal(typeof body.message, 'string');
          }
        }
      }
    });
  });
}
