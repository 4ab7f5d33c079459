import { listWorkspaceMembers } from '../../../db/queries/credentials.ts';
import type { ModuleDeps } from '../../../server/module.ts';
import type { MemberPage, Views } from '../../../server/pages.ts';
import { readsEveryType } from '../readable.ts';
import { type MemberNamer, typesOf } from './summaries.ts';

/** What the webhook pages share: the module's deps, its templates and a few answers. */
export interface WebhookPageContext {
  readonly deps: ModuleDeps;
  readonly views: Views;
  memberNamer(workspaceId: string): Promise<MemberNamer>;
  /** Whether the page's member reads every type of a subscription or proposal (the API's rule). */
  readable(page: MemberPage, row: { resource_types: string }): boolean;
  notAllowed(page: MemberPage, what: string): Promise<void>;
}

export function webhookPageContext(deps: ModuleDeps): WebhookPageContext {
  return {
    deps,
    views: deps.pages.views(new URL('./', import.meta.url)),
    async memberNamer(workspaceId) {
      const names = new Map((await listWorkspaceMembers(deps.db.sql, workspaceId)).map((m) => [m.id, m.name]));
      return (id) => (id === null ? '' : (names.get(id) ?? id));
    },
    readable: (page, row) => readsEveryType(page.session, page.member, typesOf(row)),
    notAllowed: (page, what) => page.notice(403, 'Not allowed', [`Only owners and admins may ${what}; you are signed in as ${page.member.name} (${page.member.role}).`]),
  };
}
