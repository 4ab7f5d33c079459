/**
 * The API keys settings page (`/settings/keys`).
 *
 * - Everyone signed in sees the workspace's keys: name, grants and delegation in words, creator,
 *   created, last used, state (and the replacement pairs: both keys work until the old one is
 *   revoked); revoked keys in a collapsed list; never a secret. Plain members read only (no forms).
 * - Owners and admins create keys (name, operations per namespace, resource access, delegation),
 *   revoke, replace, and change a key's delegation: each a CSRF-protected form (`pages.protectForm`)
 *   answering 303 back to the page (post/redirect/get). The work is server/admin.ts's, the same the
 *   admin CLI does, recorded in the audit log with the member as actor.
 * - A new secret (create, replace) is held sealed for the next view of this page
 *   (server/pages/holds.ts) and shown there once with a copy button; a reload finds nothing.
 * - The workspace's API-key access (the operator's `workspace api-keys`): `off` hides the form and
 *   says why; `stopped` also says that existing keys are refused.
 * - The sites' publishable collect keys (`pk_...`), which are safe in a web page.
 */
import express, { type Request, type Response } from 'express';
import type { Logger } from 'pino';
import type { Database } from '../../db/database.ts';
import { listWorkspaceMembers } from '../../db/queries/credentials.ts';
import { AdminError, apiKeyAccessOf, changeDelegation, createKey, type DelegationSpec, grantableResourceTypes, keysRefusal, listBundles, listKeys, replaceKey, revokeKey } from '../../server/admin.ts';
import type { AuditActor } from '../../server/audit.ts';
import type { Clock } from '../../server/clock.ts';
import type { MemberPage, NavEntry, PageKit } from '../../server/pages.ts';
import { timeInWords } from '../../server/pages/format.ts';
import { bidiControlProblem } from '../../server/text.cjs';
import { ChooserRefusal as Refusal, delegationChooserHtml, delegationFromForm, grantsChooserHtml, operationsFromForm, resourcesFromForm } from '../../server/pages/grants.ts';
import { delegationInWords, grantsInWords, resourcesInWords } from '../../server/pages/grantWords.ts';

export const KEYS_PATH = '/settings/keys';
const KEY_ID = /^ak_[0-9a-z]{1,40}$/;

export const keysNavigation: NavEntry[] = [
  { label: 'API keys', path: KEYS_PATH, order: 55, section: 'settings', summary: 'The workspace’s API keys: what each may call and for whom, when it was last used; create, replace and revoke them.' },
];
export const KEYS_CSS = new URL('./keys.css', import.meta.url);

export interface KeysOptions {
  db: Database;
  clock: Clock;
  logger: Logger;
  pages: PageKit;
}

/** What a post holds for the page's next view: its outcome, and a new secret to show once. */
interface Held {
  flash?: string;
  problem?: string;
  secret?: { id: string; name: string; secret: string; replaces?: string };
}

const actorOf = (page: MemberPage): AuditActor => ({ type: 'member', id: page.member.id, label: page.member.name });

/** The delegation a form chose: `delegation` none / selected / all, and `delegate` member ids. */
function delegationFrom(body: Record<string, unknown>): DelegationSpec {
  return delegationFromForm(body, 'the key');
}

