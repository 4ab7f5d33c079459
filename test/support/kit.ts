import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { modules } from '../../app.ts';
import type { Database } from '../../db/database.ts';
import type { ApplyResult, WorkspaceSpec } from '../../server/admin.ts';
import type { Clock } from '../../server/clock.ts';
import type { TestService } from './service.ts';

/** A fixture workspace file: the platform's parts and the sections modules add (`automations:`). */
export type FixtureSpec = WorkspaceSpec & Record<string, unknown>;

/** The applied fixture workspace (with what modules' sections answered, e.g. `automations`) and the harness's main key. */
export interface Seed {
  db: Database;
  clock: Clock;
  /** What applying the workspace file answered (modules' sections add theirs, e.g. `automations`: rule ids by handle). */
  ws: ApplyResult;
  /** The key the harness calls with: every namespace, read and write on every resource type. */
  key: { id: string; secret: string };
  /** Active members by what they may do: an owner, and a plain member. */
  members: { owner: string; member: string };
}

/**
 * What one namespace brings to the shared harness (the bad-input suite and fuzz run, `npm run
 * contract`), in `test/<namespace>/kit.ts` exporting `kit`: fixture data the API cannot make, and how
 * to wait for its background work. The harness reads the kits of app.ts's modules and never imports
 * a module's code.
 */
export interface TestKit {
  badInput?: {
    /** Adds its part to the fixture workspace file (a section, a key). */
    workspace?(spec: FixtureSpec): void;
    /** Makes records the API cannot make and returns real ids by prefix for the generated cases. */
    seed?(seed: Seed): Promise<Record<string, string>>;
    /** Waits until the background work the fixture's requests caused is done, so that nothing changes under the cases. */
    settle?(svc: TestService): Promise<void>;
  };
  contract?: {
    /** Adds its part to the contract workspace file; returns the handles of keys it added (handed to the hooks as `ctx.keys[handle]`). */
    workspace?(spec: FixtureSpec): string[] | void;
    /** What its scenarios read in every run, a deployment's too (request fixtures): part of `ctx[namespace]`. */
    context?(): object;
    /** Local runs: makes what its scenarios need in the fresh database; the hooks read it as part of `ctx[namespace]`. */
    seed?(seed: Seed): Promise<object | undefined>;
    /** After the run: undoes what `seed` left that a reused database (PostgreSQL) must not collect. */
    cleanup?(db: Database, seeded: object | undefined): Promise<void>;
  };
}

const testRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

let loaded: Promise<Array<{ namespace: string; kit: TestKit }>> | undefined;

/** The kits of the listed modules that have one (`test/<namespace>/kit.ts`), in app.ts's order. */
export function testKits(): Promise<Array<{ namespace: string; kit: TestKit }>> {
  loaded ??= (async () => {
    const kits: Array<{ namespace: string; kit: TestKit }> = [];
    for (const { namespace } of modules) {
      const file = path.join(testRoot, namespace, 'kit.ts');
      if (!fs.existsSync(file)) continue;
      const { kit } = (await import(file)) as { kit?: TestKit };
      if (!kit) throw new Error(`${file} exports no kit`);
      kits.push({ namespace, kit });
    }
    return kits;
  })();
  return loaded;
}
