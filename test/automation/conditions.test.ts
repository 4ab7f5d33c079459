import assert from 'node:assert/strict';
import { allHold, conditionProblem, fill, holds } from '../../handlers/automation/conditions.ts';
import type { Condition } from '../../handlers/automation/rules.ts';

const data = { name: 'Fleet renewal', amount: { amount: '25000.00', currency: 'EUR' }, tags: ['vip', 'eu'], count: 3, flag: false, none: null };
const c = (field: string, op: Condition['op'], value?: unknown): Condition => ({ field, op, ...(value === undefined ? {} : { value }) }) as Condition;

describe('automation conditions', () => {
  it('evaluates every operator on present, absent and nested fields', () => {
    const cases: Array<[Condition, boolean]> = [
      [c('name', 'eq', 'Fleet renewal'), true],
      [c('name', 'eq', 'fleet renewal'), false],
      [c('missing', 'eq', null), false],
      [c('none', 'eq', null), true],
      [c('amount', 'eq', { currency: 'EUR', amount: '25000.00' }), true],
      [c('name', 'ne', 'x'), true],
      [c('missing', 'ne', 'x'), true],
      [c('name', 'ne', 'Fleet renewal'), false],
      [c('amount.currency', 'in', ['EUR', 'USD']), true],
      [c('amount.currency', 'in', ['SEK']), false],
      [c('missing', 'in', [null]), false],
      [c('amount.currency', 'not_in', ['SEK']), true],
      [c('missing', 'not_in', ['SEK']), true],
      [c('flag', 'exists'), true],
      [c('missing', 'exists'), false],
      [c('amount.missing', 'not_exists'), true],
      [c('name.deeper', 'not_exists'), true],
      [c('amount.amount', 'gt', 24999.99), true],
      [c('amount.amount', 'gte', '25000'), true],
      [c('amount.amount', 'lt', 25000), false],
      [c('amount.amount', 'lte', 25000), true],
      [c('count', 'gt', 2), true],
      [c('name', 'gt', 1), false],
      [c('missing', 'lt', 1), false],
      [c('count', 'lt', 'abc'), false],
      [c('name', 'contains', 'renew'), true],
      [c('name', 'contains', 'Renew'), false],
      [c('tags', 'contains', 'vip'), true],
      [c('tags', 'contains', 'us'), false],
      [c('count', 'contains', 3), false],
    ];
    for (const [cond, expected] of cases) assert.equal(holds(cond, data), expected, JSON.stringify(cond));
    assert.equal(allHold([], data), true);
    assert.equal(allHold(undefined, data), true);
    assert.equal(allHold([c('name', 'exists'), c('count', 'gt', 5)], data), false);
  });

  it('says what is wrong with a condition the schema accepts', () => {
    assert.match(conditionProblem(c('name', 'eq'))!, /needs a value/);
    assert.match(conditionProblem(c('name', 'exists', 1))!, /takes no value/);
    assert.match(conditionProblem(c('name', 'in', 'a'))!, /array/);
    assert.equal(conditionProblem(c('name', 'in', ['a'])), null);
  });

  it('fills placeholders: whole values keep their type, missing ones leave the key out, text interpolates', () => {
    const scope = { record: { id: 'dl_1', data }, event: { id: 'evt_1', occurred_at: 42 }, rule: { name: 'R' } };
    assert.deepEqual(
      fill({ a: '{{record.data.amount}}', b: 'Deal {{record.data.name}} ({{record.id}}) at {{event.occurred_at}}', c: '{{record.data.missing}}', d: ['{{record.data.missing}}', '{{rule.name}}'], e: 7, f: 'no {{ record.data.missing }} here' }, scope),
      { a: { amount: '25000.00', currency: 'EUR' }, b: 'Deal Fleet renewal (dl_1) at 42', d: [null, 'R'], e: 7, f: 'no  here' },
    );
  });
});