export function keysRoutes(options: KeysOptions): express.Router {
  const { db, clock, logger, pages } = options;
  const router = pages.router();
  const views = pages.views(new URL('./pages', import.meta.url));

  router.get(KEYS_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const held = ((await page.take()) ?? {}) as Held;
    const ws = page.workspaceId;
    const [keys, members, bundles, access, types] = await Promise.all([
      listKeys(db, ws), listWorkspaceMembers(db.sql, ws), listBundles(db, ws), apiKeyAccessOf(db.sql, ws), grantableResourceTypes(db.sql, ws),
    ]);
    const names = new Map(members.map((m) => [m.id, m.disabled_at === null ? m.name : `${m.name} (disabled)`]));
    const byId = new Map(keys.map((k) => [k.id, k]));
    const view = keys.map((k) => {
      const replacement = keys.find((o) => o.replaces_key_id === k.id && o.revoked_at === null);
      const replaced = k.replaces_key_id ? byId.get(k.replaces_key_id) : undefined;
      return {
        id: k.id,
        name: k.name,
        grants: grantsInWords(k.operations),
        resources: resourcesInWords(k.resources),
        delegation: delegationInWords(k.delegation, names),
        delegationMode: k.delegation === 'none' || k.delegation === 'all' ? k.delegation : 'selected',
        delegates: Array.isArray(k.delegation) ? k.delegation : [],
        creator: k.created_by ? (names.get(k.created_by) ?? k.created_by) : 'the operator',
        created: timeInWords(Number(k.created_at)),
        lastUsed: k.last_used_at === null ? 'never' : timeInWords(Number(k.last_used_at)),
        revoked: k.revoked_at === null ? '' : timeInWords(Number(k.revoked_at)),
        replacedBy: replacement && k.revoked_at === null ? `replaced by ${replacement.name} ${replacement.id}: both work until this one is revoked` : '',
        replaces: replaced && replaced.revoked_at === null && k.revoked_at === null ? `replaces ${replaced.name} ${replaced.id}: both keys work until you revoke the old one` : '',
      };
    });
    await page.send(200, {
      title: 'API keys',
      html: views.render('keys', {
        manage: page.manage,
        csrf: page.csrf,
        flash: held.flash ?? '',
        problem: held.problem ?? '',
        secret: held.secret ?? null,
        access,
        accessRefusal: access === 'on' ? '' : keysRefusal(access),
        active: view.filter((k) => !k.revoked),
        revoked: view.filter((k) => k.revoked),
        // The page kit's grants chooser (shared with the MCP consent page).
        grantsHtml: grantsChooserHtml({ resourceTypes: types }),
        delegationHtml: delegationChooserHtml,
        members: members.filter((m) => m.disabled_at === null).map((m) => ({ id: m.id, name: m.name, role: m.role })),
        bundles: bundles.map((b) => ({ id: b.id, name: b.name, domain: b.domain, key: b.collect_key ?? '' })),
      }),
    });
  });

  /** One action: checks, does, holds the outcome and redirects to the page. */
  const action = (work: (page: MemberPage, body: Record<string, unknown>) => Promise<Held>) =>
    async (req: Request, res: Response) => {
      const page = await pages.member(req, res);
      if (!page) return;
      if (!page.manage) return page.notice(403, 'Owners and admins only', ['Only owners and admins create, replace and revoke the workspace’s API keys.']);
      let outcome: Held;
      try {
        outcome = await work(page, (req.body ?? {}) as Record<string, unknown>);
      } catch (err) {
        if (!(err instanceof Refusal) && !(err instanceof AdminError)) throw err;
        const message = err.message;
        outcome = { problem: message.charAt(0).toUpperCase() + message.slice(1) + (/[.!?]$/.test(message) ? '' : '.') };
      }
      await page.hold(KEYS_PATH, outcome);
      res.redirect(303, KEYS_PATH);
    };

  const keyOf = (body: Record<string, unknown>) => {
    if (typeof body.key !== 'string' || !KEY_ID.test(body.key)) throw new Refusal('No such API key in this workspace.');
    return body.key;
  };

  router.post(`${KEYS_PATH}/create`, pages.protectForm, action(async (page, body) => {
    const name = typeof body.name === 'string' ? body.name.trim().replace(/\s+/g, ' ') : '';
    if (!name) throw new Refusal('Give the key a name that says what it is for (up to 200 characters).');
    if (name.length > 200) throw new Refusal('The name is longer than 200 characters.');
    const bidi = bidiControlProblem('name', name);
    if (bidi) throw new Refusal(bidi);
    const grants = operationsFromForm(body);
    if (!grants.length) throw new Refusal('Choose at least one operation the key may call (all of a namespace, or single operations).');
    const resources = resourcesFromForm(body);
    const delegation = delegationFrom(body);
    const made = await createKey(db, clock, page.workspaceId, { name, operations: grants, resources, delegation, createdBy: page.member.id }, { actor: actorOf(page) });
    logger.info({ workspace_id: page.workspaceId, key_id: made.id }, 'API key created on the page');
    return { flash: `Created the key ${name} (${made.id}).`, secret: { id: made.id, name, secret: made.secret } };
  }));

  router.post(`${KEYS_PATH}/revoke`, pages.protectForm, action(async (page, body) => {
    const id = keyOf(body);
    await revokeKey(db, clock, id, { actor: actorOf(page), workspaceId: page.workspaceId });
    logger.info({ workspace_id: page.workspaceId, key_id: id }, 'API key revoked on the page');
    return { flash: `Revoked the key ${id}: its next request is refused.` };
  }));

  router.post(`${KEYS_PATH}/replace`, pages.protectForm, action(async (page, body) => {
    const id = keyOf(body);
    const made = await replaceKey(db, clock, id, { actor: actorOf(page), workspaceId: page.workspaceId });
    const row = await db.sql.one<{ name: string }>(`SELECT name FROM api_keys WHERE id = ?`, [made.id]);
    logger.info({ workspace_id: page.workspaceId, key_id: made.id, replaces: id }, 'API key replaced on the page');
    return {
      flash: `Made ${made.id} to replace ${id}: both keys work until you revoke the old one.`,
      secret: { id: made.id, name: row?.name ?? '', secret: made.secret, replaces: id },
    };
  }));

  router.post(`${KEYS_PATH}/delegation`, pages.protectForm, action(async (page, body) => {
    const id = keyOf(body);
    const delegation = delegationFrom(body);
    const changed = await changeDelegation(db, clock, id, delegation, { actor: actorOf(page), workspaceId: page.workspaceId });
    if (JSON.stringify(changed.before) === JSON.stringify(changed.delegation)) return { flash: `The key ${id} already acted for exactly these members: nothing changed.` };
    return { flash: `Changed whom the key ${id} may act for, from its next request on.` };
  }));

  return router;
}
