/**
 * Services modules provide to each other (Backstage's service references): a module that needs another
 * module's work asks for it by a typed reference (`deps.services.get(ref)`) instead of importing that
 * module's files; the module that does the work provides it (`ServiceModule.provides`). References and
 * the services' types live in `handlers/interfaces/`, which holds no code of any module; the kernel
 * names none of them.
 */

/** A service's reference: its id, and (for the type checker only) the type of what it provides. */
export interface ServiceRef<T> {
  readonly id: string;
  /** Never set: carries `T` for `get`. */
  readonly type?: (value: T) => T;
}

/** A reference to a service of type `T`, e.g. `serviceRef<DocumentFiles>('documents.files')`. */
export const serviceRef = <T>(id: string): ServiceRef<T> => ({ id });

/** One service a module provides: its reference and the implementation (`provide(ref, impl)` types the pair). */
export interface ProvidedService {
  readonly ref: ServiceRef<unknown>;
  readonly impl: unknown;
}

export const provide = <T>(ref: ServiceRef<T>, impl: T): ProvidedService => ({ ref: ref as ServiceRef<unknown>, impl });

/** What a module asks services of. */
export interface Services {
  /** The service `ref` names; throws when no listed module provides it (a missing module in app.ts). */
  get<T>(ref: ServiceRef<T>): T;
}

/** The services of one process: filled from the modules' `provides` before any module's factories run. */
export class ServiceRegistry implements Services {
  private readonly byId = new Map<string, { impl: unknown; by: string }>();

  add(by: string, services: readonly ProvidedService[]): void {
    for (const { ref, impl } of services) {
      const other = this.byId.get(ref.id);
      if (other) throw new Error(`two modules provide the service ${ref.id}: ${other.by} and ${by}`);
      this.byId.set(ref.id, { impl, by });
    }
  }

  get<T>(ref: ServiceRef<T>): T {
    const found = this.byId.get(ref.id);
    if (!found) throw new Error(`no module provides the service ${ref.id}: list the module that does in app.ts`);
    return found.impl as T;
  }
}
