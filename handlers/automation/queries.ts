/** The automation tables (db/migrations/20261202000000_automation.ts): rules and runs. */
import type { Sql } from '../../db/database.ts';
import type { DbBoolean } from '../../db/rows.ts';
import { claim, finishLeased, type Lease, type LeaseColumns } from '../../server/background.ts';

export interface DbAutomationRuleRow {
  workspace_id: string;
  app_id: string;
  rule_id: string;
  name: string;
  description: string | null;
  enabled: DbBoolean;
  /** When it was created or last resumed (Unix ms): older changes never run it. */
  enabled_since: number;
  resource_type: string;
  event: string;
  /** JSON: AutomationTrigger. */
  trigger: string;
  /** JSON: AutomationAction[]. */
  actions: string;
  changed_by: string | null;
  created_at: number;
  updated_at: number;
}

export type RunStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'skipped';

export interface DbAutomationRunRow {
  id: string;
  workspace_id: string;
  app_id: string;
  rule_id: string;
  event_id: string;
  event_type: string;
  resource_type: string;
  record_id: string;
  event_occurred_at: number;
  depth: number;
  status: RunStatus;
  attempts: number;
  leased_by: string | null;
  lease_until: number | null;
  /** JSON: each action's outcome. */
  actions: string | null;
  error: string | null;
  queued_at: number;
  started_at: number | null;
  finished_at: number | null;
}

