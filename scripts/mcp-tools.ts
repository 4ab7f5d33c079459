/**
 * The MCP tools of the catalogue, built by `npm run generate` (scripts/generate.ts) into
 * generated/mcpTools.ts: one tool per catalogued operation, read from the dereferenced document,
 * nothing listed by hand. The rules (names, arguments, output, annotations) are in
 * openapi/EXTENSIONS.md, *MCP tools*; this file is where they are applied, and where a document that
 * cannot be turned into tools every MCP client accepts is refused.
 */

import { DISPLAY_TEXT_FORMAT, DISPLAY_TEXT_PATTERN } from '../server/text.cjs';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The `tools/list` entry of one tool (MCP revision 2025-11-25, the same in 2026-07-28). */
export interface McpTool {
  name: string;
  title: string;
  description: string;
  inputSchema: JsonObject;
  outputSchema: JsonObject;
  annotations: {
    title: string;
    readOnlyHint: boolean;
    destructiveHint: boolean;
    idempotentHint: boolean;
    openWorldHint: boolean;
  };
}

/** A tool and what the server needs to dispatch a call of it to its operation. */
export interface McpToolDefinition {
  operationId: string;
  namespace: string;
  kind: 'query' | 'command';
  /** Where each argument goes: the request body, a path or query parameter (no catalogued operation has these today). */
  arguments: { body: string[]; path: string[]; query: string[] };
  /** True when the success response is not a JSON object: it is sent as `structuredContent: { result: <response> }`. */
  wrapsOutput: boolean;
  tool: McpTool;
}

export interface McpToolset {
  /** The operation namespace. */
  name: string;
  /** The namespace tag's description. */
  description: string;
  /** Tool names, sorted. */
  tools: string[];
}

/** What a catalogue entry contributes (the fields of scripts/generate.ts's CatalogueEntry used here). */
export interface ToolSource {
  id: string;
  namespace: string;
  name: string;
  method: 'get' | 'post';
  path: string;
  kind: 'query' | 'command';
  listed: boolean;
}

export const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
/** The argument that carries the Idempotency-Key header of a command. */
export const IDEMPOTENCY_ARGUMENT = 'idempotency_key';
const IDEMPOTENCY_DESCRIPTION =
  'Idempotency key of this call (1 to 200 characters): a retry with the same key and the same arguments answers the first result and does not act again; a revised call needs a new key. Optional: without it the server derives one from the call so a retried call does not act twice.';

/**
 * Command verbs (the first word of the operation name) and what they mean for the annotations.
 * destructive: only deletes and cancels (they remove a record or end a process for good).
 * idempotent: a repeat with the same arguments, once the first took effect, changes nothing more
 * (set-to-a-value, create-or-update by a match key, delete, cancel, complete). Creating, proposing,
 * requesting, reminding, replaying and recovering act again each time. A command whose verb is not
 * here fails `npm run generate` until someone decides and adds it.
 */
export const COMMAND_VERBS: Readonly<Record<string, { destructive: boolean; idempotent: boolean }>> = {
  Add: { destructive: false, idempotent: false },
  Approve: { destructive: false, idempotent: true },
  Archive: { destructive: false, idempotent: true },
  Cancel: { destructive: true, idempotent: true },
  Complete: { destructive: false, idempotent: true },
  Create: { destructive: false, idempotent: false },
  Delete: { destructive: true, idempotent: true },
  Disable: { destructive: false, idempotent: true },
  Enable: { destructive: false, idempotent: true },
  Pause: { destructive: false, idempotent: true },
  Prepare: { destructive: false, idempotent: false },
  Recover: { destructive: false, idempotent: false },
  Reject: { destructive: false, idempotent: true },
  Remind: { destructive: false, idempotent: false },
  Replace: { destructive: true, idempotent: true },
  Replay: { destructive: false, idempotent: false },
  Request: { destructive: false, idempotent: false },
  Restore: { destructive: false, idempotent: true },
  Resume: { destructive: false, idempotent: true },
  Revoke: { destructive: false, idempotent: true },
  Send: { destructive: false, idempotent: false },
  Set: { destructive: false, idempotent: true },
  Start: { destructive: false, idempotent: false },
  Update: { destructive: false, idempotent: true },
  Upsert: { destructive: false, idempotent: true },
};

/** Keys of `x-service-mcp` and their types. */
const MCP_EXTENSION_FIELDS: Record<string, 'boolean'> = { open_world: 'boolean' };

