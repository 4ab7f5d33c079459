/**
 * The MCP server one `/v1/mcp` request gets (the SDK's low-level `Server`, one per request, no
 * session): `tools/list` answers the connection's tools (handlers/mcp/tools.ts, generated from the
 * document), `tools/call` runs the tool's operation through the one execution path HTTP uses
 * (server/execute.ts): the same validation, grants, act-as, idempotency, handlers and errors.
 */
import crypto from 'node:crypto';
import { type CallToolResult, type InputRequiredResult, inputRequired, inputResponse, type McpRequestContext, ProtocolError, ProtocolErrorCode, Server, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/server';
import type { Logger } from 'pino';
import { type CatalogueEntry, catalogue } from '../../generated/catalogue.ts';
import type { Credential } from '../../server/credentials.ts';
import { ServiceError } from '../../server/errors.ts';
import type { ExecuteOperation } from '../../server/execute.ts';
import { canonicalJson } from '../../server/ids.ts';
import type { ContractValidator } from '../../server/validation.ts';
import { connectionInfoOf } from './credential.ts';
import { CALL_TOOL, compactListing, DESCRIBE_TOOL, type ListedTool, META_TOOLS, SEARCH_TOOLS, searchTools } from './listing.ts';
import { type McpTool, type McpToolDefinition, toolDefinitionsFor } from './tools.ts';

/** The argument of a command that carries its Idempotency-Key. */
export const IDEMPOTENCY_ARGUMENT = 'idempotency_key';

/** What the transport hands a request's server (AuthInfo `extra`), and what the server notes for the request's log line. */
export interface McpCallContext {
  credential: Credential;
  /** The MCP request's `Service-Act-As` header (workspace connections with delegation). */
  actAs: string | undefined;
  /** The HTTP request's id (error bodies carry it as `request_id`). */
  requestId: string;
  /** Filled by `tools/call`, for the request log. */
  note: { tool?: string; operation?: string };
}

export interface McpServerDeps {
  execute: ExecuteOperation;
  logger: Logger;
  /** Check answers against the document (development and tests), as the HTTP router does. */
  validator?: ContractValidator;
  /** Server version (serverInfo). */
  version: string;
}

/**
 * Every protocol revision `/v1/mcp` serves, newest first: 2026-07-28 (the SDK's per-request entry; the SDK
 * does not export its list of modern revisions) and the 2025-era ones it negotiates through `initialize`.
 * `server/discover` and the `-32022` refusal name them all (handlers/mcp/transport.ts).
 */
export const SERVED_PROTOCOL_VERSIONS: readonly string[] = ['2026-07-28', ...SUPPORTED_PROTOCOL_VERSIONS];
/** The JSON-RPC error code of an unsupported protocol revision (2026-07-28). */
export const UNSUPPORTED_PROTOCOL_VERSION = ProtocolErrorCode.UnsupportedProtocolVersion;

/** What the server tells a model about itself (`instructions` of initialize and server/discover). */
export const INSTRUCTIONS =
  'Workspace Operations: each tool is one operation of the HTTP API (POST /v1/operations/<namespace>.<Operation>), ' +
  'with the same rules and errors. A refused call returns isError with {error, message, request_id}. Commands take an ' +
  'optional idempotency_key: a retry with the same arguments and key does the work once; without one, the same ' +
  'arguments within 24 hours replay the first answer, so pass different keys to do the same thing twice on purpose.';

const byId = new Map<string, CatalogueEntry>(catalogue.map((e) => [e.id, e]));

/**
 * The Idempotency-Key of a command called without `idempotency_key`: `mcp-` + the first 43
 * characters of base64url(SHA-256(tool name + "\n" + canonical JSON of the arguments)). Equal
 * calls get equal keys (a client's retry replays), whatever the JSON-RPC id.
 */
export function derivedIdempotencyKey(toolName: string, args: Record<string, unknown>): string {
  const digest = crypto.createHash('sha256').update(`${toolName}\n${canonicalJson(args)}`).digest('base64url');
  return `mcp-${digest.slice(0, 43)}`;
}

/** A connection's tools: every one it may call, and what `tools/list` lists (handlers/mcp/listing.ts). */
export interface ConnectionTools {
  /** Every tool the connection may call, by name. */
  readonly callable: ReadonlyMap<string, McpToolDefinition>;
  /** The `tools` of its `tools/list` answer. */
  readonly listed: readonly ListedTool[];
  /** Whether the listing is compact: the meta tools answer, and listed tools carry no output schema. */
  readonly compact: boolean;
  readonly toolsets: readonly string[];
}

/** The tools of a connection, computed once per credential object (a reloaded credential gets a fresh list). */
const toolLists = new WeakMap<Credential, ConnectionTools>();
export function connectionTools(credential: Credential): ConnectionTools {
  let tools = toolLists.get(credential);
  if (!tools) {
    const c = connectionInfoOf(credential);
    const defs = toolDefinitionsFor(credential.operations, c ? { toolsets: c.toolsets, readOnly: c.readOnly } : {});
    const toolsets = [...new Set(defs.map((d) => d.namespace))];
    const compact = c?.toolListing === 'compact';
    tools = { callable: new Map(defs.map((d) => [d.tool.name, d])), listed: compact ? compactListing(defs, toolsets) : defs.map((d) => d.tool), compact, toolsets };
    toolLists.set(credential, tools);
  }
  return tools;
}

function errorResult(body: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(body) }], isError: true };
}

