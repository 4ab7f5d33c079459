/**
 * The MCP connections' operator commands (`npm run admin -- ...`):
 * `connection list --workspace ws_...` (every connection in words, revoked ones too, never a token) and
 * `connection revoke --id mc_...` (its next call is refused; its OAuth grant's tokens are deleted in
 * the same transaction; recorded in the audit log with the operator as actor).
 */
import type { Command } from 'commander';
import { commandGroup, existingWorkspace } from '../../server/adminCli.ts';
import { listWorkspaceMembers } from '../../db/queries/credentials.ts';
import { AdminError } from '../../server/admin.ts';
import type { AdminDeps } from '../../server/module.ts';
import { listConnections, revokeConnection } from './connections.ts';
import { connectionInWords } from './connectionsPage.ts';

const CONNECTION_ID = /^mc_[0-9a-z]{1,40}$/;

export function connectionsAdmin(program: Command, deps: AdminDeps): void {
  const connection = commandGroup(program, 'connection', 'MCP connections (agents approved on the consent page)');
  connection
    .command('list')
    .requiredOption('--workspace <id>', 'workspace id (ws_...)')
    .description("a workspace's MCP connections: client, access, grants, toolsets, who approved, last use, state (never a token)")
    .action((o: { workspace: string }) =>
      deps.withDb(async (db) => {
        await existingWorkspace(db.sql, o.workspace);
        const members = await listWorkspaceMembers(db.sql, o.workspace);
        const byId = new Map(members.map((m) => [m.id, { name: m.name, role: m.role, disabled: m.disabled_at !== null }]));
        return (await listConnections(db.sql, o.workspace)).map((c) => {
          const w = connectionInWords(c, byId);
          return {
            id: c.id,
            client: c.clientName,
            client_id: c.clientId,
            access: c.access,
            acts_as: c.memberId,
            operations: c.operations.length,
            grants: c.access === 'workspace' ? w.grants.join('; ') : 'the member’s role at approval',
            toolsets: c.toolsets.join(','),
            read_only: c.readOnly,
            tool_listing: c.toolListing,
            delegation: c.access === 'workspace' ? (c.delegation === 'selected' ? c.delegates.join(',') : c.delegation) : '',
            created_by: w.creator,
            created: w.created,
            last_used: w.lastUsed,
            state: w.state,
          };
        });
      }),
    );
  connection
    .command('revoke')
    .requiredOption('--id <id>', 'connection id (mc_...)')
    .description('revoke an MCP connection: its next call is refused and its tokens no longer work')
    .action((o: { id: string }) =>
      deps.withDb(async (db) => {
        if (!CONNECTION_ID.test(o.id)) throw new AdminError(`--id must be a connection id (mc_...), got "${o.id}" (see npm run admin -- connection list --workspace ws_...)`);
        return revokeConnection(db, deps.clock, o.id);
      }),
    );
}