// OpenAPI 3.0 keywords that are not JSON Schema, and annotations a tool does not need.
const DROPPED = new Set(['nullable', 'example', 'xml', 'externalDocs', 'discriminator']);
const SCHEMA_MAPS = new Set(['properties', 'patternProperties']);
const SCHEMA_LISTS = new Set(['allOf', 'anyOf', 'oneOf']);
const SCHEMA_VALUES = new Set(['items', 'additionalProperties', 'not', 'propertyNames']);

/**
 * An OpenAPI 3.0 Schema Object of the dereferenced document as self-contained JSON Schema for a
 * tool: constraints and descriptions kept, `nullable: true` as `type: [t, "null"]` (or `anyOf`
 * with `{type: "null"}`), `example`, `discriminator` and `x-*` dropped. A `$ref` left by a
 * recursive schema cannot be made self-contained: refused.
 */
export function toToolSchema(node: Json | undefined, fail: (what: string) => void, at = ''): JsonObject {
  if (!isObject(node)) return {};
  if (typeof node.$ref === 'string') {
    fail(`${at || 'schema'}: recursive schema ${node.$ref} cannot be a self-contained tool schema`);
    return {};
  }
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    if (DROPPED.has(key) || key.startsWith('x-')) continue;
    if (SCHEMA_MAPS.has(key) && isObject(value)) out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toToolSchema(v, fail, `${at}.${k}`)]));
    else if (SCHEMA_LISTS.has(key) && Array.isArray(value)) out[key] = value.map((v, i) => toToolSchema(v, fail, `${at}[${i}]`));
    else if (SCHEMA_VALUES.has(key) && isObject(value)) out[key] = toToolSchema(value, fail, `${at}.${key}`);
    // The document's own format, said in standard vocabulary: a client's validator may refuse a format it does not know.
    else if (key === 'format' && value === DISPLAY_TEXT_FORMAT) out.pattern = DISPLAY_TEXT_PATTERN;
    else out[key] = structuredClone(value);
  }
  if (node.nullable !== true) return out;
  if (typeof out.type === 'string') {
    out.type = [out.type, 'null'];
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
    return out;
  }
  return { anyOf: [out, { type: 'null' }] };
}

/**
 * Keys an output schema drops below its root: prose and annotations. A model reads a result with the
 * property names, types, enums, `required`, null types and array items; the descriptions are the
 * input's (they teach the model what to send) and the tool's own, and in the output they only cost
 * tokens (they were half of a full grant's `tools/list`). Constraints (`minimum`, `maxLength`, ...) stay.
 */
const OUTPUT_PROSE = new Set(['description', 'title', 'example', 'examples', 'pattern', 'format', 'readOnly', 'writeOnly', 'deprecated', '$comment']);

/**
 * A tool schema made lean for output: every nested schema (properties, items, `allOf`/`anyOf`/
 * `oneOf` branches, ...) without `OUTPUT_PROSE`; the root keeps its own keys. Property names are
 * kept as they are (a property called `title` or `description` stays).
 */
export function leanOutputSchema(schema: JsonObject, root = true): JsonObject {
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(schema)) {
    if (!root && OUTPUT_PROSE.has(key)) continue;
    if (SCHEMA_MAPS.has(key) && isObject(value)) out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, isObject(v) ? leanOutputSchema(v, false) : v]));
    else if (SCHEMA_LISTS.has(key) && Array.isArray(value)) out[key] = value.map((v) => (isObject(v) ? leanOutputSchema(v, false) : v));
    else if (SCHEMA_VALUES.has(key) && isObject(value)) out[key] = leanOutputSchema(value, false);
    else out[key] = value;
  }
  return out;
}

/** Plain text for a description: trailing spaces and the final newline gone. */
const plain = (text: unknown) => String(text ?? '').replace(/[ \t]+\n/g, '\n').trim();

/**
 * Builds the tools of every listed catalogue operation, sorted by name, and the toolsets (one per
 * namespace). Problems go to `fail` (generate then refuses the document).
 */
