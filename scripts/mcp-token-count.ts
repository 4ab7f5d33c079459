/**
 * `npm run mcp:tokens`: how much of a model's context the `tools/list` answer of a connection takes,
 * for a full grant, a read-only full grant and each one-toolset grant (every operation of the
 * catalogue granted, then narrowed by handlers/mcp/tools.ts `toolsFor`, exactly as a connection is).
 *
 * Measured: `JSON.stringify({ tools })`, the `result` of the `tools/list` answer a client receives
 * (the JSON-RPC envelope adds about 40 characters). Tokens: gpt-tokenizer's `o200k_base` encoding
 * (GPT-4o's and later OpenAI models'; pure JS, no network). Claude's current tokenizer is not public,
 * and clients re-serialise the tools into their own prompt format, so the figures are estimates of
 * the order of magnitude a client pays, not exact counts for every model.
 *
 * Both listings (handlers/mcp/listing.ts): `compact`, what the consent page approves by default, and
 * `full`, every tool as generated.
 *
 * Columns: tools, characters, o200k tokens, and the share of the tokens in the tools' input schemas,
 * output schemas and descriptions (the rest: names, titles, annotations, JSON punctuation).
 * `--json` prints the rows as JSON instead of the table.
 */
import { encode } from 'gpt-tokenizer/encoding/o200k_base';
import { memberOperations } from '../handlers/mcp/connections.ts';
import { type ListedTool, listingFor, type ToolListing } from '../handlers/mcp/listing.ts';
import { allToolDefinitions, toolsetNames } from '../handlers/mcp/tools.ts';

export interface TokenRow {
  grant: string;
  tools: number;
  chars: number;
  tokens: number;
  inputSchemaTokens: number;
  outputSchemaTokens: number;
  descriptionTokens: number;
}

const count = (text: string) => encode(text).length;

export function measure(grant: string, tools: readonly ListedTool[]): TokenRow {
  const json = JSON.stringify({ tools });
  return {
    grant,
    tools: tools.length,
    chars: json.length,
    tokens: count(json),
    inputSchemaTokens: tools.reduce((a, t) => a + count(JSON.stringify(t.inputSchema)), 0),
    outputSchemaTokens: tools.reduce((a, t) => a + (t.outputSchema ? count(JSON.stringify(t.outputSchema)) : 0), 0),
    descriptionTokens: tools.reduce((a, t) => a + count(JSON.stringify(t.description)), 0),
  };
}

/**
 * The rows of the report for one listing: full grant, read-only full grant, a plain member's personal
 * connection to customers and signing (the two-toolset example), then each toolset alone
 * (largest first).
 */
export function tokenRows(listing: ToolListing = 'full'): TokenRow[] {
  const every = allToolDefinitions.map((d) => d.operationId);
  const rows = [
    measure('full grant', listingFor(every, { listing })),
    measure('full grant, read-only', listingFor(every, { readOnly: true, listing })),
    measure('member: customers + signing', listingFor(memberOperations('member'), { toolsets: ['customers', 'signing'], listing })),
  ];
  const sets = toolsetNames.map((name) => measure(`toolset ${name}`, listingFor(every, { toolsets: [name], listing })));
  sets.sort((a, b) => b.tokens - a.tokens || (a.grant < b.grant ? -1 : 1));
  return [...rows, ...sets];
}

function main(): void {
  const listings: ToolListing[] = ['compact', 'full'];
  if (process.argv.includes('--json')) {
    console.log(JSON.stringify(Object.fromEntries(listings.map((l) => [l, tokenRows(l)])), null, 2));
    return;
  }
  for (const listing of listings) table(listing, tokenRows(listing));
}

function table(listing: ToolListing, rows: TokenRow[]): void {
  const n = (v: number) => v.toLocaleString('en-US');
  const pct = (part: number, whole: number) => (whole ? `${Math.round((100 * part) / whole)} %` : '-');
  const header = ['grant', 'tools', 'chars', 'o200k tokens', 'input schemas', 'output schemas', 'descriptions'];
  const body = rows.map((r) => [r.grant, n(r.tools), n(r.chars), n(r.tokens), pct(r.inputSchemaTokens, r.tokens), pct(r.outputSchemaTokens, r.tokens), pct(r.descriptionTokens, r.tokens)]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: string[]) => '| ' + cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ') + ' |';
  console.log(`\n${listing} listing: tools/list of a connection, JSON.stringify({ tools }) measured with gpt-tokenizer o200k_base (an estimate for other models)`);
  console.log(line(header));
  console.log('| ' + widths.map((w, i) => (i === 0 ? '-'.repeat(w) : '-'.repeat(w - 1) + ':')).join(' | ') + ' |');
  for (const row of body) console.log(line(row));
}

if (import.meta.url === `file://${process.argv[1]}`) main();
