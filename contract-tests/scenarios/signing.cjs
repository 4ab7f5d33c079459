'use strict';
/**
 * Signing. Local runs use what the signing kit made in the fixture workspace (`ctx.signing`, see
 * test/signing/kit.ts: a workspace PDF and requests of the main key, invited two hours ago):
 *  - `pending`: read, its history listed, reminded (200: the invitation is over an hour old), its
 *    deadline moved, its original downloaded;
 *  - `cancel`: cancelled by the 200 case;
 *  - `replace`: its one signer given another address by ReplaceRecipient's 200 case;
 *  - `template` (sent by SendTemplate's 200) and `templateToDelete` (DeleteTemplate's 200);
 *  - `completed`: every command is refused (409: a completed request cannot be cancelled, reminded or
 *    given another deadline) and its signed document is not ready (409: the contract server runs no
 *    jobs, so its archive is never built);
 *  - `inProgress`: an Idempotency-Key recorded as still running, for RequestFileSignatures' 409.
 * RequestFileSignatures (200) sends the kit's file to an example.com address: the contract server has
 * no SMTP server, so the invitation lands in its development mailbox.
 *
 * A deployment run sends no invitation (it would mail a real address) and changes no request: it
 * reads nothing it did not make, so the 200 cases of the reads are skipped with their reason and the
 * 404 cases use ids no request has.
 */

const isOwn = (t, status) => Number(t.expected.statusCode) === status;
const made = (kit) => kit.ctx.signing || null;
const errorSays = (code, pattern) => (body) =>
  body.error === code && pattern.test(body.message) ? null : `expected ${code} with a message matching ${pattern}, got ${body.error}: ${body.message}`;
const DAY = 86_400_000;

/** The request a case works on (local runs), or a missing id and a skip of its 200 (deployment). */
function requestOf(t, kit, which, body = {}) {
  const seeded = made(kit);
  if (!seeded) {
    kit.setBody(t, { signing_request_id: kit.missingId('sr'), ...body });
    if (isOwn(t, 200)) kit.skip(t, 'a deployment run makes no signing request (it would mail a real address), so it has none to read or change.');
    return null;
  }
  kit.setBody(t, { signing_request_id: seeded[which], ...body });
  return seeded[which];
}

