/**
 * The automation engine. A consumer of the change-event outbox (`automation.trigger`) reads every
 * committed event in order and, in the same transaction that advances its position, queues one run
 * per matching enabled rule: the unique (rule, event) key makes that exactly one run whatever the
 * number of processes, and a crash before commit queues nothing and reads the event again. A worker
 * (`automation.runs`, in every process that runs background work) then claims queued runs as lanes free up,
 * marking them `running` under a lease (the background kit's claim, server/background.ts), and
 * performs each in one transaction: the actions, through the same operations as API calls, and the
 * outcome commit together. A worker that dies mid-run leaves the run `running` with nothing done;
 * once its lease ends another worker claims it and the run completes once.
 *
 * Loop guard: every change an action makes carries its run (record_events.cause_*). A rule never
 * runs for a change its own run made, and a chain of runs stops at depth MAX_DEPTH: both are
 * recorded as `skipped` runs, so the guard is visible.
 */
import type { Logger } from 'pino';
import type { Database, Sql } from '../../db/database.ts';
import type { AnyOperationId } from '../../generated/catalogue.ts';
import type { Clock } from '../../server/clock.ts';
import { ServiceError } from '../../server/errors.ts';
import { newId } from '../../server/ids.ts';
import { notify } from '../../server/inbox.ts';
import { recordPagePath } from '../../server/pages/paths.ts';
import type { InternalCalls } from '../../server/internalCalls.ts';
import type { EventCause } from '../../server/operation.ts';
import type { EventConsumer, OutboxEvent } from '../../server/outbox.ts';
import { leaseNow, PROCESS_OWNER, renewLease, WorkPool } from '../../server/background.ts';
import type { BackgroundWorker } from '../../server/workers.ts';
import { allHold, fill } from './conditions.ts';
import { claimRuns, findRule, finishRun, insertRun, RUNS, rulesFor, type DbAutomationRunRow, type RunStatus } from './queries.ts';
import { type Action, BUILT_IN_RULES, type Rule, ruleFromRow, ruleKey } from './rules.ts';

/** Runs caused by runs stop here: a change made by a run of this depth triggers nothing (a skipped run says so). */
export const MAX_DEPTH = 5;
/** A run whose worker failed this many times for reasons other than its actions' documented errors is failed. */
export const MAX_ATTEMPTS = 5;
export const RUNS_WORKER = 'automation.runs';
/** How long a worker holds a claimed run; a worker that dies mid-run loses it after this. */
export const RUN_LEASE_MS = 60_000;
/** Finished runs are kept this long. */
export const RUN_RETENTION_MS = 30 * 86_400_000;

/** Record changes' kinds as a trigger names them; other kinds are a module's declared events (with data), named in full. */
const EVENT_KIND: ReadonlyMap<string, 'created' | 'updated' | 'deleted'> = new Map([['resource.created', 'created'], ['resource.updated', 'updated'], ['resource.deleted', 'deleted']]);

/** The trigger name of an event: `created`/`updated`/`deleted` for record changes, the kind itself for a module's event (signing, documents); undefined for others. */
function triggerName(event: Pick<OutboxEvent, 'type' | 'data'>, declared: ReadonlyMap<string, unknown>): string | undefined {
  return EVENT_KIND.get(event.type) ?? (declared.has(event.type) && event.data ? event.type : undefined);
}

export interface ActionOutcome {
  type: Action['type'];
  status: 'succeeded' | 'failed' | 'not_run';
  message?: string;
  record_id?: string;
  notified?: number;
}

interface EngineDeps {
  readonly db: Database;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly calls: InternalCalls;
  readonly workers: { wake(name: string): void };
  /** The event kinds the modules declare (`signing.request.completed`...): triggers by name, conditions on their data. */
  readonly eventKinds: ReadonlyMap<string, unknown>;
}

/** The record operation of a resource type for a verb, by the catalogue's naming (`<namespace>.<Verb><Type>`). */
function recordOperation(calls: InternalCalls, resourceType: string, verb: 'Get' | 'Create' | 'Update'): AnyOperationId | undefined {
  return calls.operations().find((e) => e.resource === resourceType && e.name.startsWith(verb) && !e.name.startsWith(`${verb}s`))?.id as AnyOperationId | undefined;
}

