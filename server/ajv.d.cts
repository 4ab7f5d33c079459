import type { Ajv } from 'ajv';

/** Per-caller choices of the one Ajv set-up (server/ajv.cjs says which and why). */
export interface AjvOptions {
  /** List every problem instead of stopping at the first. */
  allErrors?: boolean;
  /** Fill in schema `default`s in the validated data. */
  useDefaults?: boolean;
  /** Errors carry their schema and parent schema. */
  verbose?: boolean;
}

/** A new Ajv instance with the service's options (no coercion, strict but for `x-*` annotations, union types, the one format `display-text`). */
export declare function createAjv(options?: AjvOptions): Ajv;

/** A Schema Object of the dereferenced document as self-contained JSON Schema (`nullable` translated); `annotate` keeps `x-ref` and `x-example`; `portable` writes `format: display-text` as its `pattern`. */
export declare function toJsonSchema(node: unknown, options?: { annotate?: boolean; portable?: boolean }): Record<string, any>;
