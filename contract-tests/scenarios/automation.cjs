'use strict';
/**
 * Automation rules. Rules are authored by operators in the workspace file, never through the API, so
 * local runs use the rules the automation kit (test/automation/kit.ts) authors in the fixture workspace (`ctx.automation`: one to read,
 * one to pause, one to delete; a new workspace every run, so reruns on a reused database get fresh
 * rules) and act for its owner (DeleteRule requires `Service-Act-As`) and a plain member (refused:
 * 403). The built-in rule `builtin.deal-closed` (app `core`) is in every workspace: it answers the
 * reads in a deployment and is the locked rule of DeleteRule's 403.
 *
 * A deployment run creates no rules and changes none of its rules: UpdateRule pauses a rule that is
 * already paused (200, unchanged) when there is one, and DeleteRule deletes an id no rule has (200,
 * `deleted: false`, nothing written) acting for any member the key may act for.
 */

const BUILT_IN = { rule_id: 'builtin.deal-closed', app_id: 'core' };

/** An id no rule has (RuleId: at most 64 characters). */
const missingRule = (kit) => kit.missingId('ru');

/** The transaction is this status's own (not a 400, 413 or 429 that only borrows the 200 request). */
const isOwn = (t, status) => Number(t.expected.statusCode) === status;

/** The run's authored rule ids (local runs), or null. */
const authored = (kit) => (kit.ctx.automation ? kit.ctx.automation.rules : null);

/** Acts for a member: an owner (may manage rules) or a plain member (may not). Deployment runs know no roles. */
function actAs(t, kit, role) {
  const id = kit.ctx.automation ? kit.ctx.automation[role] : kit.seed.automation.anyMember;
  if (id) t.request.headers['Service-Act-As'] = id;
  return id;
}

