/**
 * The automation settings pages for a signed-in member:
 *
 * - `GET /settings/automation`: every rule of the member's workspace (built-in first, then authored),
 *   its trigger and actions in words, whether it runs, and its last run.
 * - `GET /settings/automation/:appId/:ruleId`: one rule and its runs, newest first, paged with
 *   `?before=<queued_at>.<run id>`.
 * - `GET` and `POST /settings/automation/new`: a rule authored on a page (authorPage.ts).
 * - `POST /settings/automation/:appId/:ruleId/pause` and `/resume`: CSRF-protected forms for owners
 *   and admins (authored rules only), then a 303 back to the page the form was on with `?done=...`.
 */
import express, { type Request, type Response } from 'express';
import { listWorkspaceMembers } from '../../db/queries/credentials.ts';
import type { ModuleDeps } from '../../server/module.ts';
import { AdminError } from '../../server/admin.ts';
import type { MemberPage, NavEntry } from '../../server/pages.ts';
import { parsePagePosition, positionOf, timeInWords } from '../../server/pages/format.ts';
import { setEnabled } from './admin.ts';
import { ruleAuthoringRoutes } from './authorPage.ts';
import { findAnyRule } from './handlers.ts';
import { type DbAutomationRunRow, findRule, latestRuns, listRules, listRuns } from './queries.ts';
import { BUILT_IN_RULES, type Rule, compareRules, ruleFromRow } from './rules.ts';
import { actionDetails, actionInWords, triggerInWords } from './words.ts';

/** Runs per page of a rule's page. */
export const RUNS_PER_PAGE = 20;
const MAX_RULES = 5000;
const DONE: Record<string, string> = {
  created: 'is saved and enabled: changes from now on run it.',
  paused: 'is paused: changes from now on do not run it.',
  resumed: 'is running again: changes from now on run it (changes made while it was paused are not replayed).',
};

type RuleParams = { appId: string; ruleId: string };

const ruleHref = (r: { appId: string; ruleId: string }) => `/settings/automation/${encodeURIComponent(r.appId)}/${encodeURIComponent(r.ruleId)}`;

function runStatus(run: DbAutomationRunRow | undefined) {
  return run ? { status: run.status, at: timeInWords(Number(run.finished_at ?? run.started_at ?? run.queued_at)) } : null;
}

interface ActionOutcomeRow {
  type: string;
  status: string;
  message?: string;
  record_id?: string;
  notified?: number;
}

function outcomeInWords(o: ActionOutcomeRow): string {
  const more = [o.notified !== undefined ? `${o.notified} notified` : '', o.record_id ?? '', o.message ?? ''].filter(Boolean);
  return `${o.type}: ${o.status.replace('_', ' ')}${more.length ? ` · ${more.join(' · ')}` : ''}`;
}

