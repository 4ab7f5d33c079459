import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { addToWorkspace, disableMember, replaceKey, revokeKey } from '../../server/admin.ts';
import { createSigninLink } from '../../server/signin.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

type Workspace = { workspace_id: string; members: Record<string, string>; bundles: Record<string, string> };

async function signIn(svc: TestService, ws: Workspace, member: string): Promise<string> {
  const minted = await createSigninLink(svc.db, svc.clock, { workspaceId: ws.workspace_id, memberId: ws.members[member]!, baseUrl: svc.origin });
  const res = await fetch(minted.url, { redirect: 'manual' });
  assert.equal(res.status, 303);
  return res.headers.getSetCookie()[0]!.split(';')[0]!;
}

/** What a signed-in member sees: a page, and a /v1 query with the cookie. */
async function sees(svc: TestService, ws: Workspace, cookie: string): Promise<{ page: number; text: string; api: number }> {
  const page = await fetch(`${svc.origin}/dashboard?site=${ws.bundles.docs}`, { headers: { Cookie: cookie } });
  const api = await svc.post('workspace.ListBundles', {}, { Cookie: cookie });
  return { page: page.status, text: await page.text(), api: api.status };
}

forEachDatabase('sign-in sessions end for their own member, not for workspace changes', (svc) => {
  it('keeps every session through keys created (CLI), members added, rules authored, keys replaced or revoked, other members disabled', async function () {
    this.timeout(60_000);
    const ws = await svc().apply(acme());
    const olga = await signIn(svc(), ws, 'olga');
    const ada = await signIn(svc(), ws, 'ada');
    const live = async (why: string) => {
      for (const cookie of [olga, ada]) {
        const seen = await sees(svc(), ws, cookie);
        assert.deepEqual([seen.page, seen.api], [200, 200], `${why}: ${seen.text.slice(0, 300)}`);
      }
    };
    await live('signed in');

    // The real operator path: another process, the admin CLI.
    const { stdout } = await promisify(execFile)(
      path.join(root, 'node_modules/.bin/tsx'),
      [path.join(root, 'scripts/admin.ts'), '--json', 'key', 'create', '--workspace', ws.workspace_id, '--name', 'Sync', '--operations', 'workspace.*'],
      { env: { ...process.env, DATABASE_URL: svc().databaseUrl }, cwd: root },
    );
    const created = JSON.parse(stdout) as { id: string; secret: string };
    assert.equal((await svc().client(created.secret).workspace.ListBundles({})).response.status, 200);
    await live('key created with the CLI');

    const added = await addToWorkspace(svc().db, svc().clock, ws.workspace_id, { members: { nina: { name: 'Nina New', email: 'nina@acme.test', role: 'member' } } });
    await live('member added');
    await addToWorkspace(svc().db, svc().clock, ws.workspace_id, {
      automations: { note: { name: 'Note new deals', trigger: { resource_type: 'core:Deal', event: 'created' }, actions: [{ type: 'notify', to: 'owners_and_admins', title: 'New deal' }] } },
    });
    await live('rule authored');
    await replaceKey(svc().db, svc().clock, created.id);
    await revokeKey(svc().db, svc().clock, created.id);
    assert.equal((await svc().client(created.secret).workspace.ListBundles({})).response.status, 401, 'the key keeps its own rule');
    await live('key replaced and revoked');
    await disableMember(svc().db, svc().clock, added.members.nina!);
    await live('another member disabled');
  });

  it('ends a session when its member is disabled or changes role, for good (pages and /v1)', async () => {
    const ws = await svc().apply(acme());
    const olga = await signIn(svc(), ws, 'olga');
    const ada = await signIn(svc(), ws, 'ada');
    const bob = await signIn(svc(), ws, 'bob');
    await disableMember(svc().db, svc().clock, ws.members.ada!);
    const ended = await sees(svc(), ws, ada);
    assert.deepEqual([ended.page, ended.api], [401, 401]);
    assert.match(ended.text, /Your sign-in session has expired or was ended/);
    assert.deepEqual([(await sees(svc(), ws, olga)).page, (await sees(svc(), ws, bob)).page], [200, 200]);

    // A role change by any path (there is no CLI command yet) ends the session at its next request ...
    await svc().db.sql.run(`UPDATE members SET role = 'member' WHERE id = ?`, [ws.members.bob!]);
    const demoted = await sees(svc(), ws, bob);
    assert.deepEqual([demoted.page, demoted.api], [401, 401]);
    // ... and changing it back does not revive it; a new sign-in works.
    await svc().db.sql.run(`UPDATE members SET role = 'admin' WHERE id = ?`, [ws.members.bob!]);
    assert.equal((await sees(svc(), ws, bob)).page, 401);
    const again = await signIn(svc(), ws, 'bob');
    assert.equal((await sees(svc(), ws, again)).page, 200);

    // Caught when the session is first seen after the change, too (nothing cached yet).
    const fresh = await signIn(svc(), ws, 'olga');
    await svc().db.sql.run(`UPDATE members SET role = 'admin' WHERE id = ?`, [ws.members.olga!]);
    assert.deepEqual([(await sees(svc(), ws, fresh)).api, (await sees(svc(), ws, olga)).api], [401, 401]);
  });
});
