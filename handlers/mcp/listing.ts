/**
 * A connection's tool listing (chosen at consent, `tool_listing`):
 *
 * - `full`: every tool of the connection as generated (handlers/mcp/tools.ts): the operation's whole
 *   description, input and output schemas. What connections approved before listings existed keep.
 * - `compact` (the default at consent): at most {@link COMPACT_MAX_TOOLS} tools in at most
 *   {@link COMPACT_MAX_TOKENS} tokens. Three tools that reach every tool of the connection
 *   (`search_tools`, `describe_tool`, `call_tool`), then the connection's own tools in name order, each
 *   in a lean form (its title, the first sentence of its description, its input schema without prose,
 *   no output schema) while they fit the budget. A tool left out of the list stays callable: by its
 *   name, or through `call_tool` for clients that call only listed tools.
 *
 * Clients cap what they read (Cursor reads the first 40 tools of a server, Windsurf 50, Copilot defers
 * past 30), and every listed token is paid on every model turn; the compact listing keeps a two-toolset
 * member connection and a full owner grant alike under both caps. Pure: the same tools give the same,
 * byte-identical list.
 */
import { type McpTool, type McpToolDefinition, toolDefinitionsFor } from './tools.ts';

export type ToolListing = 'compact' | 'full';
export const TOOL_LISTINGS: readonly ToolListing[] = ['compact', 'full'];
/** A stored listing word as a listing (anything unknown reads as `full`, what a client saw before listings). */
export const listingOf = (value: unknown): ToolListing => (value === 'compact' ? 'compact' : 'full');

/** A compact listing names at most this many tools (the meta tools included). */
export const COMPACT_MAX_TOOLS = 30;
/** A compact listing takes at most this many tokens (o200k_base, `npm run mcp:tokens`; the test checks it). */
export const COMPACT_MAX_TOKENS = 10_000;
/**
 * The budget the listing is cut to, in characters of `JSON.stringify({tools})`: lean JSON schemas run at
 * about 3.3 characters per o200k token, so 28,000 characters stay under 10,000 tokens with room for
 * denser schemas (test/mcp/listing.test.ts counts the tokens of every grant's listing with the real
 * tokenizer; the service itself carries no tokenizer).
 */
export const COMPACT_MAX_CHARS = 28_000;

export const SEARCH_TOOLS = 'search_tools';
export const DESCRIBE_TOOL = 'describe_tool';
export const CALL_TOOL = 'call_tool';
export const META_TOOLS: readonly string[] = [SEARCH_TOOLS, DESCRIBE_TOOL, CALL_TOOL];

/** A listed tool: the generated tool, or its lean form (no output schema). */
export type ListedTool = Omit<McpTool, 'outputSchema' | 'annotations'> & { outputSchema?: McpTool['outputSchema']; annotations: Partial<McpTool['annotations']> };

/** The words a schema keeps in its lean form: everything but prose (property names are never touched). */
const PROSE = new Set(['description', 'title', 'examples', 'example', 'x-service-sensitive']);

/** A JSON schema without its prose (descriptions, titles, examples), its structure and constraints intact. */
export function leanSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(leanSchema);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema as Record<string, unknown>)) {
    if (PROSE.has(key)) continue;
    if ((key === 'properties' || key === 'patternProperties' || key === '$defs' || key === 'definitions') && value && typeof value === 'object') {
      out[key] = Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([name, sub]) => [name, leanSchema(sub)]));
    } else if (key === 'enum' || key === 'const' || key === 'default' || key === 'required') out[key] = value;
    else out[key] = leanSchema(value);
  }
  return out;
}

