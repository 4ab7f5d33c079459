/**
 * The composition root: the kernel (server/) with every module (handlers/): the namespaces and the
 * platform's features. This is the only file that knows the modules; adding one is its folder, one line
 * here and, for a namespace, its part of the document.
 */
import type { AnyOperationId } from './generated/catalogue.ts';
import { analytics } from './handlers/analytics/index.ts';
import { audit } from './handlers/audit/index.ts';
import { automation } from './handlers/automation/index.ts';
import { customers } from './handlers/customers/index.ts';
import { discovery } from './handlers/discovery/index.ts';
import { documents } from './handlers/documents/index.ts';
import { inbox } from './handlers/inbox/index.ts';
import { keys } from './handlers/keys/index.ts';
import { mailbox } from './handlers/mailbox/index.ts';
import { mcp } from './handlers/mcp/index.ts';
import { members } from './handlers/members/index.ts';
import { records } from './handlers/records/index.ts';
import { signin } from './handlers/signin/index.ts';
import { signing } from './handlers/signing/index.ts';
import { webhooks } from './handlers/webhooks/index.ts';
import { workspace } from './handlers/workspace/index.ts';
import { registerWorkspaceSections } from './server/admin.ts';
import { registerAuditWords } from './server/audit.ts';
import type { AnyServiceModule } from './server/module.ts';
import { buildService, type ServiceDeps } from './server/service.ts';

/**
 * The namespaces (each with its operations) and the platform features (sign-in by e-mail, members, API
 * keys, the audit log, the development mailbox, agent access over MCP: pages, jobs, commands and
 * credentials, without operations of their own).
 */
export const modules = [discovery, workspace, customers, analytics, automation, inbox, webhooks, documents, signing, records, signin, members, keys, audit, mailbox, mcp] as const;

// The modules' sections of the workspace file (`automations:`), for every caller of the admin functions.
registerWorkspaceSections(modules.flatMap((m: AnyServiceModule) => (m.workspaceFile ? [m.workspaceFile] : [])));

// What the modules say of the audit entries they record, for every reader of the log (the page, `audit list`).
registerAuditWords(modules.flatMap((m: AnyServiceModule) => (m.audit ? [m.audit] : [])));

/** Every module's migrations folder, for `db.migrate(migrations)` in every process that opens the database. */
export const migrations = modules.flatMap((m: AnyServiceModule) => (m.migrations ? [m.migrations] : []));

// Every operation of the document belongs to a listed module (each module's handlers are complete for its namespace).
type Uncovered = Exclude<AnyOperationId, `${(typeof modules)[number]['namespace']}.${string}`>;
const everyNamespaceListed: [Uncovered] extends [never] ? true : { missing: Uncovered } = true;
void everyNamespaceListed;

export type { ServiceDeps };

/** Builds the HTTP listener and the background jobs of one service process. */
export function createService(deps: ServiceDeps) {
  return buildService(deps, modules);
}
