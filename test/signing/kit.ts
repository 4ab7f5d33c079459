/**
 * What signing brings to the shared harness (test/support/kit.ts): a PDF file of the fixture workspace
 * and signing requests in the states the cases need, made by the harness's main key as
 * signing.RequestFileSignatures leaves them (its invitations long sent, so a reminder is due). Every
 * run makes a new workspace, so a reused database (PostgreSQL) gets fresh ones.
 */
import crypto from 'node:crypto';
import type { Database } from '../../db/database.ts';
import { lockReceipt, releaseReceipt } from '../../db/queries/idempotency.ts';
import { createFile } from '../../handlers/documents/files.ts';
import { appendEvent, insertRecipient, insertRequest, type RequestStatus } from '../../handlers/signing/queries.ts';
import type { Clock } from '../../server/clock.ts';
import { requestFingerprint } from '../../server/idempotency.ts';
import { newId } from '../../server/ids.ts';
import { createBlobStore, storageConfigFromEnv } from '../../server/storage.ts';
import type { Seed, TestKit } from '../support/kit.ts';
import { samplePdf } from './signerKit.ts';

const HOUR = 3_600_000;

/** What the contract scenarios read as `ctx.signing`. */
export interface ContractSigning {
  /** A workspace PDF the main key may send (`file_...`). */
  file_id: string;
  /** Pending, invited 2 hours ago: read, reminded, its deadline moved, its original downloaded. */
  pending: string;
  /** Pending: cancelled by the 200 case. */
  cancel: string;
  /** Completed (its archive not built: the contract server runs no jobs): every command is 409, and the signed document. */
  completed: string;
  /** Pending: its one recipient is given another address by the 200 case of ReplaceRecipient. */
  replace: { request: string; recipient: string };
  /** A template of the main key over the file (roles Client, Consultant, CC Legal): sent by SendTemplate's 200. */
  template: string;
  /** A template of the main key deleted by DeleteTemplate's 200. */
  templateToDelete: string;
  /** An Idempotency-Key of the main key recorded as in progress for RequestFileSignatures, with the body to send (its 409). */
  inProgress: { idempotencyKey: string; body: unknown; scope: string };
}

/** A workspace file holding a small PDF, as a completed upload leaves it. */
export async function seedFile(db: Database, clock: Clock, workspaceId: string, keyId: string | null): Promise<string> {
  const bytes = Buffer.from(await samplePdf('Contract fixture agreement', 1));
  const blob = await createBlobStore(db, clock, storageConfigFromEnv(process.env)).put(null, [bytes], { contentType: 'application/pdf' });
  const file = await createFile(
    db.sql,
    {
      workspaceId,
      ownerMemberId: null,
      createdByKeyId: keyId,
      filename: 'Contract fixture agreement.pdf',
      contentType: 'application/pdf',
      size: bytes.length,
      sha256: blob.sha256,
      pageCount: 1,
      blobId: blob.id,
      source: 'upload',
    },
    clock.now(),
  );
  return file.id;
}