export async function insertRule(sql: Sql, r: DbAutomationRuleRow): Promise<void> {
  await sql.run(
    `INSERT INTO automation_rules (workspace_id, app_id, rule_id, name, description, enabled, enabled_since, resource_type, event, trigger, actions, changed_by, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [r.workspace_id, r.app_id, r.rule_id, r.name, r.description, Boolean(r.enabled), r.enabled_since, r.resource_type, r.event, r.trigger, r.actions, r.changed_by, r.created_at, r.updated_at],
  );
}

/** A rule by id (and app when given); `lock` holds it until the transaction ends. */
export function findRule(sql: Sql, workspaceId: string, ruleId: string, appId: string | undefined, lock = false): Promise<DbAutomationRuleRow | undefined> {
  const forUpdate = lock && sql.dialect === 'pg' ? ' FOR UPDATE' : '';
  return appId === undefined
    ? sql.one<DbAutomationRuleRow>(`SELECT * FROM automation_rules WHERE workspace_id = ? AND rule_id = ? ORDER BY app_id LIMIT 1${forUpdate}`, [workspaceId, ruleId])
    : sql.one<DbAutomationRuleRow>(`SELECT * FROM automation_rules WHERE workspace_id = ? AND app_id = ? AND rule_id = ?${forUpdate}`, [workspaceId, appId, ruleId]);
}

/** Rules in (app_id, rule_id) order after a position, with optional filters. */
export function listRules(
  sql: Sql,
  workspaceId: string,
  filter: { appId?: string; enabled?: boolean },
  after: { appId: string; ruleId: string } | null,
  limit: number,
): Promise<DbAutomationRuleRow[]> {
  const where = ['workspace_id = ?'];
  const params: Array<string | number | boolean> = [workspaceId];
  if (filter.appId !== undefined) (where.push('app_id = ?'), params.push(filter.appId));
  if (filter.enabled !== undefined) (where.push('enabled = ?'), params.push(filter.enabled));
  // Byte order on both databases (PostgreSQL's default collation may be a locale's): the order built-in rules are merged in.
  const c = sql.dialect === 'pg' ? ' COLLATE "C"' : '';
  if (after) (where.push(`(app_id${c} > ? OR (app_id = ? AND rule_id${c} > ?))`), params.push(after.appId, after.appId, after.ruleId));
  return sql.all<DbAutomationRuleRow>(`SELECT * FROM automation_rules WHERE ${where.join(' AND ')} ORDER BY app_id${c}, rule_id${c} LIMIT ?`, [...params, limit]);
}

/** The enabled rules that a change of this type and kind may trigger. */
export function rulesFor(sql: Sql, workspaceId: string, resourceType: string, event: string): Promise<DbAutomationRuleRow[]> {
  return sql.all<DbAutomationRuleRow>(
    `SELECT * FROM automation_rules WHERE workspace_id = ? AND resource_type = ? AND event = ? AND enabled = ? ORDER BY app_id, rule_id`,
    [workspaceId, resourceType, event, true],
  );
}

export function setRuleEnabled(sql: Sql, workspaceId: string, appId: string, ruleId: string, enabled: boolean, changedBy: string, now: number): Promise<number> {
  // Resuming starts a new enabled period: changes made while paused stay without a run.
  const since = enabled ? ', enabled_since = ?' : '';
  return sql.run(`UPDATE automation_rules SET enabled = ?, changed_by = ?, updated_at = ?${since} WHERE workspace_id = ? AND app_id = ? AND rule_id = ? AND enabled = ?`, [
    enabled, changedBy, now, ...(enabled ? [now] : []), workspaceId, appId, ruleId, !enabled,
  ]);
}

export async function deleteRule(sql: Sql, workspaceId: string, appId: string, ruleId: string): Promise<number> {
  await sql.run(`DELETE FROM automation_runs WHERE workspace_id = ? AND app_id = ? AND rule_id = ?`, [workspaceId, appId, ruleId]);
  return sql.run(`DELETE FROM automation_rules WHERE workspace_id = ? AND app_id = ? AND rule_id = ?`, [workspaceId, appId, ruleId]);
}

/** Inserts a run unless the rule has one for this event already; true when inserted. */
export async function insertRun(sql: Sql, r: DbAutomationRunRow): Promise<boolean> {
  const changed = await sql.run(
    `INSERT INTO automation_runs (id, workspace_id, app_id, rule_id, event_id, event_type, resource_type, record_id, event_occurred_at, depth, status, attempts, leased_by, lease_until, actions, error, queued_at, started_at, finished_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (workspace_id, app_id, rule_id, event_id) DO NOTHING`,
    [r.id, r.workspace_id, r.app_id, r.rule_id, r.event_id, r.event_type, r.resource_type, r.record_id, r.event_occurred_at, r.depth, r.status, r.attempts, r.leased_by, r.lease_until, r.actions, r.error, r.queued_at, r.started_at, r.finished_at],
  );
  return changed > 0;
}

/** Where a run's lease is kept (the background kit's columns). */
export const RUNS: LeaseColumns = { table: 'automation_runs' };

/**
 * Claims up to `limit` runs under `lease`, in one statement: queued ones, and running ones whose
 * worker's lease ended (it died mid-run). They become `running` (committed) with a new lease; other
 * workers skip the claimed rows.
 */
export function claimRuns(sql: Sql, lease: Lease, limit: number): Promise<DbAutomationRunRow[]> {
  return claim<DbAutomationRunRow>(
    sql,
    {
      ...RUNS,
      due: { text: "status = 'queued'" },
      held: { text: "status = 'running'" },
      set: { text: "status = 'running', started_at = ?, attempts = attempts + 1", params: [lease.now] },
      order: 'queued_at',
      limit,
    },
    lease,
  );
}

/** Records a run's outcome; false when this worker no longer holds it (its lease ended and another took it over). */
export function finishRun(sql: Sql, id: string, worker: string, status: RunStatus, actions: unknown[], error: string | null, now: number): Promise<boolean> {
  return finishLeased(sql, RUNS, id, worker, { text: 'status = ?, actions = ?, error = ?, finished_at = ?', params: [status, JSON.stringify(actions), error, now] });
}

/** Deletes finished runs queued before `before`, at most `limit` (the retention job deletes in batches). */
export function pruneRuns(sql: Sql, before: number, limit: number): Promise<number> {
  return sql.run(
    `DELETE FROM automation_runs WHERE id IN (SELECT id FROM automation_runs WHERE queued_at < ? AND status IN ('succeeded', 'failed', 'skipped') LIMIT ?)`,
    [before, limit],
  );
}

/** A rule's runs, newest first, before a (queued_at, id) position. */
export function listRuns(sql: Sql, workspaceId: string, appId: string, ruleId: string, before: { at: number; id: string } | null, limit: number): Promise<DbAutomationRunRow[]> {
  const params: Array<string | number> = [workspaceId, appId, ruleId];
  let position = '';
  if (before) {
    position = ' AND (queued_at < ? OR (queued_at = ? AND id < ?))';
    params.push(before.at, before.at, before.id);
  }
  return sql.all<DbAutomationRunRow>(
    `SELECT * FROM automation_runs WHERE workspace_id = ? AND app_id = ? AND rule_id = ?${position} ORDER BY queued_at DESC, id DESC LIMIT ?`,
    [...params, limit],
  );
}

/** The newest run of each rule of a workspace (the settings page's "last run"). */
export function latestRuns(sql: Sql, workspaceId: string): Promise<DbAutomationRunRow[]> {
  return sql.all<DbAutomationRunRow>(
    `SELECT r.* FROM automation_runs r WHERE r.workspace_id = ? AND NOT EXISTS (
       SELECT 1 FROM automation_runs n WHERE n.workspace_id = r.workspace_id AND n.app_id = r.app_id AND n.rule_id = r.rule_id
         AND (n.queued_at > r.queued_at OR (n.queued_at = r.queued_at AND n.id > r.id)))`,
    [workspaceId],
  );
}