/** The record of an event as the API returns it (`{id, data}`), or null when it is gone. */
async function readRecord(calls: InternalCalls, sql: Sql, event: Pick<OutboxEvent, 'workspaceId' | 'resourceType' | 'recordId'>, cause: EventCause, now: number) {
  const get = recordOperation(calls, event.resourceType, 'Get');
  if (!get) return null;
  try {
    const out = (await calls.call(get, { id: event.recordId } as never, { workspaceId: event.workspaceId, sql, now, cause })) as { item: { id: string; data: unknown } };
    return out.item;
  } catch (err) {
    if (err instanceof ServiceError && err.status === 404) return null;
    throw err;
  }
}

function matches(rule: Rule, event: OutboxEvent, name: string): boolean {
  if (rule.trigger.event !== name) return false;
  if (EVENT_KIND.has(event.type) && rule.trigger.resource_type !== event.resourceType) return false;
  if (event.occurredAt < rule.enabledSince) return false;
  const fields = rule.trigger.fields;
  if (event.type === 'resource.updated' && fields?.length) return (event.changedFields ?? []).some((f) => fields.includes(f));
  return true;
}

/** The outbox consumer that queues runs. */
export function triggerConsumer(deps: EngineDeps): EventConsumer {
  // Whether the batch in progress queued a run: after its commit, this process's job runner is woken.
  let pending = false;
  return {
    // Rules act on what happens from now on: a new database does not replay its history.
    startAt: 'end',
    async handle(event, sql) {
      const kind = triggerName(event, deps.eventKinds);
      if (event.private || !kind) return;
      const emitted = !EVENT_KIND.has(event.type);
      // A rule on an emitted event is stored with no record type (authoring.ts).
      const stored = (await rulesFor(sql, event.workspaceId, emitted ? '' : event.resourceType, kind)).map(ruleFromRow);
      const candidates = [...BUILT_IN_RULES.filter((r) => r.enabled), ...stored].filter((r) => matches(r, event, kind));
      if (!candidates.length) return;
      const depth = (event.cause?.depth ?? 0) + 1;
      const now = deps.clock.now();
      let record: { id: string; data: unknown } | null | undefined;
      let queued = 0;
      for (const rule of candidates) {
        if (emitted) {
          // An emitted event's conditions hold on its data, as it was emitted.
          if (!allHold(rule.trigger.conditions, event.data)) continue;
        } else if (rule.trigger.conditions?.length && event.type !== 'resource.deleted') {
          record ??= await readRecord(deps.calls, sql, event, { runId: `trigger:${event.id}`, rule: ruleKey(rule), depth }, now);
          if (!record || !allHold(rule.trigger.conditions, record.data)) continue;
        }
        // A match: a run, or a skipped run when the loop guard stops it.
        let status: RunStatus = 'queued';
        let error: string | null = null;
        if (event.cause?.rule === ruleKey(rule)) {
          status = 'skipped';
          error = 'Loop guard: this change was made by this rule\'s own run, and a rule never runs for its own changes.';
        } else if (depth > MAX_DEPTH) {
          status = 'skipped';
          error = `Loop guard: this change was made by a chain of ${MAX_DEPTH} runs; runs stop at that depth.`;
        }
        const run: DbAutomationRunRow = {
          id: newId('rn'),
          workspace_id: event.workspaceId,
          app_id: rule.appId,
          rule_id: rule.ruleId,
          event_id: event.id,
          event_type: event.type,
          resource_type: event.resourceType,
          record_id: event.recordId,
          event_occurred_at: event.occurredAt,
          depth,
          status,
          attempts: 0,
          leased_by: null,
          lease_until: null,
          actions: status === 'skipped' ? JSON.stringify(rule.actions.map((a) => ({ type: a.type, status: 'not_run' }))) : null,
          error,
          queued_at: now,
          started_at: null,
          finished_at: status === 'skipped' ? now : null,
        };
        if ((await insertRun(sql, run)) && status === 'queued') queued++;
      }
      if (queued) pending = true;
    },
    afterCommit() {
      if (pending) {
        pending = false;
        deps.workers.wake(RUNS_WORKER);
      }
    },
  };
}