/** A template of the main key over `fileId`, with the roles of the operations' examples (Client, Consultant, CC Legal). */
async function seedTemplate(seed: Seed, fileId: string, name: string): Promise<string> {
  const id = newId('tpl');
  await seed.db.sql.run(
    `INSERT INTO signing_templates (id, workspace_id, name, file_id, title, message, signature_method, roles, private, owner_member_id, created_by_key_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [id, seed.ws.workspace_id, name, fileId, null, null, 'standard', JSON.stringify([{ role: 'Client', order: 1, cc: false }, { role: 'Consultant', order: 2, cc: false }, { role: 'Legal', order: 1, cc: true }]), false, null, seed.key.id, seed.clock.now()],
  );
  return id;
}

/** A request of the key, invited two hours ago, in `status` (completed: its one signer signed). */
export async function seedRequest(seed: Seed, fileId: string, status: RequestStatus, title: string): Promise<string> {
  const now = seed.clock.now();
  const sent = now - 2 * HOUR;
  const id = newId('sr');
  const done = status === 'completed';
  const file = (await seed.db.sql.one<{ sha256: string }>(`SELECT sha256 FROM document_files WHERE id = ?`, [fileId]))!;
  await insertRequest(seed.db.sql, {
    id,
    workspace_id: seed.ws.workspace_id,
    title,
    message: null,
    signature_method: 'standard',
    status,
    source_file_id: fileId,
    source_sha256: file.sha256,
    private: false,
    owner_member_id: null,
    created_by_key_id: seed.key.id,
    deadline_at: now + 30 * 24 * HOUR,
    reminder_interval_days: null,
    created_at: sent,
    updated_at: now,
    completed_at: done ? now - HOUR : null,
    cancelled_at: null,
    cancel_reason: null,
    expired_at: null,
    archive_file_id: null,
    archive_sha256: null,
    archive_error: null,
  });
  const recipientId = newId('rcp');
  await insertRecipient(seed.db.sql, {
    id: recipientId,
    request_id: id,
    position: 0,
    signing_order: 1,
    role: 'signer',
    email: 'contract-signer@example.com',
    name: 'Contract Signer',
    status: done ? 'signed' : 'pending',
    invitation_status: 'sent',
    invitation_error: null,
    invitation_attempts: 1,
    invited_at: sent,
    last_reminded_at: null,
    auto_reminders: 0,
    opened_at: done ? now - HOUR : null,
    signed_at: done ? now - HOUR : null,
    declined_at: null,
    decline_reason: null,
    typed_name: done ? 'Contract Signer' : null,
    ip: null,
    user_agent: null,
    provider_evidence: null,
  });
  const base = { requestId: id, workspaceId: seed.ws.workspace_id };
  await appendEvent(seed.db.sql, { ...base, kind: 'request.created', data: { title, signature_method: 'standard', signers: 1, deadline_at: now + 30 * 24 * HOUR, private: false }, at: sent });
  await appendEvent(seed.db.sql, { ...base, kind: 'invitation.sent', recipientId, data: { reminder: false, attempt: 1 }, at: sent });
  if (done) {
    await appendEvent(seed.db.sql, { ...base, kind: 'recipient.signed', recipientId, data: { signature_method: 'standard' }, at: now - HOUR });
    await appendEvent(seed.db.sql, { ...base, kind: 'request.completed', data: { signers: 1 }, at: now - HOUR });
  }
  return id;
}

export const kit: TestKit = {
  badInput: {
    /** A file and two pending requests (ListSigningRequests pages): real `file`, `sr` and `rcp` ids for the generated cases. */
    async seed(seed) {
      const file = await seedFile(seed.db, seed.clock, seed.ws.workspace_id, seed.key.id);
      const sr = await seedRequest(seed, file, 'pending', 'Bad input fixture');
      await seedRequest(seed, file, 'pending', 'Bad input fixture, a second page');
      // The request's one recipient (ReplaceRecipient's example names a recipient).
      const rcp = (await seed.db.sql.one<{ id: string }>(`SELECT id FROM signing_recipients WHERE request_id = ?`, [sr]))!.id;
      // A template of the main key over the file (its example names a template and its roles).
      const tpl = await seedTemplate(seed, file, 'Bad input template');
      return { file, sr, rcp, tpl };
    },
  },
  contract: {
    async seed(seed): Promise<ContractSigning> {
      const file = await seedFile(seed.db, seed.clock, seed.ws.workspace_id, seed.key.id);
      // Exactly what the platform stores when a request with this key starts (server/idempotency.ts): the
      // receipt lock, not yet completed, under the fingerprint of the body with its defaults filled in.
      const operationId = 'signing.RequestFileSignatures';
      const body = { file_id: file, signers: [{ email: 'contract-in-progress@example.com', name: 'In Progress' }], signature_method: 'standard' };
      const scope = `${seed.key.id}:-`;
      const idempotencyKey = `contract-in-progress-${crypto.randomUUID()}`;
      if (!(await lockReceipt(seed.db.sql, { scope, key: idempotencyKey }, operationId, requestFingerprint(operationId, body), seed.clock.now()))) {
        throw new Error(`could not record the in-progress idempotency receipt of ${operationId}`);
      }
      return {
        file_id: file,
        pending: await seedRequest(seed, file, 'pending', 'Contract pending request'),
        cancel: await seedRequest(seed, file, 'pending', 'Contract request to cancel'),
        completed: await seedRequest(seed, file, 'completed', 'Contract completed request'),
        replace: await (async () => {
          const request = await seedRequest(seed, file, 'pending', 'Contract request whose signer is replaced');
          const recipient = (await seed.db.sql.one<{ id: string }>(`SELECT id FROM signing_recipients WHERE request_id = ?`, [request]))!.id;
          return { request, recipient };
        })(),
        template: await seedTemplate(seed, file, 'Contract template'),
        templateToDelete: await seedTemplate(seed, file, 'Contract template to delete'),
        inProgress: { idempotencyKey, body, scope },
      };
    },
    // The never-finished receipt, so a reused database (PostgreSQL) does not collect it.
    async cleanup(db, seeded) {
      const receipt = (seeded as ContractSigning | undefined)?.inProgress;
      if (receipt) await releaseReceipt(db.sql, { scope: receipt.scope, key: receipt.idempotencyKey });
    },
  },
};
