/**
 * Signing credit: what a workspace may spend on bankid requests. An operator sets it (`npm run admin --
 * signing credit show|set|add`); the settings page `/settings/signing` shows it. A bankid request costs
 * `BANKID_PRICE` credit, charged in the transaction that creates the request and exactly once per
 * request: `signing_charges` has the request id as its primary key, and an idempotent retry of the
 * creating command is answered from its receipt without running the handler again.
 */
import type { Sql } from '../../../db/database.ts';
import { conflict } from '../../../server/errors.ts';

/** Credit one bankid request costs. */
export const BANKID_PRICE = 1;
/** The largest balance an operator may set (fits every database's 32-bit integer). */
export const MAX_BALANCE = 1_000_000_000;

export interface Credit {
  workspaceId: string;
  balance: number;
  /** When an operator or a charge last changed it; null when it was never set. */
  updatedAt: number | null;
}

export interface Charge {
  requestId: string;
  workspaceId: string;
  amount: number;
  chargedAt: number;
}

/** The workspace's credit (0 when never set). */
export async function getCredit(sql: Sql, workspaceId: string): Promise<Credit> {
  const row = await sql.one<{ balance: number; updated_at: number }>(`SELECT balance, updated_at FROM signing_credit WHERE workspace_id = ?`, [workspaceId]);
  return { workspaceId, balance: row ? Number(row.balance) : 0, updatedAt: row ? Number(row.updated_at) : null };
}

/** A balance an operator asked for is refused with this (the CLI prints the message). */
export class CreditError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CreditError';
  }
}

function checkBalance(balance: number): number {
  if (!Number.isSafeInteger(balance) || balance < 0 || balance > MAX_BALANCE) throw new CreditError(`a balance is a whole number from 0 to ${MAX_BALANCE} (got ${balance})`);
  return balance;
}

/** Sets the balance (an operator's decision). */
export async function setCredit(sql: Sql, workspaceId: string, balance: number, now: number): Promise<Credit> {
  checkBalance(balance);
  await sql.run(
    `INSERT INTO signing_credit (workspace_id, balance, updated_at) VALUES (?, ?, ?)
     ON CONFLICT (workspace_id) DO UPDATE SET balance = excluded.balance, updated_at = excluded.updated_at`,
    [workspaceId, balance, now],
  );
  return { workspaceId, balance, updatedAt: now };
}

/**
 * Adds `amount` (negative takes credit away) to the balance; refused when the result would be below 0
 * or above MAX_BALANCE. Call it in a transaction (the read and the write belong together).
 */
export async function addCredit(sql: Sql, workspaceId: string, amount: number, now: number): Promise<Credit> {
  if (!Number.isSafeInteger(amount) || amount === 0 || Math.abs(amount) > MAX_BALANCE) throw new CreditError(`an amount is a whole number other than 0, at most ${MAX_BALANCE} either way (got ${amount})`);
  const { balance } = await getCredit(sql, workspaceId);
  const next = balance + amount;
  if (next < 0) throw new CreditError(`the balance is ${balance}; taking ${-amount} would leave it below 0`);
  if (next > MAX_BALANCE) throw new CreditError(`the balance would be ${next}, above the largest allowed (${MAX_BALANCE})`);
  return setCredit(sql, workspaceId, next, now);
}

/** The charge of a request, if it was charged. */
export async function findCharge(sql: Sql, requestId: string): Promise<Charge | null> {
  const row = await sql.one<{ request_id: string; workspace_id: string; amount: number; charged_at: number }>(
    `SELECT request_id, workspace_id, amount, charged_at FROM signing_charges WHERE request_id = ?`,
    [requestId],
  );
  return row ? { requestId: row.request_id, workspaceId: row.workspace_id, amount: Number(row.amount), chargedAt: Number(row.charged_at) } : null;
}

/** The workspace's most recent charges, newest first. */
export async function listCharges(sql: Sql, workspaceId: string, limit: number): Promise<Charge[]> {
  const rows = await sql.all<{ request_id: string; workspace_id: string; amount: number; charged_at: number }>(
    `SELECT request_id, workspace_id, amount, charged_at FROM signing_charges WHERE workspace_id = ? ORDER BY charged_at DESC, request_id DESC LIMIT ?`,
    [workspaceId, limit],
  );
  return rows.map((r) => ({ requestId: r.request_id, workspaceId: r.workspace_id, amount: Number(r.amount), chargedAt: Number(r.charged_at) }));
}

/** The refusal of a request the credit does not cover (409 conflict: the workspace's state, not the input, is the problem). */
export function insufficientCredit(balance: number, needed: number) {
  return conflict(`insufficient signing credit: balance ${balance}, needed ${needed}. An operator adds credit with: npm run admin -- signing credit add --workspace <id> --amount <n>`);
}

/**
 * Charges `amount` for request `requestId` in the caller's transaction, once: a request already charged
 * is not charged again (`charged: false`). Short credit throws the 409 of `insufficientCredit` and
 * changes nothing. The balance is taken with one conditional UPDATE, so two requests racing for the
 * last credit cannot both have it.
 */
export async function chargeOnce(sql: Sql, input: { workspaceId: string; requestId: string; amount?: number; now: number }): Promise<{ charged: boolean; balance: number }> {
  const amount = input.amount ?? BANKID_PRICE;
  if (await findCharge(sql, input.requestId)) return { charged: false, balance: (await getCredit(sql, input.workspaceId)).balance };
  const taken = await sql.run(`UPDATE signing_credit SET balance = balance - ?, updated_at = ? WHERE workspace_id = ? AND balance >= ?`, [
    amount,
    input.now,
    input.workspaceId,
    amount,
  ]);
  if (taken !== 1) throw insufficientCredit((await getCredit(sql, input.workspaceId)).balance, amount);
  await sql.run(`INSERT INTO signing_charges (request_id, workspace_id, amount, charged_at) VALUES (?, ?, ?, ?)`, [input.requestId, input.workspaceId, amount, input.now]);
  return { charged: true, balance: (await getCredit(sql, input.workspaceId)).balance };
}
