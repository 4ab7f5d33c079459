/**
 * Operator CLI: `npm run admin -- <command>`. Prints its result as a table for a person (lists as
 * aligned columns, a record as `key: value` lines: scripts/adminTable.ts), or as JSON with `--json`
 * anywhere on the line (scripts and tests); on bad input prints one line in words to stderr and exits
 * with status 1.
 */
import fs from 'node:fs';
import { Command } from 'commander';
import YAML from 'yaml';
import { openDatabase } from '../db/database.ts';
import { migrations, modules } from '../app.ts';
import { AdminError, addToWorkspace, applyWorkspace, disableMember, listBundles, listKeys, listMembers, listWorkspaces, replaceKey, revokeKey } from '../server/admin.ts';
import { memberRoleNames } from '../generated/catalogue.ts';
import { systemClock } from '../server/clock.ts';
import type { AdminDeps } from '../server/module.ts';
import { skipOutboxEvent } from '../server/outbox.ts';
import { listOutboxConsumers } from '../db/queries/outbox.ts';
import { createSigninLink, revokeSession, SigninError } from '../server/signin.ts';
import { formatTable } from './adminTable.ts';
import { limitsAdmin } from '../server/limitsAdmin.ts';

// `--json` may stand anywhere before a `--` (commander would refuse it after a command name).
const end = process.argv.indexOf('--', 2);
const asJson = process.argv.some((a, i) => a === '--json' && (end === -1 || i < end));
const argv = process.argv.filter((a, i) => !(a === '--json' && (end === -1 || i < end)));

async function withDb<T>(fn: (db: ReturnType<typeof openDatabase>) => Promise<T>): Promise<void> {
  const db = openDatabase();
  try {
    await db.migrate(migrations);
    const result = await fn(db);
    process.stdout.write(asJson ? JSON.stringify(result, null, 2) + '\n' : formatTable(result));
  } finally {
    await db.close();
  }
}

function readSpec(file: string): unknown {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    throw new AdminError(`cannot read ${file}`);
  }
  try {
    return file.endsWith('.json') ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    throw new AdminError(`${file} is not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`);
  }
}

/**
 * Runs an action that goes through the workspace-file format (`addToWorkspace`) with a message that
 * names the command's options instead of the file's fields (`--role must be one of ...`).
 */
async function asOptions<T>(section: string, handle: string, action: Promise<T>): Promise<T> {
  try {
    return await action;
  } catch (err) {
    if (!(err instanceof AdminError)) throw err;
    const field = new RegExp(`${section}\\.${handle}\\.([a-z_]+)`, 'g');
    throw new AdminError(err.message.replace(/^invalid additions: /, '').replace(field, (_m, name: string) => `--${name.replace(/_/g, '-')}`));
  }
}

const program = new Command('admin')
  .description('Workspace Operations operator tools (DATABASE_URL selects the database)')
  .option('--json', 'print JSON instead of tables (anywhere on the line)')
  .exitOverride();
program
  .command('apply')
  .argument('<file>', 'workspace file (YAML or JSON)')
  .description('create a workspace with members, sites, apps and API keys; prints the ids and the key secrets (shown once)')
  .action((file: string) => withDb((db) => applyWorkspace(db, systemClock, readSpec(file))));
const workspace = program.command('workspace').description('workspaces');
workspace.command('list').description('every workspace with its number of members, sites and live keys').action(() => withDb((db) => listWorkspaces(db)));
workspace
  .command('add')
  .requiredOption('--workspace <id>', 'workspace id (ws_...)')
  .argument('<file>', 'members, bundles and keys to add, in the format of apply (YAML or JSON; no workspace or apps)')
  .description('add members, sites and API keys to an existing workspace; prints the new ids and key secrets (shown once)')
  .action((file: string, o: { workspace: string }) => withDb((db) => addToWorkspace(db, systemClock, o.workspace, readSpec(file))));
