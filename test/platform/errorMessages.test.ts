/**
 * Errors that explain themselves (issue 16): an unknown field names the nearest known one or lists the
 * few there are, a missing Idempotency-Key says what to send and why, an unknown operation names the
 * nearest one. Always `400 invalid_input` (or the documented status) with `{error, message}`.
 */
import assert from 'node:assert/strict';
import { nearest } from '../../server/suggest.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

describe('suggestions', () => {
  it('suggest the nearest name for a slip, and nothing for a stranger', () => {
    assert.equal(nearest('limt', ['limit', 'cursor']), 'limit');
    assert.equal(nearest('page_size', ['pageSize', 'cursor']), 'pageSize');
    assert.equal(nearest('Cursor', ['limit', 'cursor']), 'cursor');
    assert.equal(nearest('colour', ['limit', 'cursor']), null);
  });
});

forEachDatabase('error messages', (svc) => {
  it('name the nearest known field, list the few known ones, and say what an Idempotency-Key is for', async () => {
    const ws = await svc().apply(acme());
    const auth = { Authorization: `Bearer ${ws.keys.ci!.secret}` };
    const slip = await svc().post('customers.ListSalesPipelines', { limt: 5 }, auth);
    assert.equal(slip.status, 400);
    assert.equal(slip.body.error, 'invalid_input');
    assert.match(slip.body.message, /^body\.limt is not a known field \(did you mean `limit`\?\)$/);
    const stranger = await svc().post('customers.GetSalesPipeline', { id: 'sp_x', colour: 'red' }, auth);
    assert.equal(stranger.status, 400);
    assert.match(stranger.body.message, /^body\.colour is not a known field \(known fields: `id`\)$/);
    const broken = await svc().post('customers.ListSalesPipelines', '{"limit": 5,\n "cursor": }', auth);
    assert.equal(broken.status, 400);
    assert.equal(broken.body.error, 'invalid_json');
    assert.match(broken.body.message, /^The body is not valid JSON: unexpected token '\}'\.$/);
    const cut = await svc().post('customers.ListSalesPipelines', '{"limit": 5', auth);
    assert.match(cut.body.message, /^The body is not valid JSON: expected ',' or '\}' after property value at line 1, column 12\.$/);
    const noKey = await svc().post('customers.CreateSalesPipeline', { data: { name: 'x' } }, auth);
    assert.equal(noKey.status, 400);
    assert.match(noKey.body.message, /^header idempotency-key is required: every command takes an Idempotency-Key header \(1 to 200 characters, e\.g\. a UUID v4\); a retry with the same key and body answers the first response instead of acting twice$/);
  });
});