/** Runs one tool call as its operation; a documented refusal is a tool result with isError (the error body as text). */
export async function callTool(deps: McpServerDeps, call: McpCallContext, def: McpToolDefinition, args: Record<string, unknown>): Promise<CallToolResult> {
  const entry = byId.get(def.operationId)!;
  const headers: Record<string, unknown> = {};
  const rest: Record<string, unknown> = { ...args };
  if (def.kind === 'command') {
    const given = rest[IDEMPOTENCY_ARGUMENT];
    delete rest[IDEMPOTENCY_ARGUMENT];
    headers['idempotency-key'] = given === undefined ? derivedIdempotencyKey(def.tool.name, rest) : given;
  }
  if (call.actAs !== undefined) headers['service-act-as'] = call.actAs;
  const query: Record<string, unknown> = {};
  for (const name of def.arguments.query) {
    if (name in rest) {
      query[name] = rest[name];
      delete rest[name];
    }
  }
  const input = entry.method === 'post' ? rest : undefined;
  try {
    const outcome = await deps.execute({ credential: call.credential, entry, input, headers, query });
    const body = outcome.status >= 400 && outcome.body && typeof outcome.body === 'object' ? { ...outcome.body, request_id: call.requestId } : outcome.body;
    check(deps, entry, outcome.status, body);
    // A replayed 404 / 409 receipt is still a refusal.
    if (outcome.status >= 400) return errorResult(body);
    return { content: [{ type: 'text', text: JSON.stringify(body) }], structuredContent: (def.wrapsOutput ? { result: body } : body) as Record<string, unknown> };
  } catch (err) {
    if (!(err instanceof ServiceError)) throw err;
    const body = err.bodyFor(call.requestId);
    check(deps, entry, err.status, body);
    return errorResult(body);
  }
}

/** In development and tests, an answer that breaks the document is logged as the HTTP router logs it. */
function check(deps: McpServerDeps, entry: CatalogueEntry, status: number, body: unknown): void {
  if (!deps.validator) return;
  const problem = deps.validator.responseProblem(entry, status, body);
  if (problem) deps.logger.error({ operation: entry.id, status, problem }, 'response breaks the document');
}

/** The refusal of a meta tool's arguments, as the API words a bad input. */
const badInput = (call: McpCallContext, message: string) => errorResult({ error: 'invalid_input', message, request_id: call.requestId });

/** A result carrying a JSON value both as text and as structured content. */
const jsonResult = (value: Record<string, unknown>): CallToolResult => ({ content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value });

/** Whether the client said (on this request, 2026-07-28) that it shows form elicitations to its person. */
function asksPeople(server: Server): boolean {
  const elicitation = server.getClientCapabilities()?.elicitation as Record<string, unknown> | undefined;
  return !!elicitation && (Object.keys(elicitation).length === 0 || !!elicitation.form);
}

/** The key of the confirmation a destructive tool asks for (`inputRequests` / `inputResponses`). */
export const CONFIRM_INPUT = 'confirm';

