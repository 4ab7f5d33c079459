/**
 * The MCP tools a connection sees: the generated tools (generated/mcpTools.ts, one per catalogued
 * operation) picked by the connection's grants, its toolsets and its read-only choice. Pure: the same
 * grants and options always give the same, byte-identical list, and a tool is only ever added by a
 * grant, so an operation added to the catalogue later never widens a connection approved before it.
 */
import { mcpTools, mcpToolsets, type McpTool, type McpToolDefinition } from '../../generated/mcpTools.ts';

export type { McpTool, McpToolDefinition, McpToolset } from '../../generated/mcpTools.ts';

export interface ToolsOptions {
  /** Only these namespaces' tools (GitHub's toolsets); absent: every granted namespace. */
  toolsets?: readonly string[];
  /** Only queries (tools with `readOnlyHint: true`). */
  readOnly?: boolean;
}

const byName = new Map(mcpTools.map((t) => [t.tool.name, t]));
const byOperation = new Map(mcpTools.map((t) => [t.operationId, t]));

/** Names of every toolset (the catalogue's namespaces), sorted. */
export const toolsetNames: readonly string[] = mcpToolsets.map((t) => t.name);

/**
 * The tool definitions of `grantedOperationIds` (exact operation ids, as stored on a credential: a
 * `namespace.*` grant is expanded when it is given), narrowed to `toolsets` and to queries when
 * `readOnly`; sorted by tool name. Ids with no tool (unlisted or unknown operations) give none.
 * Throws on an unknown toolset name (callers validate a client's choice first).
 */
export function toolDefinitionsFor(grantedOperationIds: Iterable<string>, options: ToolsOptions = {}): McpToolDefinition[] {
  const toolsets = options.toolsets === undefined ? null : new Set(options.toolsets);
  for (const name of toolsets ?? []) if (!toolsetNames.includes(name)) throw new Error(`unknown toolset "${name}" (known: ${toolsetNames.join(', ')})`);
  const out: McpToolDefinition[] = [];
  for (const id of new Set(grantedOperationIds)) {
    const def = byOperation.get(id);
    if (!def) continue;
    if (toolsets && !toolsets.has(def.namespace)) continue;
    if (options.readOnly && def.kind !== 'query') continue;
    out.push(def);
  }
  return out.sort((a, b) => (a.tool.name < b.tool.name ? -1 : a.tool.name > b.tool.name ? 1 : 0));
}

/** The `tools` of a `tools/list` answer for these grants and options (see toolDefinitionsFor). */
export function toolsFor(grantedOperationIds: Iterable<string>, options: ToolsOptions = {}): McpTool[] {
  return toolDefinitionsFor(grantedOperationIds, options).map((d) => d.tool);
}

/** The definition of a tool by name, for dispatching a `tools/call` (undefined: no such tool). */
export function toolByName(name: string): McpToolDefinition | undefined {
  return byName.get(name);
}

/** Every tool's definition, sorted by name. */
export const allToolDefinitions: readonly McpToolDefinition[] = mcpTools;