module.exports = {
  200: {
    'signing.RequestFileSignatures': (t, kit) => {
      const seeded = made(kit);
      if (!seeded) {
        kit.setBody(t, { ...kit.bodyOf(t), file_id: kit.missingId('file') }); // only ever sent by the 400, 413 and 429 cases
        if (isOwn(t, 200)) kit.skip(t, 'a deployment run sends no invitation: it would mail a real address.');
        return;
      }
      // With fields on the first page: a signature, a labelled text field and an optional check box.
      const fields = [
        { signer: 0, kind: 'signature', page: 1, x: 72, y: 96, width: 180, height: 44 },
        { signer: 0, kind: 'text', page: 1, x: 72, y: 160, width: 200, height: 20, label: 'Order number' },
        { signer: 0, kind: 'checkbox', page: 1, x: 72, y: 200, width: 16, height: 16, required: false },
      ];
      kit.setBody(t, { file_id: seeded.file_id, title: kit.name('request'), signers: [{ email: 'contract-signer@example.com', name: 'Contract Signer' }], message: 'Contract tests', reminder_interval_days: 3, fields });
      kit.expect(t, (body) =>
        body.status === 'pending' && /^sr_/.test(body.signing_request_id) && body.recipients.length === 1 && body.recipients[0].invitation === 'sent' && body.file_id === null && body.source_file_id === seeded.file_id &&
        JSON.stringify(body.fields.map((f) => [f.kind, f.required, f.label, f.value, f.recipient_id === body.recipients[0].recipient_id])) ===
          JSON.stringify([['signature', true, null, null, true], ['text', true, 'Order number', null, true], ['checkbox', false, null, null, true]])
          ? null
          : `expected a pending request over ${seeded.file_id} with its one invitation sent and its 3 fields, got ${JSON.stringify(body)}`,
      );
    },
    'signing.GetSigningRequest': (t, kit) => {
      const id = requestOf(t, kit, 'pending');
      if (id) kit.expect(t, (body) => (body.signing_request_id === id && body.status === 'pending' && body.recipients.length === 1 ? null : `expected pending request ${id}, got ${JSON.stringify(body)}`));
    },
    // Two to a page of the key's requests (the kit made three): has_more and a cursor; a deployment run may have none.
    'signing.ListSigningRequests': (t, kit) => {
      const seeded = made(kit);
      kit.setBody(t, { limit: 2 });
      kit.expect(t, (body) =>
        body.items.length <= 2 && (!seeded || (body.items.length === 2 && body.has_more && body.next_cursor)) ? null : `expected a page of at most 2 requests${seeded ? ' with more after it' : ''}, got ${JSON.stringify(body)}`,
      );
    },
    // One to a page of the pending request's history (created, invitation sent): has_more and a cursor.
    'signing.ListSigningEvents': (t, kit) => {
      const id = requestOf(t, kit, 'pending', { limit: 1 });
      if (id) {
        kit.expect(t, (body) =>
          body.items.length === 1 && body.items[0].kind === 'request.created' && body.has_more && body.next_cursor ? null : `expected request.created first with has_more, got ${JSON.stringify(body)}`,
        );
      }
    },
    'signing.RemindSigners': (t, kit) => {
      const id = requestOf(t, kit, 'pending');
      if (id) kit.expect(t, (body) => (body.recipients[0].last_reminded_at !== null && body.invitation_failures.length === 0 ? null : `expected the signer reminded, got ${JSON.stringify(body)}`));
    },
    'signing.UpdateSigningDeadline': (t, kit) => {
      const deadline = Date.now() + 40 * DAY;
      const id = requestOf(t, kit, 'pending', { deadline_at: deadline });
      if (id) kit.expect(t, (body) => (body.deadline_at === deadline && body.status === 'pending' ? null : `expected deadline ${deadline}, got ${JSON.stringify(body)}`));
    },
    'signing.ReplaceRecipient': (t, kit) => {
      const seeded = made(kit);
      if (!seeded) {
        kit.setBody(t, { signing_request_id: kit.missingId('sr'), recipient_id: kit.missingId('rcp'), email: 'contract-replaced@example.com' });
        if (isOwn(t, 200)) kit.skip(t, 'a deployment run has no request of its own, and a replacement would mail a real address.');
        return;
      }
      kit.setBody(t, { signing_request_id: seeded.replace.request, recipient_id: seeded.replace.recipient, email: 'contract-replaced@example.com', name: 'Contract Replaced' });
      kit.expect(t, (body) => {
        const r = body.recipients.find((c) => c.recipient_id === seeded.replace.recipient);
        return r && r.email === 'contract-replaced@example.com' && r.name === 'Contract Replaced' && r.status === 'pending' && r.invitation === 'sent' ? null : `expected the recipient at the new address and invited, got ${JSON.stringify(body)}`;
      });
    },
    'signing.CreateTemplate': (t, kit) => {
      const seeded = made(kit);
      kit.setBody(t, { ...kit.bodyOf(t), file_id: seeded ? seeded.file_id : kit.missingId('file'), name: kit.name('template') });
      if (!seeded) {
        if (isOwn(t, 200)) kit.skip(t, 'a deployment run has no file of its own to make a template of.');
        return;
      }
      kit.expect(t, (body) =>
        /^tpl_/.test(body.template_id) && body.file_id === seeded.file_id && body.roles.length === 3 && body.fields.length === 2 && body.fields[0].role === 'Client' && body.fields[0].required === true
          ? null
          : `expected a template over ${seeded.file_id} with 3 roles and 2 fields, got ${JSON.stringify(body)}`,
      );
    },
    // The key's templates (a deployment may have none).
    'signing.ListTemplates': (t, kit) => {
      const seeded = made(kit);
      kit.setBody(t, { limit: 2 });
      kit.expect(t, (body) => (body.items.length <= 2 && (!seeded || body.items.length === 2) ? null : `expected a page of at most 2 templates, got ${JSON.stringify(body)}`));
    },
    'signing.DeleteTemplate': (t, kit) => {
      const seeded = made(kit);
      const id = seeded ? seeded.templateToDelete : kit.missingId('tpl');
      kit.setBody(t, { template_id: id });
      kit.expect(t, (body) => (body.template_id === id && body.deleted === Boolean(seeded) ? null : `expected template ${id} deleted: ${Boolean(seeded)}, got ${JSON.stringify(body)}`));
    },
    'signing.SendTemplate': (t, kit) => {
      const seeded = made(kit);
      if (!seeded) {
        kit.setBody(t, { ...kit.bodyOf(t), template_id: kit.missingId('tpl') });
        if (isOwn(t, 200)) kit.skip(t, 'a deployment run sends no invitation: it would mail a real address.');
        return;
      }
      kit.setBody(t, { ...kit.bodyOf(t), template_id: seeded.template });
      kit.expect(t, (body) =>
        body.status === 'pending' && body.recipients.length === 3 && body.recipients[0].invitation === 'sent' && body.recipients[1].invitation === 'waiting' && body.recipients[2].role === 'cc'
          ? null
          : `expected a pending request of the template's three roles, got ${JSON.stringify(body)}`,
      );
    },
    'signing.CancelSigningRequest': (t, kit) => {
      const id = requestOf(t, kit, 'cancel', { reason: 'Contract tests' });
      if (id) kit.expect(t, (body) => (body.status === 'cancelled' && body.cancel_reason === 'Contract tests' ? null : `expected request ${id} cancelled, got ${JSON.stringify(body)}`));
    },
    'signing.GetSigningDocument': (t, kit) => {
      const id = requestOf(t, kit, 'pending', { version: 'original' });
      if (id) kit.expect(t, (body) => (body.signing_request_id === id && /\/files\//.test(body.url) && body.expires_at > Date.now() ? null : `expected a download link of the original, got ${JSON.stringify(body)}`));
    },
    // The kit's upload: no seal, and no request of this workspace made its archive.
    'signing.VerifySignedDocument': (t, kit) => {
      const seeded = made(kit);
      if (!seeded) {
        kit.setBody(t, { file_id: kit.missingId('file') });
        if (isOwn(t, 200)) kit.skip(t, 'a deployment run has no file of its own to verify.');
        return;
      }
      kit.setBody(t, { file_id: seeded.file_id });
      kit.expect(t, (body) => (body.file_id === seeded.file_id && body.signing_request === null ? null : `expected ${seeded.file_id} matched to no request, got ${JSON.stringify(body)}`));
    },
  },

  400: {
    // A cursor this operation never issued.
    'signing.ListSigningRequests': (t, kit) => {
      kit.setBody(t, { status: 'pending', cursor: 'bm90LWEtY3Vyc29y.AAAAAAAAAAAAAAAAAAAAAA' });
      kit.expect(t, errorSays('invalid_input', /not a cursor this operation returned/));
    },
  },

  404: {
    'signing.RequestFileSignatures': (t, kit) => {
      kit.setBody(t, { file_id: kit.missingId('file'), signers: [{ email: 'contract-signer@example.com', name: 'Contract Signer' }] });
      kit.expect(t, errorSays('not_found', /No file .* is visible/));
    },
    'signing.GetSigningRequest': (t, kit) => {
      kit.setBody(t, { signing_request_id: kit.missingId('sr') });
      kit.expect(t, errorSays('not_found', /No signing request .* is visible/));
    },
    'signing.ListSigningEvents': (t, kit) => kit.setBody(t, { signing_request_id: kit.missingId('sr') }),
    'signing.RemindSigners': (t, kit) => kit.setBody(t, { signing_request_id: kit.missingId('sr') }),
    'signing.UpdateSigningDeadline': (t, kit) => kit.setBody(t, { signing_request_id: kit.missingId('sr'), deadline_at: Date.now() + 10 * DAY }),
    'signing.CancelSigningRequest': (t, kit) => kit.setBody(t, { signing_request_id: kit.missingId('sr') }),
    'signing.ReplaceRecipient': (t, kit) => kit.setBody(t, { signing_request_id: kit.missingId('sr'), recipient_id: kit.missingId('rcp'), email: 'contract-replaced@example.com' }),
    'signing.CreateTemplate': (t, kit) => kit.setBody(t, { ...kit.bodyOf(t), file_id: kit.missingId('file') }),
    'signing.SendTemplate': (t, kit) => {
      kit.setBody(t, { ...kit.bodyOf(t), template_id: kit.missingId('tpl') });
      kit.expect(t, errorSays('not_found', /No template .* is visible/));
    },
    // An absent template is 200 deleted: false (a retry); 404 is a template the caller cannot see: another member's private one.
    'signing.DeleteTemplate': (t, kit) => kit.skip(t, "DeleteTemplate answers 404 only for another member's private template; the contract key acts for no member who has one."),
    'signing.GetSigningDocument': (t, kit) => kit.setBody(t, { signing_request_id: kit.missingId('sr'), version: 'original' }),
    'signing.VerifySignedDocument': (t, kit) => kit.setBody(t, { file_id: kit.missingId('file') }),
  },

  409: {
    'signing.RequestFileSignatures': (t, kit) => {
      const seeded = made(kit);
      if (!seeded) {
        return kit.skip(t, 'RequestFileSignatures answers 409 while a request with the same Idempotency-Key is still in progress (or on short bankid credit); a deployment run cannot arrange either.');
      }
      t.request.headers['Idempotency-Key'] = seeded.inProgress.idempotencyKey;
      kit.setBody(t, seeded.inProgress.body);
      kit.expect(t, errorSays('conflict', /still in progress/));
    },
    'signing.RemindSigners': (t, kit) => {
      if (!made(kit)) return kit.skip(t, 'RemindSigners answers 409 for a request that is not pending; a deployment run has none of its own.');
      requestOf(t, kit, 'completed');
      kit.expect(t, errorSays('conflict', /is completed; only a pending request can be reminded/));
    },
    'signing.UpdateSigningDeadline': (t, kit) => {
      if (!made(kit)) return kit.skip(t, 'UpdateSigningDeadline answers 409 for a request that is not pending; a deployment run has none of its own.');
      requestOf(t, kit, 'completed', { deadline_at: Date.now() + 10 * DAY });
      kit.expect(t, errorSays('conflict', /only a pending request's deadline can change/));
    },
    'signing.CreateTemplate': (t, kit) => kit.skip(t, 'CreateTemplate answers 409 once a workspace keeps 500 templates; a contract run does not make 500.'),
    'signing.SendTemplate': (t, kit) =>
      kit.skip(t, 'SendTemplate answers 409 while a send with the same Idempotency-Key is still in progress, or on short bankid credit (as RequestFileSignatures, whose 409 is tested).'),
    'signing.ReplaceRecipient': (t, kit) => {
      if (!made(kit)) return kit.skip(t, 'ReplaceRecipient answers 409 for a request that is not pending; a deployment run has none of its own.');
      requestOf(t, kit, 'completed', { recipient_id: kit.missingId('rcp'), email: 'contract-replaced@example.com' });
      kit.expect(t, errorSays('conflict', /only a pending request's recipients can be replaced/));
    },
    'signing.CancelSigningRequest': (t, kit) => {
      if (!made(kit)) return kit.skip(t, 'CancelSigningRequest answers 409 for a completed request; a deployment run has none of its own.');
      requestOf(t, kit, 'completed');
      kit.expect(t, errorSays('conflict', /^A completed request cannot be cancelled/));
    },
    'signing.GetSigningDocument': (t, kit) => {
      if (!made(kit)) return kit.skip(t, 'GetSigningDocument answers 409 while the signed archive is not ready; a deployment run has no request of its own.');
      requestOf(t, kit, 'completed', { version: 'signed' });
      kit.expect(t, errorSays('conflict', /still being prepared/));
    },
  },
};