/** What the person is asked before a destructive tool runs. */
export function confirmationMessage(def: McpToolDefinition, args: Record<string, unknown>): string {
  const { [IDEMPOTENCY_ARGUMENT]: _key, ...shown } = args;
  let text = JSON.stringify(shown);
  if (text.length > 400) text = `${text.slice(0, 399)}…`;
  return `The agent asks to run “${def.tool.title}” (${def.operationId}) with ${text}. This cannot be undone. Allow it?`;
}

/** The per-request server factory for `createMcpHandler`. */
export function mcpServerFactory(deps: McpServerDeps): (ctx: McpRequestContext) => Server {
  return (ctx) => {
    const call = ctx.authInfo?.extra?.mcp as McpCallContext | undefined;
    if (!call) throw new Error('mcp: a request reached the server without its credential');
    const server = new Server({ name: 'workspace-operations', title: 'Workspace Operations', version: deps.version }, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });
    const tools = connectionTools(call.credential);
    const listedNames = new Set(tools.listed.map((t) => t.name));

    /**
     * Runs a tool. A destructive one (deletes, cancels) first asks the person through a form elicitation
     * when the client can show one (an `input_required` result; the client asks and calls again with the
     * answer); declined or cancelled, nothing runs and the result says so.
     */
    const run = async (def: McpToolDefinition, args: Record<string, unknown>, inputResponses: Record<string, unknown> | undefined, advertised: McpToolDefinition['tool']['outputSchema'] | undefined): Promise<CallToolResult | InputRequiredResult> => {
      call.note.operation = def.operationId;
      if (def.tool.annotations.destructiveHint && asksPeople(server)) {
        const answer = inputResponse(inputResponses, CONFIRM_INPUT);
        if (answer.kind !== 'elicit') {
          return inputRequired({
            inputRequests: {
              [CONFIRM_INPUT]: inputRequired.elicit({
                message: confirmationMessage(def, args),
                requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean', title: 'Yes, run it', description: 'Tick to let the agent go ahead.' } }, required: ['confirm'] },
              }),
            },
          });
        }
        if (answer.action !== 'accept' || answer.content?.confirm !== true) {
          return errorResult({ error: 'not_confirmed', message: `The person did not allow “${def.tool.title}”: nothing was done. Ask them before trying again.`, request_id: call.requestId });
        }
      }
      const result = await callTool(deps, call, def, args);
      return server.projectCallToolResult(result, result.isError ? undefined : advertised);
    };

    server.setRequestHandler('tools/list', async () => ({ tools: [...tools.listed] as McpTool[] }));
    server.setRequestHandler('tools/call', async (request, context) => {
      const name = request.params.name;
      const args = (request.params.arguments ?? {}) as Record<string, unknown>;
      const inputResponses = context.mcpReq.inputResponses;
      call.note.tool = name;
      if (tools.compact && META_TOOLS.includes(name)) {
        const target = typeof args.name === 'string' ? args.name : undefined;
        if (name === SEARCH_TOOLS) {
          const { query, toolset } = args;
          if (query !== undefined && (typeof query !== 'string' || query.length > 200)) return badInput(call, 'query must be a string of at most 200 characters');
          if (toolset !== undefined && (typeof toolset !== 'string' || !tools.toolsets.includes(toolset))) return badInput(call, `toolset must be one of this connection's toolsets: ${tools.toolsets.join(', ')}`);
          return jsonResult({ tools: searchTools([...tools.callable.values()], listedNames, query as string | undefined, toolset as string | undefined) });
        }
        if (target === undefined) return badInput(call, 'name must be the name of one of this connection’s tools');
        const def = tools.callable.get(target);
        if (!def) return errorResult({ error: 'not_found', message: `No tool "${target.slice(0, 64)}" in this connection: ${SEARCH_TOOLS} lists them.`, request_id: call.requestId });
        if (name === DESCRIBE_TOOL) return jsonResult({ ...def.tool });
        const inner = args.arguments;
        if (inner !== undefined && (inner === null || typeof inner !== 'object' || Array.isArray(inner))) return badInput(call, 'arguments must be an object: the tool’s arguments');
        call.note.tool = `${CALL_TOOL}:${target}`;
        return run(def, (inner ?? {}) as Record<string, unknown>, inputResponses, undefined);
      }
      const def = tools.callable.get(name);
      if (!def) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${name}. tools/list names the tools this connection may call.`);
      return run(def, args, inputResponses, tools.compact ? undefined : def.tool.outputSchema);
    });
    return server;
  };
}