/** The first sentence of a description (at most 200 characters, cut at a word). */
export function firstSentence(text: string): string {
  const paragraph = text.split(/\n\s*\n/)[0]!.replace(/\s+/g, ' ').trim();
  const match = /^(.+?[.!?])(?=\s+[A-Z(`*"“]|$)/.exec(paragraph);
  let sentence = match ? match[1]! : paragraph;
  if (sentence.length > 200) sentence = `${sentence.slice(0, 199).replace(/\s+\S*$/, '')}…`;
  return sentence;
}

/** A tool's lean form: title, first sentence, input schema without prose, hints without the repeated title. */
export function leanTool(tool: McpTool): ListedTool {
  const { title: _repeated, ...hints } = tool.annotations;
  return {
    name: tool.name,
    title: tool.title,
    description: `${firstSentence(tool.description)} (${DESCRIBE_TOOL} gives the full description and result shape.)`,
    inputSchema: leanSchema(tool.inputSchema) as McpTool['inputSchema'],
    annotations: hints,
  };
}

/** The three tools that reach every tool of a connection, with hints that fit what the connection may do. */
export function metaTools(defs: readonly McpToolDefinition[], toolsets: readonly string[]): ListedTool[] {
  const readOnly = defs.every((d) => d.kind === 'query');
  const any = (hint: 'destructiveHint' | 'openWorldHint') => defs.some((d) => d.tool.annotations[hint]);
  return [
    {
      name: SEARCH_TOOLS,
      title: "Find this connection's tools",
      description:
        "Lists this connection's tools whose name, title or description has every word of `query` (all of them without one), optionally in one toolset: " +
        'name, title, kind (query or command), whether tools/list lists it, and its first sentence. ' +
        `Use ${DESCRIBE_TOOL} for a tool's arguments and ${CALL_TOOL} to run one that tools/list does not list.`,
      inputSchema: {
        type: 'object',
        properties: {
          query: { type: 'string', maxLength: 200, description: 'Words to look for (case-insensitive), e.g. "deal stage".' },
          toolset: { type: 'string', enum: [...toolsets], description: 'Only tools of this toolset (a part of the API).' },
        },
        additionalProperties: false,
      },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    {
      name: DESCRIBE_TOOL,
      title: 'Describe one tool',
      description: "One of this connection's tools in full, as a full tools/list would give it: its whole description, input schema (the arguments) and output schema (the result).",
      inputSchema: {
        type: 'object',
        properties: { name: { type: 'string', maxLength: 64, description: `The tool's name, from tools/list or ${SEARCH_TOOLS}.` } },
        required: ['name'],
        additionalProperties: false,
      },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    {
      name: CALL_TOOL,
      title: "Call any of this connection's tools",
      description:
        `Calls one of this connection's tools by name with its arguments (see ${DESCRIBE_TOOL}), exactly as calling the tool itself: ` +
        'the same rules, refusals and idempotency. For tools that tools/list does not list.',
      inputSchema: {
        type: 'object',
        properties: {
          name: { type: 'string', maxLength: 64, description: 'The tool to call.' },
          arguments: { type: 'object', description: "The tool's arguments, as its input schema says." },
        },
        required: ['name'],
        additionalProperties: false,
      },
      annotations: { readOnlyHint: readOnly, destructiveHint: any('destructiveHint'), idempotentHint: false, openWorldHint: any('openWorldHint') },
    },
  ];
}

const size = (tools: readonly ListedTool[]) => JSON.stringify({ tools }).length;

/**
 * The compact listing of a connection's tools (`defs` sorted by name, as toolDefinitionsFor gives them):
 * the meta tools, then each lean tool in name order that still fits both budgets.
 */
export function compactListing(defs: readonly McpToolDefinition[], toolsets: readonly string[]): ListedTool[] {
  const out = metaTools(defs, toolsets);
  let chars = size(out);
  for (const def of defs) {
    if (out.length >= COMPACT_MAX_TOOLS) break;
    const lean = leanTool(def.tool);
    const more = JSON.stringify(lean).length + 1;
    if (chars + more > COMPACT_MAX_CHARS) continue;
    out.push(lean);
    chars += more;
  }
  return out;
}

/** What `search_tools` answers for one tool. */
export interface FoundTool {
  name: string;
  title: string;
  kind: 'query' | 'command';
  toolset: string;
  listed: boolean;
  summary: string;
}

/** `search_tools`: the connection's tools with every word of `query` in their name, title or description. */
export function searchTools(defs: readonly McpToolDefinition[], listed: ReadonlySet<string>, query: string | undefined, toolset: string | undefined): FoundTool[] {
  const words = (query ?? '').toLowerCase().split(/[\s_]+/).filter(Boolean);
  const out: FoundTool[] = [];
  for (const d of defs) {
    if (toolset && d.namespace !== toolset) continue;
    const text = `${d.tool.name.replace(/_/g, ' ')} ${d.tool.name} ${d.tool.title} ${d.tool.description}`.toLowerCase();
    if (!words.every((w) => text.includes(w))) continue;
    out.push({ name: d.tool.name, title: d.tool.title, kind: d.kind, toolset: d.namespace, listed: listed.has(d.tool.name), summary: firstSentence(d.tool.description) });
  }
  return out;
}

/** The `tools` of a `tools/list` answer for these grants (as toolDefinitionsFor narrows them) and listing. */
export function listingFor(grantedOperationIds: Iterable<string>, options: { toolsets?: readonly string[]; readOnly?: boolean; listing: ToolListing }): ListedTool[] {
  const defs = toolDefinitionsFor(grantedOperationIds, options);
  return options.listing === 'compact' ? compactListing(defs, [...new Set(defs.map((d) => d.namespace))]) : defs.map((d) => d.tool);
}
