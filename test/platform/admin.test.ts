import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AdminError, addToWorkspace, applyWorkspace } from '../../server/admin.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';
import { admin } from '../support/cli.ts';



function tempFile(name: string, text: string): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-admin-')), name);
  fs.writeFileSync(file, text);
  return file;
}

const SPEC = `workspace: { name: Acme }
members:
  olga: { name: Olga Owner, email: olga@acme.test, role: owner }
  ada:  { name: Ada Member, email: ada@acme.test, role: member }
  max:  { name: Max Gone, email: max@acme.test, role: member, disabled: true }
bundles:
  docs: { name: Docs site, domain: docs.acme.test }
keys:
  ci:
    name: CI integration
    operations: ["customers.*", "workspace.*"]
    resources: { "core:SalesPipeline": [read, write] }
    delegation: [ada]
`;

forEachDatabase('admin CLI', (svc) => {
  it('applies a workspace file and prints ids and key secrets as JSON; the running service sees it', async function () {
    this.timeout(60_000);
    const out = await admin(svc().databaseUrl, 'apply', tempFile('acme.yaml', SPEC));
    assert.equal(out.code, 0, out.stderr);
    const result = JSON.parse(out.stdout);
    assert.match(result.workspace_id, /^ws_/);
    assert.deepEqual(Object.keys(result.members), ['olga', 'ada', 'max']);
    assert.match(result.bundles.docs, /^bn_/);
    assert.match(result.keys.ci.id, /^ak_/);
    assert.match(result.keys.ci.secret, /^wso_[0-9a-z]{24}_[A-Za-z0-9_-]{43}$/);
    const api = svc().client(result.keys.ci.secret);
    assert.deepEqual((await api.listDelegationMembers()).data!.items, [{ id: result.members.ada, name: 'Ada Member' }]);
    assert.equal((await api.workspace.ListBundles({})).data!.items[0]!.content_id, result.bundles.docs);
    const json = await admin(svc().databaseUrl, 'apply', tempFile('acme.json', JSON.stringify({ workspace: { name: 'From JSON' } })));
    assert.equal(json.code, 0, json.stderr);
  });

  it('revokes, replaces and disables from another process, effective on the next request', async function () {
    this.timeout(60_000);
    const result = JSON.parse((await admin(svc().databaseUrl, 'apply', tempFile('acme.yaml', SPEC))).stdout);
    const old = svc().client(result.keys.ci.secret);
    const ada = svc().client(result.keys.ci.secret, result.members.ada);
    assert.equal((await ada.customers.ListSalesPipelines({})).response.status, 200);

    const disabled = await admin(svc().databaseUrl, 'member', 'disable', '--id', result.members.ada);
    assert.equal(disabled.code, 0, disabled.stderr);
    assert.equal(JSON.parse(disabled.stdout).id, result.members.ada);
    assert.equal((await ada.customers.ListSalesPipelines({})).response.status, 403);

    const replaced = JSON.parse((await admin(svc().databaseUrl, 'key', 'replace', '--id', result.keys.ci.id)).stdout);
    assert.equal(replaced.replaces, result.keys.ci.id);
    const fresh = svc().client(replaced.secret);
    assert.equal((await fresh.workspace.ListBundles({})).response.status, 200);
    assert.equal((await old.workspace.ListBundles({})).response.status, 200);

    const revoked = await admin(svc().databaseUrl, 'key', 'revoke', '--id', result.keys.ci.id);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.equal((await old.workspace.ListBundles({})).response.status, 401);
    assert.equal((await fresh.workspace.ListBundles({})).response.status, 200);
  });

  it('lists workspaces, members, keys (never a secret) and sites, and adds a member, a site and a key to an existing workspace', async function () {
    this.timeout(120_000);
    const result = JSON.parse((await admin(svc().databaseUrl, 'apply', tempFile('acme.yaml', SPEC))).stdout);
    const ws = result.workspace_id as string;
    const run = async (...args: string[]) => {
      const out = await admin(svc().databaseUrl, ...args);
      assert.equal(out.code, 0, `${args.join(' ')}: ${out.stderr}`);
      return JSON.parse(out.stdout);
    };
    const listed = (await run('workspace', 'list')).find((w: { id: string }) => w.id === ws);
    assert.deepEqual({ ...listed, created_at: 0 }, { id: ws, name: 'Acme', created_at: 0, members: 3, bundles: 1, keys: 1 });

    const bob = await run('member', 'add', '--workspace', ws, '--name', 'Bob Admin', '--email', 'bob@acme.test', '--role', 'admin');
    assert.match(bob.id, /^mb_/);
    const members = await run('member', 'list', '--workspace', ws);
    assert.deepEqual(members.map((m: { name: string; role: string; disabled: boolean }) => [m.name, m.role, m.disabled]).sort(), [
      ['Ada Member', 'member', false],
      ['Bob Admin', 'admin', false],
      ['Max Gone', 'member', true],
      ['Olga Owner', 'owner', false],
    ]);
    const site = await run('bundle', 'add', '--workspace', ws, '--name', 'Shop', '--domain', 'shop.acme.test');
    assert.match(site.collect_key, /^pk_/);
    assert.deepEqual((await run('bundle', 'list', '--workspace', ws)).map((b: { name: string }) => b.name), ['Docs site', 'Shop']);

    const created = await run('key', 'create', '--workspace', ws, '--name', 'Deals sync', '--operations', 'customers.*', '--resource', 'core:Deal=read,write', '--resource', 'core:SalesPipeline=read', '--delegation', bob.id, '--created-by', bob.id);
    assert.match(created.secret, /^wso_[0-9a-z]{24}_[A-Za-z0-9_-]{43}$/);
    // The new key and member work in the running service at once.
    const api = svc().client(created.secret);
    assert.deepEqual((await api.listDelegationMembers()).data!.items, [{ id: bob.id, name: 'Bob Admin' }]);
    assert.equal((await api.customers.ListDeals({})).response.status, 200);
    assert.equal((await api.customers.ListCompanies({})).response.status, 403);
    const keys = await run('key', 'list', '--workspace', ws);
    const listedKey = keys.find((k: { id: string }) => k.id === created.id);
    assert.deepEqual(listedKey.resources, { 'core:Deal': ['read', 'write'], 'core:SalesPipeline': ['read'] });
    assert.deepEqual(listedKey.delegation, [bob.id]);
    assert.equal(listedKey.created_by, bob.id);
    assert.ok(!JSON.stringify(keys).includes(created.secret) && !JSON.stringify(keys).includes(result.keys.ci.secret), 'no secret is listed');
    assert.ok(keys.every((k: Record<string, unknown>) => !('secret' in k) && !('secret_hash' in k)));

    for (const [args, message] of [
      [['member', 'add', '--workspace', ws, '--name', 'Again', '--email', 'BOB@acme.test'], /already belongs to a member/],
      [['member', 'list', '--workspace', 'ws_missing'], /no workspace ws_missing/],
      [['key', 'create', '--workspace', ws, '--name', 'K', '--operations', 'customers.*', '--delegation', 'mb_ghost'], /no member "mb_ghost"/],
    ] as Array<[string[], RegExp]>) {
      const out = await admin(svc().databaseUrl, ...args);
      assert.equal(out.code, 1, args.join(' '));
      assert.match(out.stderr, message);
    }
  });

  it('refuses handles and names that JavaScript objects reserve (__proto__, constructor, toString, hasOwnProperty), naming them', async () => {
    const ws = await svc().apply(acme());
    const rule = (member: string) => ({ name: 'R', trigger: { resource_type: 'core:Deal', event: 'created' }, actions: [{ type: 'notify', to: 'member', member_id: member, title: 'T' }] });
    const entries: Record<string, unknown> = {
      members: { name: 'X', email: 'x@acme.test', role: 'member' },
      bundles: { name: 'S', domain: 's.acme.test' },
      keys: { name: 'K', operations: [] },
      automations: rule('olga'),
    };
    const count = async () => Number((await svc().db.sql.one<{ n: number }>('SELECT COUNT(*) AS n FROM workspaces'))!.n);
    const before = await count();
    const refused = (message: string | RegExp) => (err: unknown) => {
      assert.ok(err instanceof AdminError, String(err));
      if (typeof message === 'string') assert.equal(err.message, message);
      else assert.match(err.message, message);
      return true;
    };
    for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
      for (const [section, entry] of Object.entries(entries)) {
        // JSON.parse keeps "__proto__" as an own key, as the CLI's JSON and YAML readers do.
        const file = JSON.parse(`{"workspace":{"name":"W"},"${section}":{"${name}":${JSON.stringify(entry)}}}`);
        const message = `${section}.${name}: "${name}" cannot be a handle or a name in the workspace file (JavaScript objects reserve it); choose another`;
        await assert.rejects(applyWorkspace(svc().db, svc().clock, file), refused(message), `apply ${section}.${name}`);
        const { workspace: _, ...additions } = file;
        await assert.rejects(addToWorkspace(svc().db, svc().clock, ws.workspace_id, additions), refused(message), `add ${section}.${name}`);
      }
      // Anywhere in the file, e.g. a resource grant.
      await assert.rejects(
        addToWorkspace(svc().db, svc().clock, ws.workspace_id, JSON.parse(`{"keys":{"k":{"name":"K","operations":[],"resources":{"${name}":["read"]}}}}`)),
        refused(`keys.k.resources.${name}: "${name}" cannot be a handle or a name in the workspace file (JavaScript objects reserve it); choose another`),
      );
      // A reference to such a name finds nothing (never what every object inherits).
      const base = { workspace: { name: 'W' }, members: { olga: { name: 'O', email: 'o@w.test', role: 'owner' as const } } };
      await assert.rejects(applyWorkspace(svc().db, svc().clock, { ...base, keys: { k: { name: 'K', operations: [], delegation: [name] } } }), refused(`keys.k.delegation: no member "${name}" in this file`));
      await assert.rejects(applyWorkspace(svc().db, svc().clock, { ...base, keys: { k: { name: 'K', operations: [], created_by: name } } }), refused(`keys.k.created_by: no member "${name}" in this file`));
      await assert.rejects(applyWorkspace(svc().db, svc().clock, { ...base, automations: { r: rule(name) } } as never), refused(/^automations\.r\.actions\[0\]\.member_id: no member/));
      await assert.rejects(applyWorkspace(svc().db, svc().clock, { ...base, automations: { r: { ...rule('olga'), app: name } } } as never), refused(/^automations\.r\.app: no app/));
      await assert.rejects(
        addToWorkspace(svc().db, svc().clock, ws.workspace_id, { keys: { k: { name: 'K', operations: [], delegation: [name] } } }),
        refused(`keys.k.delegation: no member "${name}" in this file or this workspace`),
      );
    }
    assert.equal(await count(), before, 'a refused file creates nothing');
  });

  it('answers bad input with one line on stderr and a non-zero exit', async function () {
    // Eleven CLI processes, each loading every module with tsx: over a minute on a loaded 2-core machine.
    this.timeout(180_000);
    const cases: Array<[string[], RegExp]> = [
      [['apply', '/nonexistent/file.yaml'], /cannot read/],
      [['apply', tempFile('bad.yaml', 'workspace: [unclosed')], /not valid YAML/],
      [['apply', tempFile('bad.yaml', 'members: {}')], /invalid workspace file/],
      [['apply', tempFile('bad.yaml', 'workspace: { name: X }\nkeys: { __proto__: { name: K, operations: [] } }')], /^admin: keys\.__proto__: "__proto__" cannot be a handle/],
      [['apply', tempFile('bad.yaml', 'workspace: { name: X }\nkeys: { k: { name: K, operations: ["nope.*"] } }')], /unknown operation namespace/],
      [['apply', tempFile('bad.yaml', 'workspace: { name: X }\nkeys: { k: { name: K, operations: [], resources: { "core:Nope": [read] } } }')], /unknown resource type/],
      [['apply', tempFile('bad.yaml', 'workspace: { name: X }\nkeys: { k: { name: K, operations: [], delegation: [ghost] } }')], /no member "ghost"/],
      [['key', 'revoke', '--id', 'ak_missing'], /no API key ak_missing/],
      [['member', 'disable', '--id', 'mb_missing'], /no member mb_missing/],
      [['key', 'revoke'], /required option/],
      [['frobnicate'], /unknown command/],
    ];
    const before = await svc().db.sql.one<{ n: number }>('SELECT COUNT(*) AS n FROM workspaces');
    // Two at a time: ten CLIs at once (each a tsx process taking the migration lock) crowd a 2-core machine.
    const outs: Array<Awaited<ReturnType<typeof admin>>> = [];
    for (let i = 0; i < cases.length; i += 2) outs.push(...(await Promise.all(cases.slice(i, i + 2).map(([args]) => admin(svc().databaseUrl, ...args)))));
    for (const [i, [args, message]] of cases.entries()) {
      const out = outs[i]!;
      assert.notEqual(out.code, 0, args.join(' '));
      assert.equal(out.stdout, '', args.join(' '));
      const lines = out.stderr.split('\n').filter((l) => l.trim() && !/npm warn/.test(l));
      assert.equal(lines.length, 1, `${args.join(' ')}: ${out.stderr}`);
      assert.match(lines[0]!, message, args.join(' '));
    }
    const after = await svc().db.sql.one<{ n: number }>('SELECT COUNT(*) AS n FROM workspaces');
    assert.equal(Number(after!.n), Number(before!.n), 'a refused file creates nothing');
  });
});