export function buildMcpTools(doc: JsonObject, entries: readonly ToolSource[], fail: (where: string, what: string) => void): { tools: McpToolDefinition[]; toolsets: McpToolset[] } {
  const paths = isObject(doc.paths) ? doc.paths : {};
  const tools: McpToolDefinition[] = [];
  const byName = new Map<string, string>();
  for (const entry of entries.filter((e) => e.listed)) {
    const where = `${entry.id} (MCP tool)`;
    const problem = (what: string) => fail(where, what);
    const item = paths[entry.path];
    const op = isObject(item) ? item[entry.method] : undefined;
    if (!isObject(op)) {
      problem('operation not found in the document');
      continue;
    }
    const name = `${entry.namespace}_${entry.name}`;
    if (!TOOL_NAME.test(name)) problem(`tool name "${name}" does not match ${TOOL_NAME} (what every MCP client accepts)`);
    const other = byName.get(name);
    if (other) problem(`tool name "${name}" is also the name of ${other}`);
    byName.set(name, entry.id);

    // x-service-mcp: only what the document cannot say otherwise.
    const ext = op['x-service-mcp'];
    if (ext !== undefined) {
      if (!isObject(ext)) problem('x-service-mcp must be an object');
      else {
        for (const [key, value] of Object.entries(ext)) {
          if (!(key in MCP_EXTENSION_FIELDS)) problem(`x-service-mcp.${key} is not a known field (${Object.keys(MCP_EXTENSION_FIELDS).join(', ')})`);
          else if (typeof value !== MCP_EXTENSION_FIELDS[key]) problem(`x-service-mcp.${key} must be a ${MCP_EXTENSION_FIELDS[key]}`);
        }
        if (ext.open_world === true && entry.kind !== 'command') problem('x-service-mcp.open_world: only a command sends mail');
      }
    }
    const openWorld = isObject(ext) && ext.open_world === true;

    // Input: path and query parameters, then the body's properties, in one object.
    const properties: JsonObject = {};
    const required: string[] = [];
    const args = { body: [] as string[], path: [] as string[], query: [] as string[] };
    const add = (arg: string, schema: JsonObject, isRequired: boolean, from: string) => {
      if (arg in properties) {
        problem(`argument "${arg}" comes from ${from} and from another part of the request: rename one (a tool has one flat argument list)`);
        return;
      }
      properties[arg] = schema;
      if (isRequired) required.push(arg);
    };
    for (const param of Array.isArray(op.parameters) ? op.parameters : []) {
      if (!isObject(param)) continue;
      const pname = String(param.name);
      if (param.in === 'header') {
        if (pname !== 'Idempotency-Key' && pname !== 'Service-Act-As') problem(`header parameter ${pname} has no tool argument`);
        continue; // Idempotency-Key: the idempotency_key argument below; Service-Act-As: the connection's
      }
      if (param.in !== 'path' && param.in !== 'query') {
        problem(`${String(param.in)} parameter ${pname} has no tool argument`);
        continue;
      }
      const schema = toToolSchema(param.schema, problem, `parameter ${pname}`);
      if (param.description !== undefined && schema.description === undefined) schema.description = plain(param.description);
      add(pname, schema, param.required === true, `the ${String(param.in)} parameter`);
      args[param.in].push(pname);
    }
    const body = isObject(op.requestBody) && isObject(op.requestBody.content) && isObject(op.requestBody.content['application/json']) ? op.requestBody.content['application/json'].schema : undefined;
    const bodySchema = toToolSchema(body, problem, 'body');
    if (Object.keys(bodySchema).some((k) => !['type', 'properties', 'required', 'additionalProperties', 'description'].includes(k))) {
      problem('the request body schema must be a plain object schema (type, properties, required) to become tool arguments');
    }
    for (const [field, schema] of Object.entries(isObject(bodySchema.properties) ? bodySchema.properties : {})) {
      add(field, isObject(schema) ? schema : {}, Array.isArray(bodySchema.required) && bodySchema.required.includes(field), 'the request body');
      args.body.push(field);
    }
    if (entry.kind === 'command') add(IDEMPOTENCY_ARGUMENT, { type: 'string', minLength: 1, maxLength: 200, description: IDEMPOTENCY_DESCRIPTION }, false, 'the Idempotency-Key header');
    const inputSchema: JsonObject = { type: 'object', properties, ...(required.length ? { required } : {}), additionalProperties: false };

    // Output: the success response's schema, an object at the root (MCP requires it).
    const responses = isObject(op.responses) ? op.responses : {};
    const ok = isObject(responses['200']) ? responses['200'] : undefined;
    const okSchema = ok && isObject(ok.content) && isObject(ok.content['application/json']) ? ok.content['application/json'].schema : undefined;
    if (!isObject(okSchema)) problem('a catalogued operation answers a JSON 200 response');
    let outputSchema = toToolSchema(okSchema, problem, 'response');
    const wrapsOutput = outputSchema.type !== 'object';
    if (wrapsOutput) outputSchema = { type: 'object', properties: { result: outputSchema }, required: ['result'], additionalProperties: false };
    // Lean below the root: no descriptions, titles, examples, patterns or formats (see OUTPUT_PROSE).
    outputSchema = leanOutputSchema(outputSchema);

    const title = plain(op.summary);
    const description = plain(op.description);
    if (!title) problem('summary is empty');
    for (const [label, text] of [['summary', title], ['description', description]] as const) {
      if (/x-service-/.test(text)) problem(`the ${label} mentions an x-service-* field: say it in plain words (it is a tool's description)`);
    }

    let destructive = false;
    let idempotent = true;
    if (entry.kind === 'command') {
      const verb = /^[A-Z][a-z]*/.exec(entry.name)?.[0] ?? '';
      const rule = COMMAND_VERBS[verb];
      if (!rule) problem(`command verb "${verb}" is not in COMMAND_VERBS (scripts/mcp-tools.ts): decide whether it is destructive and idempotent, and add it`);
      destructive = rule?.destructive ?? false;
      idempotent = rule?.idempotent ?? false;
    }
    tools.push({
      operationId: entry.id,
      namespace: entry.namespace,
      kind: entry.kind,
      arguments: args,
      wrapsOutput,
      tool: {
        name,
        title,
        description,
        inputSchema,
        outputSchema,
        annotations: { title, readOnlyHint: entry.kind === 'query', destructiveHint: destructive, idempotentHint: idempotent, openWorldHint: openWorld },
      },
    });
  }
  tools.sort((a, b) => (a.tool.name < b.tool.name ? -1 : a.tool.name > b.tool.name ? 1 : 0));

  const tags = new Map((Array.isArray(doc.tags) ? doc.tags : []).flatMap((t) => (isObject(t) && typeof t.name === 'string' ? [[t.name, plain(t.description)] as const] : [])));
  const toolsets = [...new Set(tools.map((t) => t.namespace))].sort().map((ns) => {
    if (!tags.get(ns)) fail(`toolset ${ns}`, `the document has no tag "${ns}" with a description (the toolset's description)`);
    return { name: ns, description: tags.get(ns) ?? '', tools: tools.filter((t) => t.namespace === ns).map((t) => t.tool.name) };
  });
  return { tools, toolsets };
}

