/**
 * What automation brings to the shared harness (test/support/kit.ts): rules in the fixture workspace
 * files (rules are authored by operators in the workspace file, never through the API), and waiting
 * for the runs the fixture's records trigger.
 */
import { settleAutomation } from '../support/automation.ts';
import type { Seed, TestKit } from '../support/kit.ts';

/**
 * The contract workspace's rules: one to read (GetRule, and UpdateRule's 403 for a plain member, which
 * leaves it enabled), one UpdateRule pauses and one DeleteRule deletes. The contract server runs with
 * JOBS=off: no rule runs.
 */
const CONTRACT_RULES = {
  read: {
    name: 'Contract tests: follow up on big deals',
    description: 'Read by automation.GetRule; a plain member may not pause it (403).',
    trigger: { resource_type: 'core:Deal', event: 'created', conditions: [{ field: 'amount.amount', op: 'gte', value: 10000 }, { field: 'amount.currency', op: 'eq', value: 'EUR' }] },
    actions: [
      { type: 'create_record', resource_type: 'core:Company', data: { name: 'Prospect of {{record.data.name}}' } },
      { type: 'notify', to: 'owners_and_admins', title: 'Big deal: {{record.data.name}}', body: 'Amount {{record.data.amount.amount}} {{record.data.amount.currency}}' },
    ],
  },
  pause: {
    name: 'Contract tests: rule to pause',
    trigger: { resource_type: 'core:Company', event: 'updated', fields: ['lifecycle_stage'], conditions: [{ field: 'lifecycle_stage', op: 'eq', value: 'customer' }] },
    actions: [{ type: 'set_fields', data: { industry: 'Customer' } }],
  },
  remove: {
    name: 'Contract tests: rule to delete',
    trigger: { resource_type: 'core:Deal', event: 'deleted' },
    actions: [{ type: 'notify', to: 'owners_and_admins', title: 'Deal deleted: {{record.id}}' }],
  },
} as const;

/** What the contract hooks read as `ctx.automation`: rule ids by handle, and whom the main key acts for (an owner may manage rules, a plain member may not). */
export interface ContractAutomation {
  rules: Record<keyof typeof CONTRACT_RULES, string>;
  owner: string;
  member: string;
}

/** Rule ids by handle, as applying the workspace file's `automations:` answered. */
const rulesOf = (seed: Seed): Record<string, string> => (seed.ws as { automations?: Record<string, string> }).automations ?? {};

export const kit: TestKit = {
  badInput: {
    // An authored rule, so automation operations have a real rule id (`ru_...`); the records the
    // fixture makes trigger it, and its runs give automation.GetRule a second page.
    workspace(spec) {
      spec.automations = { rule: { name: 'Notify on new deals', trigger: { resource_type: 'core:Deal', event: 'created' }, actions: [{ type: 'notify', to: 'owners_and_admins', title: 'New deal' }] } };
    },
    async seed(seed): Promise<Record<string, string>> {
      const rules = Object.values(rulesOf(seed));
      return rules.length ? { ru: rules[0]! } : {};
    },
    settle: (svc) => settleAutomation(svc),
  },
  contract: {
    workspace(spec) {
      spec.automations = CONTRACT_RULES;
    },
    async seed(seed): Promise<ContractAutomation> {
      return { rules: rulesOf(seed) as ContractAutomation['rules'], owner: seed.members.owner, member: seed.members.member };
    },
  },
};