const key = program.command('key').description('API keys');
key.command('list').requiredOption('--workspace <id>', 'workspace id (ws_...)').description("a workspace's keys: grants, delegation, revocation (never a secret)").action((o: { workspace: string }) => withDb((db) => listKeys(db, o.workspace)));
const collect = (value: string, previous: string[] = []) => [...previous, value];
key
  .command('create')
  .requiredOption('--workspace <id>', 'workspace id (ws_...)')
  .requiredOption('--name <name>', 'what the key is for')
  .requiredOption('--operations <grants>', 'comma-separated operation ids or namespace.* (e.g. customers.*,workspace.ListBundles)')
  .option('--resource <type=access>', 'resource grant, repeatable (e.g. core:Deal=read,write)', collect)
  .option('--delegation <who>', 'none (default), all, or comma-separated member ids', 'none')
  .option('--created-by <member>', 'member id recorded as the creator')
  .description('create an API key in an existing workspace; prints its secret once')
  .action((o: { workspace: string; name: string; operations: string; resource?: string[]; delegation: string; createdBy?: string }) =>
    withDb(async (db) => {
      // fromEntries keeps a type such as "__proto__" as the file's own entry, so it is refused by name.
      const resources = Object.fromEntries(
        (o.resource ?? []).map((r) => {
          const [type, access] = r.split('=');
          if (!type || !access) throw new AdminError(`--resource must be type=read,write (got "${r}")`);
          const list = access.split(',').map((a) => a.trim());
          const wrong = list.find((a) => a !== 'read' && a !== 'write');
          if (wrong !== undefined) throw new AdminError(`--resource ${type}: access must be read, write or read,write (got "${wrong}")`);
          return [type, list];
        }),
      );
      const delegation = o.delegation === 'none' || o.delegation === 'all' ? o.delegation : o.delegation.split(',').map((m) => m.trim());
      const spec = { keys: { key: { name: o.name, operations: o.operations.split(',').map((g) => g.trim()), resources, delegation, ...(o.createdBy ? { created_by: o.createdBy } : {}) } } };
      const added = await asOptions('keys', 'key', addToWorkspace(db, systemClock, o.workspace, spec));
      return { workspace_id: o.workspace, ...added.keys.key! };
    }),
  );
key.command('revoke').requiredOption('--id <id>', 'key id (ak_...)').description('revoke a key; its next request is refused').action((o: { id: string }) => withDb((db) => revokeKey(db, systemClock, o.id)));
key.command('replace').requiredOption('--id <id>', 'key id (ak_...)').description('make a new key with the same grants; revoke the old one once deployed').action((o: { id: string }) => withDb((db) => replaceKey(db, systemClock, o.id)));
const member = program.command('member').description('workspace members');
member.command('list').requiredOption('--workspace <id>', 'workspace id (ws_...)').description("a workspace's members").action((o: { workspace: string }) => withDb((db) => listMembers(db, o.workspace)));
member
  .command('add')
  .requiredOption('--workspace <id>', 'workspace id (ws_...)')
  .requiredOption('--name <name>', 'display name')
  .requiredOption('--email <email>', 'e-mail address (unique in the workspace; never used as an id)')
  .option('--role <role>', `one of ${memberRoleNames.join(', ')}`, 'member')
  .description('add a member to an existing workspace; prints the member id')
  .action((o: { workspace: string; name: string; email: string; role: string }) =>
    withDb(async (db) => {
      if (!(memberRoleNames as readonly string[]).includes(o.role)) throw new AdminError(`--role must be one of ${memberRoleNames.join(', ')} (got "${o.role}")`);
      const added = await asOptions('members', 'member', addToWorkspace(db, systemClock, o.workspace, { members: { member: { name: o.name, email: o.email, role: o.role } } }));
      return { workspace_id: o.workspace, id: added.members.member! };
    }),
  );
const bundle = program.command('bundle').description('sites (bundles) for analytics');
bundle.command('list').requiredOption('--workspace <id>', 'workspace id (ws_...)').description("a workspace's sites with their publishable collect keys").action((o: { workspace: string }) => withDb((db) => listBundles(db, o.workspace)));
bundle
  .command('add')
  .requiredOption('--workspace <id>', 'workspace id (ws_...)')
  .requiredOption('--name <name>', 'site name')
  .requiredOption('--domain <domain>', 'the site\'s host name, e.g. docs.example.com')
  .description('add a site to an existing workspace; prints its id and publishable collect key')
  .action((o: { workspace: string; name: string; domain: string }) =>
    withDb(async (db) => {
      const added = await asOptions('bundles', 'site', addToWorkspace(db, systemClock, o.workspace, { bundles: { site: { name: o.name, domain: o.domain } } }));
      return { workspace_id: o.workspace, id: added.bundles.site!, collect_key: added.collect_keys.site! };
    }),
  );