module.exports = {
  async setup(kit) {
    const { ctx } = kit;
    kit.seed.automation = { pausedRule: null, anyMember: null };
    if (ctx.automation) {
      // The workspace file's rules must be there, enabled and manageable, or the cases below prove nothing.
      const listed = await kit.call('automation.ListRules', { app_id: 'core', limit: 100 });
      for (const [what, id] of Object.entries(ctx.automation.rules)) {
        const rule = listed.items.find((r) => r.rule_id === id);
        if (!rule || !rule.enabled || rule.built_in || !rule.can_manage) throw new Error(`the fixture workspace's automation rule "${what}" (${id}) is not an enabled, manageable rule: ${JSON.stringify(rule)}`);
      }
      if (!listed.items.some((r) => r.rule_id === BUILT_IN.rule_id && r.built_in && !r.can_manage)) throw new Error(`${BUILT_IN.rule_id} is not a locked built-in rule of the workspace`);
      return;
    }
    // Deployment: an already paused authored rule (pausing it again changes nothing), and any member
    // the key may act for (an absent rule is `deleted: false` and a built-in one 403 whatever the role).
    const paused = await kit.call('automation.ListRules', { enabled: false, limit: 100 });
    kit.seed.automation.pausedRule = paused.items.find((r) => !r.built_in && r.can_manage) || null;
    const res = await fetch(`${ctx.baseUrl}/delegation/members`, { headers: { Authorization: `Bearer ${ctx.keys.main}`, Accept: 'application/json' }, signal: AbortSignal.timeout(30_000) });
    if (res.status !== 200) throw new Error(`setup call GET /delegation/members answered ${res.status}`);
    const members = (await res.json()).items;
    kit.seed.automation.anyMember = members[0] ? members[0].id : null;
  },

  200: {
    // Two to a page (the built-in rule and the run's three authored ones are all `core`), so has_more
    // and a non-null next_cursor are checked too.
    'automation.ListRules': (t, kit) => {
      kit.setBody(t, { ...kit.bodyOf(t), limit: 2 });
      if (authored(kit)) kit.expect(t, (body) => (body.items.length === 2 && body.has_more && body.next_cursor ? null : `expected a full page of 2 core rules with has_more, got ${body.items.length} (has_more ${body.has_more})`));
    },
    // The authored rule to read; a deployment reads the document's example (the built-in rule).
    'automation.GetRule': (t, kit) => {
      const rules = authored(kit);
      const ruleId = rules ? rules.read : BUILT_IN.rule_id;
      if (rules) kit.setBody(t, { rule_id: ruleId, app_id: 'core', runs_limit: 5 });
      kit.expect(t, (body) => (body.item.rule_id === ruleId ? null : `expected rule ${ruleId}, got ${body.item.rule_id}`));
    },
    // Pauses the authored rule to pause (workspace access: any key granted the operation may).
    'automation.UpdateRule': (t, kit) => {
      const rules = authored(kit);
      const rule = rules ? { rule_id: rules.pause, app_id: 'core' } : kit.seed.automation.pausedRule && { rule_id: kit.seed.automation.pausedRule.rule_id, app_id: kit.seed.automation.pausedRule.app_id };
      if (!rule) {
        kit.setBody(t, { ...BUILT_IN, enabled: false }); // only ever sent by the 400, 413 and 429 cases, which never reach it
        if (isOwn(t, 200)) kit.skip(t, 'a deployment run pauses only a rule that is already paused (pausing cannot be undone through the API) and this workspace has none.');
        return;
      }
      kit.setBody(t, { ...rule, enabled: false });
      kit.expect(t, (body) =>
        body.item.rule_id === rule.rule_id && body.item.enabled === false && body.item.can_manage && !body.item.built_in ? null : `expected rule ${rule.rule_id} paused and manageable, got ${JSON.stringify(body.item)}`,
      );
    },
    // An owner deletes the authored rule to delete; a deployment deletes an id no rule has (deleted: false).
    'automation.DeleteRule': (t, kit) => {
      const rules = authored(kit);
      const ruleId = rules ? rules.remove : missingRule(kit);
      kit.setBody(t, { rule_id: ruleId, app_id: 'core' });
      if (!actAs(t, kit, 'owner')) {
        if (isOwn(t, 200)) kit.skip(t, 'DeleteRule runs as a member (Service-Act-As) and the key may act for none (GET /delegation/members is empty).');
        return;
      }
      const deleted = Boolean(rules);
      kit.expect(t, (body) => (body.rule_id === ruleId && body.app_id === 'core' && body.deleted === deleted ? null : `expected rule ${ruleId} of core with deleted: ${deleted}, got ${JSON.stringify(body)}`));
    },
  },

  // The documented 400 of UpdateRule: resuming (`enabled: true`) is refused; rules are resumed by people.
  400: {
    'automation.UpdateRule': (t, kit) => {
      const rules = authored(kit);
      kit.setBody(t, rules ? { rule_id: rules.read, app_id: 'core', enabled: true } : { ...BUILT_IN, enabled: true });
    },
  },

  403: {
    // Acting for a plain member: only owners and admins may pause (the rule stays enabled). A deployment
    // run, which knows no member's role, pauses the built-in rule instead: locked, 403 unchanged.
    'automation.UpdateRule': (t, kit) => {
      const rules = authored(kit);
      if (!rules) return kit.setBody(t, { ...BUILT_IN, enabled: false });
      actAs(t, kit, 'member');
      kit.setBody(t, { rule_id: rules.read, app_id: 'core', enabled: false });
    },
    // Acting for an owner, who may delete rules, but not the built-in one (locked: 403 unchanged).
    'automation.DeleteRule': (t, kit) => {
      if (!actAs(t, kit, 'owner')) return kit.skip(t, 'DeleteRule runs as a member (Service-Act-As) and the key may act for none (GET /delegation/members is empty).');
      kit.setBody(t, { ...BUILT_IN });
    },
  },

  // An id no rule has.
  404: {
    'automation.GetRule': (t, kit) => kit.setBody(t, { rule_id: missingRule(kit), app_id: 'core' }),
    'automation.UpdateRule': (t, kit) => kit.setBody(t, { rule_id: missingRule(kit), app_id: 'core', enabled: false }),
  },
};