/** Source of generated/mcpTools.ts (after the banner). */
export function mcpToolsModule(tools: McpToolDefinition[], toolsets: McpToolset[]): string {
  return `
/**
 * One MCP tool per catalogued operation, built from the document by scripts/mcp-tools.ts (rules:
 * openapi/EXTENSIONS.md, *MCP tools*). Sorted by tool name. Read it through handlers/mcp/tools.ts
 * (\`toolsFor\`), which picks the tools of a connection's grants.
 */

/** The \`tools/list\` entry of one tool. */
export interface McpTool {
  /** \`<namespace>_<OperationName>\`, matching ^[a-zA-Z0-9_-]{1,64}$. */
  readonly name: string;
  /** The operation's summary. */
  readonly title: string;
  /** The operation's description. */
  readonly description: string;
  /** Path and query parameters and the request body's fields in one object; commands add \`idempotency_key\`. */
  readonly inputSchema: { readonly type: 'object'; readonly [keyword: string]: unknown };
  /** The success response (wrapped as \`{result}\` when it is not an object: see \`wrapsOutput\`). */
  readonly outputSchema: { readonly type: 'object'; readonly [keyword: string]: unknown };
  readonly annotations: {
    readonly title: string;
    readonly readOnlyHint: boolean;
    readonly destructiveHint: boolean;
    readonly idempotentHint: boolean;
    readonly openWorldHint: boolean;
  };
}

/** A tool and what the server needs to dispatch a call of it. */
export interface McpToolDefinition {
  readonly operationId: string;
  readonly namespace: string;
  readonly kind: 'query' | 'command';
  /** Which arguments are body fields, path or query parameters (\`idempotency_key\` is the Idempotency-Key header). */
  readonly arguments: { readonly body: readonly string[]; readonly path: readonly string[]; readonly query: readonly string[] };
  /** The response is not an object: \`structuredContent\` is \`{ result: <response> }\`. */
  readonly wrapsOutput: boolean;
  readonly tool: McpTool;
}

/** A namespace's tools, chosen together at consent. */
export interface McpToolset {
  readonly name: string;
  readonly description: string;
  readonly tools: readonly string[];
}

/** The argument of a command that carries its Idempotency-Key. */
export const IDEMPOTENCY_ARGUMENT = ${JSON.stringify(IDEMPOTENCY_ARGUMENT)};

export const mcpTools: readonly McpToolDefinition[] = ${JSON.stringify(tools, null, 2)};

/** One toolset per namespace, sorted. */
export const mcpToolsets: readonly McpToolset[] = ${JSON.stringify(toolsets, null, 2)};
`;
}