member.command('disable').requiredOption('--id <id>', 'member id (mb_...)').description('disable a member; keys can no longer act for them').action((o: { id: string }) => withDb((db) => disableMember(db, systemClock, o.id)));

const signinError = (err: unknown) => {
  throw err instanceof SigninError ? new AdminError(err.message) : err;
};
program
  .command('signin-link')
  .requiredOption('--workspace <id>', 'workspace id (ws_...)')
  .requiredOption('--member <id>', 'member id (mb_...)')
  .option('--next <path>', 'page to open once signed in, a path on this service', '/dashboard')
  .option('--base-url <url>', 'public origin of the service', `http://localhost:${process.env.PORT || 8080}`)
  .description('print a one-time sign-in link for a member (valid 15 minutes, works once; opens a 12-hour session)')
  .action((o: { workspace: string; member: string; next: string; baseUrl: string }) =>
    withDb((db) => createSigninLink(db, systemClock, { workspaceId: o.workspace, memberId: o.member, next: o.next, baseUrl: o.baseUrl }).catch(signinError)),
  );
const session = program.command('session').description('sign-in sessions');
session
  .command('revoke')
  .option('--id <id>', 'session id (ss_..., logged with each request)')
  .option('--member <id>', "end all of this member's sessions")
  .description('end sign-in sessions; refused from their next request on')
  .action((o: { id?: string; member?: string }) =>
    withDb(async (db) => {
      if ((o.id === undefined) === (o.member === undefined)) throw new AdminError('give exactly one of --id or --member');
      return revokeSession(db, systemClock, o.id !== undefined ? { id: o.id } : { memberId: o.member! });
    }),
  );

const outbox = program.command('outbox').description('change-event consumers (automation, webhooks)');
outbox
  .command('status')
  .description('each consumer: its position, who holds its lease, and the event it is stuck on with the last error')
  .action(() =>
    withDb(async (db) =>
      (await listOutboxConsumers(db.sql)).map((c) => ({
        name: c.name,
        position: { xid: c.position_xid, seq: Number(c.position_seq) },
        leased_by: c.leased_by,
        lease_until: c.lease_until,
        failing_event_id: c.failing_event_id,
        attempts: c.attempts,
        retry_at: c.retry_at,
        last_error: c.last_error,
        last_error_at: c.last_error_at,
      })),
    ),
  );
outbox
  .command('skip')
  .requiredOption('--consumer <name>', 'consumer name (see outbox status)')
  .requiredOption('--event <id>', 'the event it is stuck on (evt_...); only that one is skipped')
  .description('move a consumer past the one event it is stuck on (after deciding it can never be handled)')
  .action((o: { consumer: string; event: string }) =>
    withDb(async (db) => {
      if (!(await skipOutboxEvent(db, systemClock, o.consumer, o.event))) {
        throw new AdminError(`consumer ${o.consumer} is not stuck on ${o.event} (see npm run admin -- outbox status)`);
      }
      return { consumer: o.consumer, skipped: o.event };
    }),
  );

const adminDeps: AdminDeps = { withDb, clock: systemClock };
limitsAdmin(program, adminDeps);
for (const m of modules) m.admin?.(program, adminDeps);

try {
  await program.parseAsync(argv);
} catch (err) {
  const code = (err as { code?: string }).code;
  if (code === 'commander.helpDisplayed' || code === 'commander.version' || code === 'commander.help') process.exit(0);
  const message = err instanceof AdminError ? err.message : code?.startsWith('commander.') ? '' : `failed: ${(err as Error).message}`;
  if (message) process.stderr.write(`admin: ${message.replace(/\s+/g, ' ')}\n`);
  process.exit(1);
}
