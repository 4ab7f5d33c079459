/**
 * `GET /settings/signing`: what a workspace's members see of document signing's settings, read-only
 * for everyone (an operator sets the credit with the admin CLI, the provider with BANKID_PROVIDER):
 * whether bankid signing is available and through which provider, the signing credit and the price
 * of a bankid request, and the most recent charges. A charge names its request; its title is shown to
 * whoever may read the request's title here (owners and admins for requests that are not private, and
 * the member who sent it), else only the request id.
 */
import type express from 'express';
import type { Request, Response } from 'express';
import type { ModuleDeps } from '../../../server/module.ts';
import type { NavEntry } from '../../../server/pages.ts';
import { timeInWords } from '../../../server/pages/format.ts';
import { BANKID_STYLESHEET_PATH } from '../bankid/flow.ts';
import { type BankIdSettings, providerOf } from '../bankid/provider.ts';
import { BANKID_PRICE, getCredit, listCharges } from './credit.ts';

export const SIGNING_SETTINGS_PATH = '/settings/signing';
/** Charges listed on the page, newest first. */
export const CHARGES_SHOWN = 20;

export const signingSettingsNavigation: NavEntry[] = [{ label: 'Signing', path: SIGNING_SETTINGS_PATH, order: 70, section: 'settings', summary: 'Signing credit for BankID requests, the provider in use, and recent charges.' }];

/** Mounts the settings page on a page router (its stylesheet is the bankid pages', served by bankid/flow.ts). */
export function signingSettingsRoutes(router: express.Router, deps: ModuleDeps<BankIdSettings>): void {
  const { db, pages } = deps;
  const views = pages.views(new URL('./pages/', import.meta.url));

  router.get(SIGNING_SETTINGS_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const provider = providerOf(deps.settings);
    const credit = await getCredit(db.sql, page.workspaceId);
    const charges = await listCharges(db.sql, page.workspaceId, CHARGES_SHOWN);
    const ids = charges.map((c) => c.requestId);
    const requests = new Map<string, { title: string; private: unknown; owner_member_id: string | null; status: string }>();
    if (ids.length) {
      const rows = await db.sql.all<{ id: string; title: string; private: unknown; owner_member_id: string | null; status: string }>(
        `SELECT id, title, private, owner_member_id, status FROM signing_requests WHERE workspace_id = ? AND id IN (${ids.map(() => '?').join(', ')})`,
        [page.workspaceId, ...ids],
      );
      for (const r of rows) requests.set(r.id, r);
    }
    await page.send(200, {
      title: 'Signing',
      styles: [BANKID_STYLESHEET_PATH],
      html: views.render('settings', {
        manage: page.manage,
        provider: provider ? { id: provider.id, name: provider.name, test: provider.test } : null,
        balance: credit.balance,
        price: BANKID_PRICE,
        requestsLeft: Math.floor(credit.balance / BANKID_PRICE),
        updatedAt: credit.updatedAt === null ? '' : timeInWords(credit.updatedAt),
        workspaceId: page.workspaceId,
        charges: charges.map((c) => {
          const r = requests.get(c.requestId);
          const readable = r !== undefined && ((page.manage && !r.private) || r.owner_member_id === page.member.id);
          return { requestId: c.requestId, title: readable ? r.title : '', status: r?.status ?? '', amount: c.amount, at: timeInWords(c.chargedAt) };
        }),
      }),
    });
  });
}
