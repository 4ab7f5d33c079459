import assert from 'node:assert/strict';
import { disableMember } from '../../server/admin.ts';
import type { RequestBody } from '../../generated/client.ts';
import { acme, createCompany } from '../support/fixtures.ts';
import { assertRefused, eventsOf } from '../support/refusals.ts';
import { forEachDatabase } from '../support/service.ts';

type CompanyData = RequestBody<'customers.CreateCompany'>['data'];

forEachDatabase('companies', (svc) => {
  it('creates, reads, lists, updates and deletes a company in the record envelope, with change events', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.sales!.secret);
    const data: CompanyData = {
      name: 'Globex Corporation',
      domain: 'https://www.Globex.com/about?utm=1',
      industry: 'Manufacturing',
      employee_count: 250,
      annual_revenue: { amount: '12500000', currency: 'USD' },
      phone: '+15415550100',
      website: 'https://www.globex.com/',
      address: { street: '1 Globex Way', city: 'Springfield', region: 'OR', postal_code: '97475', country: 'US' },
      lifecycle_stage: 'prospect',
      owner_member_id: ws.members.olga!,
    };
    const created = await api.customers.CreateCompany({ data });
    assert.equal(created.response.status, 200, JSON.stringify(created.error));
    const item = created.data!.item;
    assert.match(item.id, /^co_/);
    assert.equal(item.created_by, null);
    assert.equal(item.private, false);
    assert.equal(item.created_at, svc().clock.now());
    assert.equal(item.updated_at, item.created_at);
    assert.deepEqual(item.data, { ...data, domain: 'globex.com', annual_revenue: { amount: '12500000.00', currency: 'USD' } });
    assert.deepEqual((await api.customers.GetCompany({ id: item.id })).data!.item, item);

    svc().clock.advance(1000);
    const updated = await api.customers.UpdateCompany({
      id: item.id,
      data: { lifecycle_stage: 'customer', employee_count: 310 },
      unset: ['phone'],
      expected: { lifecycle_stage: 'prospect', domain: 'WWW.GLOBEX.COM' },
    });
    assert.equal(updated.response.status, 200, JSON.stringify(updated.error));
    assert.equal(updated.data!.item.updated_at, item.created_at + 1000);
    assert.equal(updated.data!.item.data.lifecycle_stage, 'customer');
    assert.equal(updated.data!.item.data.phone, undefined);

    const list = (await api.customers.ListCompanies({})).data!;
    assert.deepEqual(list.items, [updated.data!.item]);
    assert.equal(list.has_more, false);
    assert.equal(list.next_cursor, null);

    assert.deepEqual((await api.customers.DeleteCompany({ id: item.id, expected: { domain: 'globex.com' } })).data, { id: item.id, deleted: true });
    assert.deepEqual((await api.customers.DeleteCompany({ id: item.id })).data, { id: item.id, deleted: false });
    assertRefused(await api.customers.GetCompany({ id: item.id }), 404, 'not_found');

    assert.deepEqual(await eventsOf(svc(), ws.workspace_id), [
      ['resource.created', item.id, null],
      ['resource.updated', item.id, ['employee_count', 'lifecycle_stage', 'phone']],
      ['resource.deleted', item.id, null],
    ]);
  });

  it('normalises the domain: one company for every form of it, and nonsense refused', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.sales!.secret);
    const forms = ['globex.com', 'Globex.COM', 'www.globex.com', 'http://globex.com', 'https://WWW.Globex.com:8443/x/y?q=1#top', 'globex.com.', '  globex.com  ', 'globex.com/path'];
    const first = (await api.customers.UpsertCompany({ data: { name: 'Globex', domain: forms[0]! } })).data!;
    assert.equal(first.created, true);
    for (const domain of forms) {
      const res = await api.customers.UpsertCompany({ data: { name: 'Globex', domain } });
      assert.equal(res.response.status, 200, `${domain}: ${JSON.stringify(res.error)}`);
      assert.equal(res.data!.created, false, domain);
      assert.equal(res.data!.item.id, first.item.id, domain);
      assert.equal(res.data!.item.data.domain, 'globex.com', domain);
    }
    // Internationalised names are stored in their ASCII form; a second-level www stays.
    assert.equal((await api.customers.CreateCompany(createCompany('Bücher', 'https://www.bücher.example'))).data!.item.data.domain, 'xn--bcher-kva.example');
    assert.equal((await api.customers.CreateCompany(createCompany('WWW', 'www.com'))).data!.item.data.domain, 'www.com');
    for (const domain of ['localhost', '192.168.0.1', 'http://[::1]/', 'ftp://globex.com', 'mailto:sales@globex.com', 'sales@globex.com', 'glo bex.com', 'globex..com', '-globex.com', 'globex_corp.com', '.com']) {
      const res = await api.customers.CreateCompany(createCompany('Bad', domain));
      assertRefused(res, 400, 'invalid_input', /domain/);
    }
    assert.equal((await api.customers.ListCompanies({})).data!.items.length, 3);
  });

  it('keeps a domain unique among the shared companies and within each member\'s private ones', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.sales!.secret);
    const ada = svc().client(ws.keys.sales!.secret, ws.members.ada);
    const olga = svc().client(ws.keys.sales!.secret, ws.members.olga);
    const globex = (await api.customers.CreateCompany(createCompany('Globex', 'globex.com'))).data!.item;
    const before = await eventsOf(svc(), ws.workspace_id);

    const again = await api.customers.CreateCompany(createCompany('Globex again', 'https://www.globex.com'));
    assertRefused(again, 409, 'conflict', new RegExp(`globex\\.com.*${globex.id}`));
    const initech = (await api.customers.CreateCompany(createCompany('Initech', 'initech.com'))).data!.item;
    assertRefused(await api.customers.UpdateCompany({ id: initech.id, data: { domain: 'GLOBEX.com' } }), 409, 'conflict', new RegExp(globex.id));
    assert.equal((await api.customers.GetCompany({ id: initech.id })).data!.item.data.domain, 'initech.com');
    // The same domain in another form is no change at all.
    const same = await api.customers.UpdateCompany({ id: globex.id, data: { domain: 'www.Globex.com' } });
    assert.equal(same.data!.item.updated_at, globex.updated_at);

    // Private scopes are separate: from the shared companies and from each other.
    const adaGlobex = await ada.customers.CreateCompany({ ...createCompany('My Globex', 'globex.com'), private: true });
    assert.equal(adaGlobex.response.status, 200, JSON.stringify(adaGlobex.error));
    assert.equal((await olga.customers.CreateCompany({ ...createCompany('Olga Globex', 'globex.com'), private: true })).response.status, 200);
    assertRefused(await ada.customers.CreateCompany({ ...createCompany('Ada twice', 'globex.com'), private: true }), 409, 'conflict');
    // Removing a domain frees it; companies without a domain do not collide.
    await api.customers.UpdateCompany({ id: globex.id, unset: ['domain'] });
    assert.equal((await api.customers.CreateCompany(createCompany('Globex 2', 'globex.com'))).response.status, 200);
    assert.equal((await api.customers.CreateCompany({ data: { name: 'No domain' } })).response.status, 200);
    assert.equal((await api.customers.CreateCompany({ data: { name: 'No domain either' } })).response.status, 200);
    const events = await eventsOf(svc(), ws.workspace_id);
    assert.deepEqual(events.slice(0, before.length), before);
    assert.equal(events.filter(([type]) => type === 'resource.created').length, 7);
  });

  it('upserts by domain: creates, then updates the one match; name is needed only to create', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.sales!.secret);
    const ada = svc().client(ws.keys.sales!.secret, ws.members.ada);
    assertRefused(await api.customers.UpsertCompany({ data: { domain: 'initech.com', industry: 'Software' } }), 400, 'invalid_input', /data\.name is required/);
    const first = await api.customers.UpsertCompany({ data: { name: 'Initech', domain: 'initech.com', employee_count: null }, expected: { name: { $absent: true } } });
    assert.equal(first.data!.created, true);
    svc().clock.advance(10);
    const second = await api.customers.UpsertCompany({ data: { domain: 'https://initech.com', industry: 'Software' }, unset: ['employee_count'], expected: { employee_count: null } });
    assert.equal(second.data!.created, false);
    assert.equal(second.data!.item.id, first.data!.item.id);
    assert.deepEqual(second.data!.item.data, { name: 'Initech', domain: 'initech.com', industry: 'Software' });
    assertRefused(await api.customers.UpsertCompany({ data: { domain: 'initech.com' }, expected: { industry: 'Banking' } }), 409, 'conflict');
    assertRefused(await api.customers.UpsertCompany({ data: { name: 'Fresh', domain: 'fresh.example' }, expected: { name: 'Fresh' } }), 409, 'conflict');
    const unchanged = await api.customers.UpsertCompany({ data: { domain: 'INITECH.com', name: 'Initech' } });
    assert.equal(unchanged.data!.item.updated_at, second.data!.item.updated_at);
    // A private upsert matches only the member's private companies.
    const mine = await ada.customers.UpsertCompany({ data: { name: 'My Initech', domain: 'initech.com' }, private: true });
    assert.equal(mine.data!.created, true);
    assert.equal(mine.data!.item.private, true);
    assertRefused(await api.customers.UpsertCompany({ data: { name: 'x', domain: 'initech.com' }, private: true }), 400, 'invalid_input', /Service-Act-As/);
    // Concurrent upserts of one domain create one company.
    const race = await Promise.all(Array.from({ length: 8 }, (_, i) => api.customers.UpsertCompany({ data: { name: `Race ${i}`, domain: i % 2 ? 'race.example' : 'WWW.race.example' } })));
    assert.ok(race.every((r) => r.response.status === 200), JSON.stringify(race.map((r) => r.error)));
    assert.equal(race.filter((r) => r.data!.created).length, 1);
    assert.equal((await api.customers.ListCompanies({ limit: 100 })).data!.items.filter((c) => c.data.domain === 'race.example').length, 1);
    assert.deepEqual((await eventsOf(svc(), ws.workspace_id)).map(([type]) => type).filter((t) => t === 'resource.created').length, 3);
  });

  it('tells null ("known to be unknown") from absence ("not given") in employee_count', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.sales!.secret);
    const absent = (await api.customers.CreateCompany({ data: { name: 'Quiet' } })).data!.item;
    assert.equal('employee_count' in absent.data, false);
    const unknown = (await api.customers.CreateCompany({ data: { name: 'Secretive', employee_count: null } })).data!.item;
    assert.equal(unknown.data.employee_count, null);
    assert.deepEqual((await api.customers.GetCompany({ id: unknown.id })).data!.item.data, { name: 'Secretive', employee_count: null });

    // expected: null matches only null, $absent only a missing field.
    assertRefused(await api.customers.UpdateCompany({ id: absent.id, data: { name: 'x' }, expected: { employee_count: null } }), 409, 'conflict');
    assertRefused(await api.customers.UpdateCompany({ id: unknown.id, data: { name: 'x' }, expected: { employee_count: { $absent: true } } }), 409, 'conflict');
    svc().clock.advance(5);
    const toNull = await api.customers.UpdateCompany({ id: absent.id, data: { employee_count: null }, expected: { employee_count: { $absent: true } } });
    assert.equal(toNull.data!.item.data.employee_count, null);
    assert.equal(toNull.data!.item.updated_at, absent.updated_at + 5);
    const noop = await api.customers.UpdateCompany({ id: absent.id, data: { employee_count: null } });
    assert.equal(noop.data!.item.updated_at, absent.updated_at + 5);
    const toZero = await api.customers.UpdateCompany({ id: absent.id, data: { employee_count: 0 }, expected: { employee_count: null } });
    assert.equal(toZero.data!.item.data.employee_count, 0);
    const removed = await api.customers.UpdateCompany({ id: absent.id, unset: ['employee_count'], expected: { employee_count: 0 } });
    assert.equal('employee_count' in removed.data!.item.data, false);

    const auth = { Authorization: `Bearer ${ws.keys.sales!.secret}` };
    for (const [i, bad] of [-1, 1.5, '12', 100_000_001, true].entries()) {
      const res = await svc().post('customers.CreateCompany', { data: { name: 'Bad', employee_count: bad } }, { ...auth, 'Idempotency-Key': `ec-${i}` });
      assert.equal(res.status, 400, JSON.stringify(bad));
      assert.deepEqual(Object.keys(res.body).sort(), ['error', 'message', 'request_id']);
      assert.equal(res.body.error, 'invalid_input');
    }
    // Fields whose type does not include null refuse it.
    for (const [i, field] of ['industry', 'domain', 'annual_revenue', 'lifecycle_stage', 'address'].entries()) {
      const res = await svc().post('customers.CreateCompany', { data: { name: 'Bad', [field]: null } }, { ...auth, 'Idempotency-Key': `null-${i}` });
      assert.equal(res.status, 400, field);
      assert.equal(res.body.error, 'invalid_input');
    }
    assert.deepEqual((await eventsOf(svc(), ws.workspace_id)).map(([type, , fields]) => [type, fields]), [
      ['resource.created', null],
      ['resource.created', null],
      ['resource.updated', ['employee_count']],
      ['resource.updated', ['employee_count']],
      ['resource.updated', ['employee_count']],
    ]);
  });

  it('keeps money exact: decimal strings with the currency\'s decimals, never a float', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.sales!.secret);
    const cases: Array<[string, string, string]> = [
      ['1200', 'EUR', '1200.00'],
      ['1200.5', 'EUR', '1200.50'],
      ['0.1', 'USD', '0.10'],
      ['999999999999999.99', 'USD', '999999999999999.99'],
      ['1500', 'JPY', '1500'],
      ['12.345', 'BHD', '12.345'],
      ['7', 'KWD', '7.000'],
      ['0', 'SEK', '0.00'],
    ];
    for (const [amount, currency, stored] of cases) {
      const res = await api.customers.CreateCompany({ data: { name: `${amount} ${currency}`, annual_revenue: { amount, currency: currency as 'EUR' } } });
      assert.equal(res.response.status, 200, JSON.stringify(res.error));
      assert.deepEqual(res.data!.item.data.annual_revenue, { amount: stored, currency });
    }
    // expected compares in the stored form.
    const c = (await api.customers.CreateCompany({ data: { name: 'Revenue', annual_revenue: { amount: '100', currency: 'EUR' } } })).data!.item;
    const ok = await api.customers.UpdateCompany({ id: c.id, data: { annual_revenue: { amount: '100.10', currency: 'EUR' } }, expected: { annual_revenue: { currency: 'EUR', amount: '100.0' } } });
    assert.equal(ok.response.status, 200, JSON.stringify(ok.error));
    const same = await api.customers.UpdateCompany({ id: c.id, data: { annual_revenue: { amount: '100.1', currency: 'EUR' } } });
    assert.equal(same.data!.item.updated_at, ok.data!.item.updated_at);

    const auth = { Authorization: `Bearer ${ws.keys.sales!.secret}` };
    const bad: Array<[string, unknown]> = [
      ['a JSON number', { amount: 1200.5, currency: 'EUR' }],
      ['an integer number', { amount: 1200, currency: 'EUR' }],
      ['too many decimals for EUR', { amount: '1.005', currency: 'EUR' }],
      ['decimals for JPY', { amount: '1500.5', currency: 'JPY' }],
      ['four decimals for BHD', { amount: '1.2345', currency: 'BHD' }],
      ['a negative amount', { amount: '-5.00', currency: 'EUR' }],
      ['an exponent', { amount: '1e3', currency: 'EUR' }],
      ['a leading zero', { amount: '01.00', currency: 'EUR' }],
      ['thousands separators', { amount: '1,200.00', currency: 'EUR' }],
      ['16 integer digits', { amount: '1000000000000000', currency: 'EUR' }],
      ['a trailing point', { amount: '12.', currency: 'EUR' }],
      ['an unknown currency', { amount: '1.00', currency: 'XYZ' }],
      ['a lower-case currency', { amount: '1.00', currency: 'eur' }],
      ['no currency', { amount: '1.00' }],
      ['an extra field', { amount: '1.00', currency: 'EUR', precision: 2 }],
    ];
    for (const [i, [what, money]] of bad.entries()) {
      const res = await svc().post('customers.CreateCompany', { data: { name: 'Bad', annual_revenue: money } }, { ...auth, 'Idempotency-Key': `money-${i}` });
      assert.equal(res.status, 400, `${what}: ${JSON.stringify(res.body)}`);
      assert.deepEqual(Object.keys(res.body).sort(), ['error', 'message', 'request_id'], what);
      assert.equal(res.body.error, 'invalid_input', what);
    }
    assert.equal((await api.customers.ListCompanies({ limit: 100 })).data!.items.length, cases.length + 1);
  });

  it('accepts as owner_member_id only null or an active member of the workspace', async () => {
    const ws = await svc().apply(acme());
    const other = await svc().apply(acme());
    const api = svc().client(ws.keys.sales!.secret);
    const owned = await api.customers.CreateCompany({ data: { name: 'Owned', owner_member_id: ws.members.ada! } });
    assert.equal(owned.response.status, 200, JSON.stringify(owned.error));
    assert.equal((await api.customers.CreateCompany({ data: { name: 'Unowned', owner_member_id: null } })).data!.item.data.owner_member_id, null);
    for (const [why, id] of [
      ['a disabled member', ws.members.max!],
      ['a member of another workspace', other.members.olga!],
      ['an unknown id', 'mb_nobody'],
    ] as const) {
      assertRefused(await api.customers.CreateCompany({ data: { name: why, owner_member_id: id } }), 400, 'invalid_input', /owner_member_id/);
      assertRefused(await api.customers.UpdateCompany({ id: owned.data!.item.id, data: { owner_member_id: id } }), 400, 'invalid_input', /owner_member_id/);
    }
    // An owner disabled later stays; other fields still change.
    await disableMember(svc().db, svc().clock, ws.members.ada!);
    const later = await api.customers.UpdateCompany({ id: owned.data!.item.id, data: { industry: 'Retail' } });
    assert.equal(later.response.status, 200, JSON.stringify(later.error));
    assert.equal(later.data!.item.data.owner_member_id, ws.members.ada);
    assertRefused(await api.customers.CreateCompany({ data: { name: 'Now disabled', owner_member_id: ws.members.ada! } }), 400, 'invalid_input');
    assert.equal((await api.customers.UpdateCompany({ id: owned.data!.item.id, data: { owner_member_id: null } })).data!.item.data.owner_member_id, null);
    assert.equal((await api.customers.ListCompanies({})).data!.items.length, 2);
  });

  it('refuses a write whose expected values no longer match, with 409 and no write or event', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.sales!.secret);
    const item = (await api.customers.CreateCompany({ data: { name: 'A', domain: 'a.example', industry: 'Software', address: { city: 'Oslo', country: 'NO' } } })).data!.item;
    const cases: Array<NonNullable<RequestBody<'customers.UpdateCompany'>['expected']>> = [
      { name: 'B' },
      { name: { $absent: true } },
      { industry: { $absent: true } },
      { phone: '+4712345678' },
      { employee_count: null },
      { domain: 'b.example' },
      { address: { city: 'Oslo' } },
      { address: { city: 'Oslo', country: 'SE' } },
      { name: 'A', lifecycle_stage: 'lead' },
    ];
    for (const expected of cases) {
      assertRefused(await api.customers.UpdateCompany({ id: item.id, data: { name: 'C' }, expected }), 409, 'conflict', /expected\./);
      assertRefused(await api.customers.DeleteCompany({ id: item.id, expected }), 409, 'conflict');
    }
    assertRefused(await api.customers.UpsertCompany({ data: { domain: 'a.example', name: 'C' }, expected: { name: 'B' } }), 409, 'conflict');
    const keyOrder = await api.customers.UpdateCompany({ id: item.id, data: { name: 'A2' }, expected: { address: { country: 'NO', city: 'Oslo' }, phone: { $absent: true } } });
    assert.equal(keyOrder.response.status, 200);
    assert.deepEqual(await eventsOf(svc(), ws.workspace_id), [
      ['resource.created', item.id, null],
      ['resource.updated', item.id, ['name']],
    ]);
  });

  it('refuses unsetting name, setting and unsetting one field, read-only or unknown fields', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.sales!.secret);
    const { item } = (await api.customers.CreateCompany(createCompany('A', 'a.example'))).data!;
    assertRefused(await api.customers.UpdateCompany({ id: item.id, unset: ['name'] }), 400, 'invalid_input', /name/);
    assertRefused(await api.customers.UpdateCompany({ id: item.id, data: { industry: 'x' }, unset: ['industry'] }), 400, 'invalid_input', /industry/);
    const auth = { Authorization: `Bearer ${ws.keys.sales!.secret}` };
    for (const [i, body] of [
      { id: item.id, data: { colour: 'red' } },
      { id: item.id, data: { address: { city: 'Oslo', planet: 'Earth' } } },
      { id: item.id, data: { address: {} } },
      { id: item.id, data: { address: { country: 'Norway' } } },
      { id: item.id, data: { website: 'globex.com' } },
      { id: item.id, data: { lifecycle_stage: 'Customer' } },
      { id: item.id, unset: ['domain', 'domain'] },
      { id: item.id, unset: ['data.industry'] },
      { id: item.id, expected: { domain: { $absent: false } } },
    ].entries()) {
      const res = await svc().post('customers.UpdateCompany', body, { ...auth, 'Idempotency-Key': `bad-${i}` });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.deepEqual(Object.keys(res.body).sort(), ['error', 'message', 'request_id']);
      assert.equal(res.body.error, 'invalid_input');
    }
    assert.deepEqual((await api.customers.GetCompany({ id: item.id })).data!.item, item);
    assert.equal((await eventsOf(svc(), ws.workspace_id)).length, 1);
  });

  it('keeps private companies visible only to their owner, and acting for members follows their role', async () => {
    const ws = await svc().apply(acme());
    const ada = svc().client(ws.keys.sales!.secret, ws.members.ada);
    const olga = svc().client(ws.keys.sales!.secret, ws.members.olga);
    const workspace = svc().client(ws.keys.sales!.secret);
    const mine = (await ada.customers.CreateCompany({ ...createCompany('Mine', 'mine.example'), private: true })).data!.item;
    assert.equal(mine.private, true);
    assert.equal(mine.created_by, ws.members.ada);
    // A member writes shared companies (x-service-member-roles: member has read and write on core:Company).
    const shared = await ada.customers.CreateCompany(createCompany('Team', 'team.example'));
    assert.equal(shared.response.status, 200, JSON.stringify(shared.error));
    assert.equal(shared.data!.item.created_by, ws.members.ada);
    assert.equal((await ada.customers.UpdateCompany({ id: shared.data!.item.id, data: { industry: 'Retail' } })).response.status, 200);

    assert.deepEqual((await ada.customers.ListCompanies({})).data!.items.map((c) => c.id).sort(), [mine.id, shared.data!.item.id].sort());
    for (const other of [olga, workspace]) {
      assert.deepEqual((await other.customers.ListCompanies({})).data!.items.map((c) => c.id), [shared.data!.item.id]);
      assertRefused(await other.customers.GetCompany({ id: mine.id }), 404, 'not_found');
      assertRefused(await other.customers.UpdateCompany({ id: mine.id, data: { name: 'x' } }), 404, 'not_found');
      assert.deepEqual((await other.customers.DeleteCompany({ id: mine.id })).data, { id: mine.id, deleted: false });
    }
    assertRefused(await workspace.customers.CreateCompany({ ...createCompany('x', 'x.example'), private: true }), 400, 'invalid_input', /Service-Act-As/);
    // The key's grants still apply: ci holds customers.* but no access on core:Company.
    const ci = svc().client(ws.keys.ci!.secret, ws.members.ada);
    assertRefused(await ci.customers.ListCompanies({}), 403, 'forbidden', /core:Company/);
    assertRefused(await ci.customers.CreateCompany({ ...createCompany('x', 'y.example'), private: true }), 403, 'forbidden');
    // A disabled member cannot be acted for.
    assertRefused(await svc().client(ws.keys.sales!.secret, ws.members.max).customers.ListCompanies({}), 403, 'forbidden');
    assert.deepEqual((await ada.customers.DeleteCompany({ id: mine.id })).data, { id: mine.id, deleted: true });
    assert.deepEqual((await eventsOf(svc(), ws.workspace_id)).map(([type, id]) => [type, id === mine.id]), [
      ['resource.created', true],
      ['resource.created', false],
      ['resource.updated', false],
      ['resource.deleted', true],
    ]);
  });

  it('pages by (updated_at, id) with cursors bound to their filters, and updated_at windows', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.sales!.secret);
    const t0 = svc().clock.now();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      ids.push((await api.customers.CreateCompany({ data: { name: `C${i}` } })).data!.item.id);
      if (i % 2 === 1) svc().clock.advance(10);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = (await api.customers.ListCompanies({ limit: 3, ...(cursor ? { cursor } : {}) })).data!;
      assert.ok(page.items.length <= 3);
      seen.push(...page.items.map((c) => c.id));
      if (!page.has_more) {
        assert.equal(page.next_cursor, null);
        break;
      }
      cursor = page.next_cursor!;
    }
    assert.deepEqual(seen.sort(), [...ids].sort());
    const all = (await api.customers.ListCompanies({})).data!.items;
    const order = all.map((c) => [c.updated_at, c.id] as const);
    assert.deepEqual(order, [...order].sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : 1)));
    // An update moves a company to the end of the order, into a later window.
    svc().clock.advance(100);
    await api.customers.UpdateCompany({ id: ids[0]!, data: { industry: 'Later' } });
    const window = (await api.customers.ListCompanies({ updated_since: t0 + 10, updated_before: t0 + 30 })).data!.items;
    assert.deepEqual(window.map((c) => c.data.name).sort(), ['C2', 'C3', 'C4', 'C5']);
    assert.deepEqual((await api.customers.ListCompanies({ updated_since: t0 + 100 })).data!.items.map((c) => c.id), [ids[0]]);
    const first = (await api.customers.ListCompanies({ limit: 1 })).data!;
    assertRefused(await api.customers.ListCompanies({ limit: 1, cursor: first.next_cursor!, updated_since: t0 }), 400, 'invalid_input');
    assertRefused(await svc().client(ws.keys.sales!.secret, ws.members.ada).customers.ListCompanies({ limit: 1, cursor: first.next_cursor! }), 400, 'invalid_input');
    // A pipelines cursor is not a companies cursor.
    await api.customers.CreateSalesPipeline({ data: { name: 'P1' } });
    await api.customers.CreateSalesPipeline({ data: { name: 'P2' } });
    const pipelines = (await api.customers.ListSalesPipelines({ limit: 1 })).data!;
    assertRefused(await api.customers.ListCompanies({ limit: 1, cursor: pipelines.next_cursor! }), 400, 'invalid_input');
    assertRefused(await api.customers.ListCompanies({ cursor: 'not-a-cursor' }), 400, 'invalid_input');
  });
});
