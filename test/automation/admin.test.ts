import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { forEachDatabase } from '../support/service.ts';
import { admin } from '../support/cli.ts';



const SPEC = `workspace: { name: Automated }
members:
  olga: { name: Olga Owner, email: olga@auto.test, role: owner }
automations:
  won:
    name: Thank the team for won deals
    trigger:
      resource_type: core:Deal
      event: updated
      fields: [stage_id]
      conditions:
        - { field: stage_id, op: eq, value: won }
    actions:
      - { type: notify, to: member, member_id: olga, title: "Won: {{record.data.name}}" }
`;

forEachDatabase('automation admin CLI', (svc) => {
  it('authors rules in the workspace file, lists them, pauses and resumes them; built-ins and unknown rules are refused in one line', async function () {
    this.timeout(60_000);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-auto-')), 'ws.yaml');
    fs.writeFileSync(file, SPEC);
    const url = svc().databaseUrl;
    const applied = await admin(url, 'apply', file);
    assert.equal(applied.code, 0, applied.stderr);
    const result = JSON.parse(applied.stdout) as { workspace_id: string; automations: { won: string } };
    assert.match(result.automations.won, /^ru_/);
    const listed = JSON.parse((await admin(url, 'automation', 'list', '--workspace', result.workspace_id)).stdout) as { built_in: Array<{ rule_id: string }>; rules: Array<{ rule_id: string; enabled: boolean }> };
    assert.deepEqual(listed.built_in.map((r) => r.rule_id), ['builtin.deal-closed']);
    assert.deepEqual(listed.rules.map((r) => [r.rule_id, r.enabled]), [[result.automations.won, true]]);
    const paused = JSON.parse((await admin(url, 'automation', 'pause', '--workspace', result.workspace_id, '--rule', result.automations.won)).stdout);
    assert.deepEqual(paused, { rule_id: result.automations.won, app_id: 'core', enabled: false, changed: true });
    const again = JSON.parse((await admin(url, 'automation', 'pause', '--workspace', result.workspace_id, '--rule', result.automations.won)).stdout);
    assert.equal(again.changed, false);
    const resumed = JSON.parse((await admin(url, 'automation', 'resume', '--workspace', result.workspace_id, '--rule', result.automations.won)).stdout);
    assert.equal(resumed.enabled, true);
    const builtIn = await admin(url, 'automation', 'pause', '--workspace', result.workspace_id, '--rule', 'builtin.deal-closed');
    assert.equal(builtIn.code, 1);
    assert.match(builtIn.stderr, /built-in rule/);
    assert.doesNotMatch(builtIn.stderr, /\n\s+at /, 'no stack trace');
    const unknown = await admin(url, 'automation', 'resume', '--workspace', result.workspace_id, '--rule', 'ru_nope');
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no automation rule ru_nope/);
    fs.writeFileSync(file, SPEC.replace('event: updated', 'event: sometimes'));
    const bad = await admin(url, 'apply', file);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /automations\.won\/trigger\/event/);
  });
});
