import type { Database, Sql } from '../db/database.ts';
import { completeReceipt, findReceipt, holdReceipt, lockReceipt, type ReceiptKey, releaseReceipt, stealStaleLock, storeReceipt } from '../db/queries/idempotency.ts';
import type { Clock } from './clock.ts';
import { conflict, invalidInput, ServiceError } from './errors.ts';
import { canonicalJson, sha256Hex } from './ids.ts';

/**
 * What a receipt remembers of its request: SHA-256 of the operation id and the body as canonical JSON
 * (keys sorted). A retry must match it.
 */
export function requestFingerprint(operationId: string, body: unknown): string {
  return sha256Hex(`${operationId}\n${canonicalJson(body)}`);
}

/** Statuses decided by the operation itself; they are stored and replayed. Anything else is not. */
const STORED_ERROR_STATUSES = new Set([404, 409]);

export interface IdempotentRequest {
  keyId: string;
  memberId: string | null;
  operationId: string;
  idempotencyKey: string;
  body: unknown;
}

export interface IdempotentResult {
  status: number;
  body: unknown;
  replayed: boolean;
  /**
   * With `answerAfterEffects`, for a command that committed: stores its final answer (the small
   * second write after its effects ran); until then the receipt holds the answer stored at commit.
   */
  settle?: (body: unknown) => Promise<void>;
}

export interface RunOptions {
  /**
   * The command answers after its declared effects ran (server/execute.ts): the transaction stores
   * its response but keeps the key locked, and `settle` completes the receipt with the final answer.
   * A retry meanwhile gets 409 (in progress); if the process died in between, a retry after the lock
   * timeout replays the response stored at commit (the state as it was then; the effects still run,
   * as jobs). A replay never runs the command or its effects again.
   */
  readonly answerAfterEffects?: boolean;
}

/**
 * Stripe-style idempotent commands: a committed lock row per (credential, member, key), the change and
 * the stored response in one transaction, replay of completed responses, 409 while in flight (for a
 * command answering after its effects, until its final answer is stored; see RunOptions).
 */
export class Idempotency {
  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly lockTimeoutMs: number,
  ) {}

  async run(req: IdempotentRequest, execute: (sql: Sql) => Promise<unknown>, options: RunOptions = {}): Promise<IdempotentResult> {
    const k: ReceiptKey = { scope: `${req.keyId}:${req.memberId ?? '-'}`, key: req.idempotencyKey };
    const fingerprint = requestFingerprint(req.operationId, req.body);
    const later = options.answerAfterEffects === true;
    if (this.db.dialect === 'sqlite') return this.runSerial(k, req.operationId, fingerprint, execute, later);
    const stored = await this.acquire(this.db.relaxed, this.db.sql, k, req.operationId, fingerprint);
    if (stored) return stored;
    try {
      return await this.db.tx(async (sql) => {
        const body = await execute(sql);
        return this.store(sql, k, body, later);
      });
    } catch (err) {
      if (err instanceof ServiceError && STORED_ERROR_STATUSES.has(err.status)) {
        await completeReceipt(this.db.sql, k, err.status, JSON.stringify(err.body()), this.clock.now());
      } else {
        await releaseReceipt(this.db.relaxed, k).catch(() => undefined);
      }
      throw err;
    }
  }

  /**
   * SQLite runs one write transaction at a time (BEGIN IMMEDIATE), so no other request can see a lock
   * row before its change commits: the lock, the change and the stored response go in one
   * transaction, one commit instead of two. A stored error (404, 409) is written after the rollback.
   */
  private async runSerial(k: ReceiptKey, operationId: string, fingerprint: string, execute: (sql: Sql) => Promise<unknown>, later: boolean): Promise<IdempotentResult> {
    let failure: unknown = null;
    try {
      return await this.db.tx(async (sql) => {
        const stored = await this.acquire(sql, sql, k, operationId, fingerprint);
        if (stored) return stored;
        let body: unknown;
        try {
          body = await execute(sql);
        } catch (err) {
          failure = err;
          throw err;
        }
        return this.store(sql, k, body, later);
      });
    } catch (err) {
      if (err === failure && err instanceof ServiceError && STORED_ERROR_STATUSES.has(err.status)) {
        await storeReceipt(this.db.sql, k, operationId, fingerprint, err.status, JSON.stringify(err.body()), this.clock.now());
      }
      throw err;
    }
  }

  /** Stores the response in the command's transaction: completed, or held until `settle` (answerAfterEffects). */
  private async store(sql: Sql, k: ReceiptKey, body: unknown, later: boolean): Promise<IdempotentResult> {
    if (!later) {
      await completeReceipt(sql, k, 200, JSON.stringify(body), this.clock.now());
      return { status: 200, body, replayed: false };
    }
    await holdReceipt(sql, k, 200, JSON.stringify(body));
    return { status: 200, body, replayed: false, settle: (final) => completeReceipt(this.db.sql, k, 200, JSON.stringify(final), this.clock.now()) };
  }

  /** Takes the key for this request, or returns the stored response to replay; throws 400 / 409. */
  private async acquire(lock: Sql, read: Sql, k: ReceiptKey, operationId: string, fingerprint: string): Promise<IdempotentResult | null> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const now = this.clock.now();
      if (await lockReceipt(lock, k, operationId, fingerprint, now)) return null;
      const receipt = await findReceipt(read, k);
      if (!receipt) continue; // released between our insert and read; try again
      if (receipt.operation_id !== operationId || receipt.fingerprint !== fingerprint) {
        throw invalidInput(
          `This Idempotency-Key was already used for a different request (${receipt.operation_id === operationId ? 'another body' : receipt.operation_id}). Use a new key for a new action.`,
        );
      }
      if (receipt.completed_at !== null) {
        return { status: Number(receipt.status_code), body: JSON.parse(receipt.response_body ?? 'null'), replayed: true };
      }
      const lockedAt = Number(receipt.locked_at);
      if (receipt.response_body !== null) {
        // Committed, its answer held while its effects run; a stale hold (the process died) replays the answer stored at commit.
        if (now - lockedAt < this.lockTimeoutMs) throw conflict('A request with this Idempotency-Key is still in progress; retry it in a moment.');
        return { status: Number(receipt.status_code), body: JSON.parse(receipt.response_body), replayed: true };
      }
      if (now - lockedAt < this.lockTimeoutMs || !(await stealStaleLock(lock, k, lockedAt, now))) {
        throw conflict('A request with this Idempotency-Key is still in progress; retry it in a moment.');
      }
      return null;
    }
    throw conflict('A request with this Idempotency-Key is still in progress; retry it in a moment.');
  }
}
