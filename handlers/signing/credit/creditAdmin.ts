/**
 * Operator commands of signing credit: `npm run admin -- signing credit show|set|add --workspace ws_...`.
 * Credit is what a workspace may spend on bankid requests (credit.ts); only an operator changes it.
 */
import type { Command } from 'commander';
import type { Sql } from '../../../db/database.ts';
import { AdminError } from '../../../server/admin.ts';
import { existingWorkspace } from '../../../server/adminCli.ts';
import type { AdminDeps } from '../../../server/module.ts';
import { addCredit, BANKID_PRICE, CreditError, getCredit, listCharges, setCredit } from './credit.ts';

const RECENT_CHARGES = 20;

/** A whole number from the command line, or a readable refusal. */
function wholeNumber(raw: string, what: string): number {
  if (!/^-?\d{1,10}$/.test(raw.trim())) throw new AdminError(`${what} must be a whole number (got "${raw}")`);
  return Number(raw.trim());
}

async function summary(sql: Sql, workspaceId: string) {
  const credit = await getCredit(sql, workspaceId);
  const charges = await listCharges(sql, workspaceId, RECENT_CHARGES);
  return {
    workspace_id: workspaceId,
    balance: credit.balance,
    price_per_bankid_request: BANKID_PRICE,
    updated_at: credit.updatedAt,
    recent_charges: charges.map((c) => ({ signing_request_id: c.requestId, amount: c.amount, charged_at: c.chargedAt })),
  };
}

const wrap = async <T>(work: () => Promise<T>): Promise<T> => {
  try {
    return await work();
  } catch (err) {
    if (err instanceof CreditError) throw new AdminError(err.message);
    throw err;
  }
};

/** Adds `credit` under the `signing` command (made here when no other part of the module made it yet). */
export function signingCreditAdmin(program: Command, { withDb, clock }: AdminDeps): void {
  const signing = program.commands.find((c) => c.name() === 'signing') ?? program.command('signing').description('document signing');
  const credit = signing.command('credit').description(`a workspace's signing credit: a bankid request costs ${BANKID_PRICE}, charged once when it is created`);
  credit
    .command('show')
    .requiredOption('--workspace <id>', 'workspace id (ws_...)')
    .description('the balance and the most recent charges (newest first)')
    .action((o: { workspace: string }) =>
      withDb(async (db) => {
        await existingWorkspace(db.sql, o.workspace);
        return summary(db.sql, o.workspace);
      }),
    );
  credit
    .command('set')
    .requiredOption('--workspace <id>', 'workspace id (ws_...)')
    .requiredOption('--balance <n>', 'the new balance (a whole number, 0 or more)')
    .description('set the balance')
    .action((o: { workspace: string; balance: string }) =>
      withDb((db) =>
        wrap(async () => {
          const balance = wholeNumber(o.balance, '--balance');
          const previous = await db.tx(async (sql) => {
            await existingWorkspace(sql, o.workspace);
            const before = (await getCredit(sql, o.workspace)).balance;
            await setCredit(sql, o.workspace, balance, clock.now());
            return before;
          });
          return { previous_balance: previous, ...(await summary(db.sql, o.workspace)) };
        }),
      ),
    );
  credit
    .command('add')
    .requiredOption('--workspace <id>', 'workspace id (ws_...)')
    .requiredOption('--amount <n>', 'credit to add (negative takes it away; the balance never goes below 0)')
    .description('add to the balance')
    .action((o: { workspace: string; amount: string }) =>
      withDb((db) =>
        wrap(async () => {
          const amount = wholeNumber(o.amount, '--amount');
          const previous = await db.tx(async (sql) => {
            await existingWorkspace(sql, o.workspace);
            await db.lock(sql, `signing-credit:${o.workspace}`);
            const before = (await getCredit(sql, o.workspace)).balance;
            await addCredit(sql, o.workspace, amount, clock.now());
            return before;
          });
          return { previous_balance: previous, ...(await summary(db.sql, o.workspace)) };
        }),
      ),
    );
}