export function automationRoutes(deps: ModuleDeps): express.Router {
  const { db, clock, pages } = deps;
  const views = pages.views(new URL('./pages/', import.meta.url));
  const router = pages.router();

  /** Names members by id (a session knows only its own member). */
  async function memberNamer(workspaceId: string): Promise<(id: string) => string> {
    const names = new Map((await listWorkspaceMembers(db.sql, workspaceId)).map((m) => [m.id, m.name]));
    return (id) => names.get(id) ?? id;
  }

  const noRule = (page: MemberPage, ruleId: string, appId: string) =>
    page.notice(404, 'No such rule', [`This workspace has no automation rule ${ruleId} of app ${appId}. It may have been deleted.`]);

  function ruleSummary(rule: Rule, name: (id: string) => string, manage: boolean, last: DbAutomationRunRow | undefined) {
    return {
      appId: rule.appId,
      ruleId: rule.ruleId,
      name: rule.name,
      description: rule.description ?? '',
      href: ruleHref(rule),
      builtIn: rule.builtIn,
      enabled: rule.enabled,
      trigger: triggerInWords(rule.trigger),
      actions: rule.actions.map((a) => ({ words: actionInWords(a, name), details: actionDetails(a) })),
      canManage: manage && !rule.builtIn,
      lastRun: runStatus(last),
    };
  }

  router.get('/settings/automation', async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const { workspaceId, manage } = page;
    const stored: Rule[] = [];
    let after: { appId: string; ruleId: string } | null = null;
    for (;;) {
      const rows = await listRules(db.sql, workspaceId, {}, after, 500);
      stored.push(...rows.map(ruleFromRow));
      const last = rows.at(-1);
      if (rows.length < 500 || !last || stored.length >= MAX_RULES) break;
      after = { appId: last.app_id, ruleId: last.rule_id };
    }
    const latest = new Map((await latestRuns(db.sql, workspaceId)).map((r) => [`${r.app_id}/${r.rule_id}`, r]));
    const authored = stored.sort((a, b) => (a.appId !== b.appId ? compareRules(a, b) : a.name.localeCompare(b.name, 'en') || compareRules(a, b)));
    const name = await memberNamer(workspaceId);
    const rules = [...[...BUILT_IN_RULES].sort(compareRules), ...authored].map((r) => ruleSummary(r, name, manage, latest.get(`${r.appId}/${r.ruleId}`)));
    const done = typeof req.query.done === 'string' ? DONE[req.query.done] : undefined;
    const doneRule = done && typeof req.query.rule === 'string' ? rules.find((r) => r.ruleId === req.query.rule) : undefined;
    await page.send(200, {
      title: 'Automation rules',
      html: views.render('rules', {
        csrf: page.csrf,
        manage,
        rules,
        flash: done ? `${doneRule ? `“${doneRule.name}”` : 'The rule'} ${done}` : '',
      }),
    });
  });

  ruleAuthoringRoutes(deps, router, views);

  router.get('/settings/automation/:appId/:ruleId', async (req: Request<RuleParams>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const { workspaceId, manage } = page;
    const before = parsePagePosition(req.query.before);
    if (before === 'invalid') {
      return page.notice(400, 'Bad request', ['The “before” position in this address is not one this page made (it looks like 1795000000000.rn_…). Open the rule from the list of rules again.']);
    }
    const { appId, ruleId } = req.params;
    const rule = await findAnyRule(db.sql, workspaceId, ruleId, appId);
    if (!rule) return noRule(page, ruleId, appId);
    const runs = await listRuns(db.sql, workspaceId, rule.appId, rule.ruleId, before && { at: before.at, id: before.id }, RUNS_PER_PAGE + 1);
    const shown = runs.slice(0, RUNS_PER_PAGE);
    const last = shown.at(-1);
    const older = runs.length > RUNS_PER_PAGE && last ? `${ruleHref(rule)}?before=${positionOf(last.queued_at, last.id)}` : '';
    const row = rule.builtIn ? undefined : await findRule(db.sql, workspaceId, rule.ruleId, rule.appId);
    const name = await memberNamer(workspaceId);
    const changedBy = row?.changed_by ? row.changed_by.replace(/^member (\S+)$/, (_m, id: string) => name(id)) : '';
    const done = typeof req.query.done === 'string' ? DONE[req.query.done] : undefined;
    await page.send(200, {
      title: rule.name,
      html: views.render('rule', {
        csrf: page.csrf,
        manage,
        rule: ruleSummary(rule, name, manage, undefined),
        changed: rule.builtIn ? '' : `${timeInWords(rule.updatedAt)}${changedBy ? ` by ${changedBy}` : ''}`,
        created: rule.builtIn ? '' : timeInWords(rule.createdAt),
        flash: done ? `“${rule.name}” ${done}` : '',
        runs: shown.map((r) => ({
          id: r.id,
          status: r.status,
          event: r.event_type.replace(/^resource\./, ''),
          recordId: r.record_id,
          depth: Number(r.depth),
          queued: timeInWords(Number(r.queued_at)),
          // The day is left out when it is the queued time's: the column stays narrow.
          finished: r.finished_at === null ? '' : timeInWords(Number(r.finished_at)).replace(`${timeInWords(Number(r.queued_at)).slice(0, 11)}`, ''),
          error: r.error ?? '',
          outcomes: (r.actions ? (JSON.parse(r.actions) as ActionOutcomeRow[]) : []).map(outcomeInWords),
        })),
        older,
        newest: before ? ruleHref(rule) : '',
      }),
    });
  });

  for (const [verb, enabled] of [['pause', false], ['resume', true]] as const) {
    router.post(`/settings/automation/:appId/:ruleId/${verb}`, pages.protectForm, async (req: Request<RuleParams>, res: Response) => {
      const page = await pages.member(req, res);
      if (!page) return;
      const { member, workspaceId } = page;
      const { appId, ruleId } = req.params;
      const rule = await findAnyRule(db.sql, workspaceId, ruleId, appId);
      if (!rule) return noRule(page, ruleId, appId);
      if (rule.builtIn) {
        return page.notice(403, 'Not allowed', [`“${rule.name}” is built into the service and locked: it always runs and cannot be paused or resumed.`]);
      }
      if (!page.manage) {
        return page.notice(403, 'Not allowed', [`Only owners and admins may pause or resume automation rules; you are signed in as ${member.name} (${member.role}).`]);
      }
      try {
        await setEnabled(db, clock, workspaceId, rule.ruleId, enabled, `member ${member.id}`, rule.appId);
      } catch (err) {
        // Deleted between the read above and this write.
        if (!(err instanceof AdminError)) throw err;
        return noRule(page, ruleId, appId);
      }
      const body = (req.body ?? {}) as Record<string, unknown>;
      const back = body.back === 'rule' ? ruleHref(rule) : '/settings/automation';
      res.redirect(303, `${back}?done=${enabled ? 'resumed' : 'paused'}&rule=${encodeURIComponent(rule.ruleId)}`);
    });
  }

  return router;
}

/** The module's entry in the navigation bar. */
export const automationNavigation: NavEntry[] = [{ label: 'Automation', path: '/settings/automation', order: 20 }];
