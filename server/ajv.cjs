'use strict';
/**
 * The one Ajv set-up of the service, its tests and the Dredd hooks, and the one step from an OpenAPI
 * 3.0 Schema Object to JSON Schema. CommonJS, so that the hooks (run by Dredd as CommonJS) require
 * the same file the TypeScript imports (types in ajv.d.cts).
 */
const { Ajv } = require('ajv');
const { DISPLAY_TEXT_FORMAT, DISPLAY_TEXT_PATTERN, isDisplayText } = require('./text.cjs');

// OpenAPI 3.0 Schema Object keywords that JSON Schema does not have (Ajv knows `nullable` itself).
const OPENAPI_ANNOTATIONS = ['example', 'xml', 'externalDocs', 'discriminator'];
// `components`: the document's components registered as one schema (`addSchema({ $id, components })`)
// for `$ref`s into them.
const CONTAINERS = ['components'];
const EXTENSION = /^strict mode: unknown keyword: "x-[^"]*"$/;

/**
 * A new Ajv instance. The same for every caller, whether it compiles the document's schemas or its own:
 *  - `coerceTypes: false`: JSON types are exact (`"5"` is not `5`); a coerced value would be stored
 *    with a type the document does not say.
 *  - strict: a misspelt keyword (`maxLenght`), a `required` field without a property, a keyword
 *    that needs a `type` it lacks, or a `format` Ajv does not know fails the compile (at start-up,
 *    so in every test run) instead of being ignored. OpenAPI's own keywords (`example`, `xml`,
 *    `externalDocs`, `discriminator`) and `x-*` extensions are annotations.
 *  - `allowUnionTypes: true`: `type: ['string', 'null']`, how `toJsonSchema` writes `nullable`.
 *  - `discriminator: false`: `oneOf` decides; the document's discriminators only document it.
 *  - formats: one, `display-text` (a string a person reads as a name, title, message or file name:
 *    no bidi embedding, override or isolate control; the rule is server/text.cjs). Any other format
 *    fails the compile (strict) until it is added here.
 *  - `unicode` (Ajv's default): `minLength` and `maxLength` count code points, as the document's
 *    Strings rule says.
 * Per caller:
 *  - `allErrors` (default false): stop at the first problem (the API answers one message and it costs
 *    less), or list every problem (an operator's workspace file, the Dredd report).
 *  - `useDefaults` (default false): fill in schema `default`s (request bodies, so a handler sees the
 *    documented default).
 *  - `verbose` (default false): errors carry their schema (a refusal quotes the field's description).
 * @param {{ allErrors?: boolean, useDefaults?: boolean, verbose?: boolean }} [options]
 */
function createAjv(options = {}) {
  const ajv = new Ajv({
    allErrors: options.allErrors === true,
    useDefaults: options.useDefaults === true,
    verbose: options.verbose === true,
    coerceTypes: false,
    strict: 'log', // with the logger below: every strict-mode problem throws, except an unknown x-* keyword
    logger: {
      log: console.log,
      warn(message) {
        if (!EXTENSION.test(String(message))) throw new Error(String(message));
      },
      error: console.error,
    },
    allowUnionTypes: true,
    discriminator: false,
  });
  ajv.addVocabulary([...OPENAPI_ANNOTATIONS, ...CONTAINERS]);
  ajv.addFormat(DISPLAY_TEXT_FORMAT, { type: 'string', validate: isDisplayText });
  return ajv;
}

const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value);
const ANNOTATIONS = new Set(['nullable', 'description', 'deprecated', 'readOnly', 'writeOnly', ...OPENAPI_ANNOTATIONS]);
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', 'definitions']);
const SCHEMA_LISTS = new Set(['allOf', 'anyOf', 'oneOf']);
const SCHEMA_VALUES = new Set(['items', 'additionalProperties', 'not', 'additionalItems', 'propertyNames']);

/**
 * A Schema Object of the dereferenced document (generated/dereferenced.ts) as self-contained JSON
 * Schema: `nullable: true` becomes `type: [t, 'null']` (and `null` joins an `enum`), or
 * `anyOf: [schema, {type: 'null'}]` without a `type`; descriptions and other annotations are
 * dropped. With `annotate`, the component's name stays as `x-ref` and the `example` as `x-example`
 * (the generated bad-input and fuzz cases use them). With `portable`, `format: display-text` is
 * written as the equivalent `pattern`, for validators that do not know the format (Dredd's). A
 * recursive schema (a `$ref` left in the dereferenced document) is refused.
 * @param {unknown} node
 * @param {{ annotate?: boolean, portable?: boolean }} [options]
 * @returns {Record<string, any>}
 */
function toJsonSchema(node, options = {}) {
  if (!isObject(node)) return {};
  if (typeof node.$ref === 'string') throw new Error(`recursive schema ${node.$ref} is not supported`);
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    if (ANNOTATIONS.has(key) || key.startsWith('x-')) continue;
    if (SCHEMA_MAPS.has(key) && isObject(value)) out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toJsonSchema(v, options)]));
    else if (SCHEMA_LISTS.has(key) && Array.isArray(value)) out[key] = value.map((v) => toJsonSchema(v, options));
    else if (SCHEMA_VALUES.has(key) && isObject(value)) out[key] = toJsonSchema(value, options);
    else if (options.portable && key === 'format' && value === DISPLAY_TEXT_FORMAT) out.pattern = DISPLAY_TEXT_PATTERN;
    else out[key] = structuredClone(value);
  }
  if (options.annotate && 'example' in node) out['x-example'] = structuredClone(node.example);
  let schema = out;
  if (node.nullable === true) {
    if (typeof out.type === 'string') {
      out.type = [out.type, 'null'];
      if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
    } else {
      schema = { anyOf: [out, { type: 'null' }] };
    }
  }
  if (options.annotate && typeof node['x-component'] === 'string') schema['x-ref'] = node['x-component'];
  return schema;
}

module.exports = { createAjv, toJsonSchema };