class RunFailed extends Error {
  constructor(
    readonly outcomes: ActionOutcome[],
    message: string,
  ) {
    super(message);
  }
}

/** The worker that performs queued runs. */
export function runsWorker(deps: EngineDeps & { readonly concurrency?: number; readonly owner?: string }): BackgroundWorker {
  const { db, clock, logger, calls } = deps;
  const owner = deps.owner ?? PROCESS_OWNER;
  // SQLite runs one write transaction at a time, so more lanes would only queue on its one connection;
  // two keep the next run claimed and ready while one commits.
  const lanes = db.dialect === 'pg' ? (deps.concurrency ?? 4) : 2;
  async function rule(sql: Sql, run: DbAutomationRunRow): Promise<Rule | undefined> {
    const builtIn = BUILT_IN_RULES.find((r) => r.appId === run.app_id && r.ruleId === run.rule_id);
    if (builtIn) return builtIn;
    const row = await findRule(sql, run.workspace_id, run.rule_id, run.app_id);
    return row && ruleFromRow(row);
  }

  /** Performs the actions in `sql`; throws RunFailed (with every action's outcome) at the first documented refusal. */
  async function perform(sql: Sql, run: DbAutomationRunRow, r: Rule, now: number): Promise<ActionOutcome[]> {
    const cause: EventCause = { runId: run.id, rule: ruleKey(r), depth: run.depth };
    const call = { workspaceId: run.workspace_id, sql, now, cause };
    const emitted = !EVENT_KIND.has(run.event_type);
    const event = { id: run.event_id, type: run.event_type, occurred_at: Number(run.event_occurred_at), ...(emitted ? { data: await eventData(sql, run) } : {}) };
    const current = run.event_type === 'resource.deleted' || emitted ? null : await readRecord(calls, sql, { workspaceId: run.workspace_id, resourceType: run.resource_type, recordId: run.record_id }, cause, now);
    const scope = { record: current ?? { id: run.record_id }, event, rule: { name: r.name } };
    const outcomes: ActionOutcome[] = [];
    for (const [i, action] of r.actions.entries()) {
      try {
        outcomes.push(await act(action, scope, call, run, current !== null));
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
        const message = `action ${i + 1} (${action.type}) was refused: ${err.status} ${err.code}: ${err.message}`;
        const all: ActionOutcome[] = [
          ...outcomes.map((o) => ({ type: o.type, status: 'not_run' as const, message: `rolled back: action ${i + 1} failed` })),
          { type: action.type, status: 'failed', message: `${err.status} ${err.code}: ${err.message}` },
          ...r.actions.slice(i + 1).map((a) => ({ type: a.type, status: 'not_run' as const })),
        ];
        throw new RunFailed(all, message);
      }
    }
    return outcomes;
  }

  async function act(action: Action, scope: Record<string, unknown>, call: { workspaceId: string; sql: Sql; now: number; cause: EventCause }, run: DbAutomationRunRow, exists: boolean): Promise<ActionOutcome> {
    switch (action.type) {
      case 'set_fields': {
        // The triggering record, or the one the action names (`resource_type`, `record_id`, placeholders filled).
        const named = action.record_id !== undefined && action.resource_type !== undefined;
        const type = named ? action.resource_type! : run.resource_type;
        const id = named ? String(fill(action.record_id, scope) ?? '') : run.record_id;
        const update = recordOperation(calls, type, 'Update');
        if (!update) throw new ServiceError(400, 'invalid_input', `${type} records cannot be updated by a rule.`);
        if (!named && !exists) throw new ServiceError(404, 'not_found', `The ${run.resource_type} record ${run.record_id} no longer exists.`);
        if (!id) throw new ServiceError(400, 'invalid_input', `record_id ${action.record_id ?? ''} names no record for this event.`);
        const body = { id, ...(action.data ? { data: fill(action.data, scope) } : {}), ...(action.unset ? { unset: action.unset } : {}), ...(action.expected ? { expected: fill(action.expected, scope) } : {}) };
        await calls.call(update, body as never, call);
        return { type: 'set_fields', status: 'succeeded', record_id: id };
      }
      case 'create_record': {
        const type = action.resource_type ?? '';
        const create = recordOperation(calls, type, 'Create');
        if (!create) throw new ServiceError(400, 'invalid_input', `${type} records cannot be created by a rule.`);
        const out = (await calls.call(create, { data: fill(action.data ?? {}, scope) } as never, call)) as { item: { id: string } };
        return { type: 'create_record', status: 'succeeded', record_id: out.item.id };
      }
      case 'notify': {
        const actor = await actorOf(call.sql, run);
        const to =
          action.to === 'member' ? { members: action.member_id ? [action.member_id] : [] }
          : action.to === 'actor' ? { members: actor ? [actor] : [] }
          : ({ ownersAndAdmins: true } as const);
        const title = String(fill(action.title ?? 'Automation: {{rule.name}}', scope) ?? '');
        const body = String(fill(action.body ?? '', scope) ?? '');
        const sent = await notify(call.sql, run.workspace_id, to, { kind: 'automation.notice', title, body, link: run.record_id && (run.event_type === 'resource.created' || run.event_type === 'resource.updated') ? recordPagePath(run.record_id) : `/settings/automation/${encodeURIComponent(run.app_id)}/${encodeURIComponent(run.rule_id)}`, sourceId: run.id }, call.now);
        return { type: 'notify', status: 'succeeded', notified: sent.length };
      }
    }
  }

  /** The data of the run's emitted event (signing, documents), from the outbox; null once pruned. */
  async function eventData(sql: Sql, run: DbAutomationRunRow): Promise<unknown> {
    const row = await sql.one<{ data: string | null }>(`SELECT data FROM record_events WHERE id = ?`, [run.event_id]);
    return row?.data ? (JSON.parse(row.data) as unknown) : null;
  }

  /** The member whose change triggered the run (from its event), if any. */
  async function actorOf(sql: Sql, run: DbAutomationRunRow): Promise<string | null> {
    const row = await sql.one<{ actor_member_id: string | null }>(`SELECT actor_member_id FROM record_events WHERE id = ?`, [run.event_id]);
    return row?.actor_member_id ?? null;
  }

  /** Performs one claimed run and records its outcome (in one transaction with its actions). */
  async function perform1(run: DbAutomationRunRow): Promise<void> {
    const runId = run.id;
    if (Number(run.attempts) > MAX_ATTEMPTS) {
      await finishRun(db.sql, runId, owner, 'failed', [], `The run could not be completed after ${MAX_ATTEMPTS} attempts (see the service log).`, clock.now());
      return;
    }
    try {
      await db.tx(async (sql) => {
        const now = clock.now();
        const r = await rule(sql, run);
        if (!r) {
          await finishRun(sql, runId, owner, 'skipped', [], 'The rule was deleted before this run started.', now);
          return;
        }
        const outcomes = await perform(sql, run, r, now);
        // Another worker took the run over (our lease ended): its outcome counts, ours rolls back.
        if (!(await finishRun(sql, runId, owner, 'succeeded', outcomes, null, clock.now()))) throw new Error(`run ${runId} is no longer held by this worker`);
      });
    } catch (err) {
      if (!(err instanceof RunFailed)) {
        // Left `running` under its lease: claimed again once the lease ends.
        logger.warn({ err, run: runId, attempts: Number(run.attempts) }, 'automation run could not be completed; it is retried when its lease ends');
        return;
      }
      await finishRun(db.sql, runId, owner, 'failed', err.outcomes, err.message, clock.now());
      logger.warn({ run: runId, error: err.message }, 'automation run failed');
    }
  }

  // Each run takes a free lane as soon as one is free: a slow run holds only its own lane, under its own
  // lease (renewed while it runs), and never the runs claimed after it.
  return new WorkPool<DbAutomationRunRow>(
    {
      claim: (n) => claimRuns(db.sql, leaseNow(clock, RUN_LEASE_MS, owner), n),
      perform: perform1,
      renew: (run) => renewLease(db.sql, RUNS, run.id, leaseNow(clock, RUN_LEASE_MS, owner)),
      onError: (err, run) => logger.warn({ err, run: run.id }, 'automation run bookkeeping failed; the run is taken again when its lease ends'),
    },
    { concurrency: lanes, renewEveryMs: RUN_LEASE_MS / 3, intervalMs: 1000 },
  );
}
