/**
 * The reader's copy of the document, built once when the process starts from the bundled document
 * (`generated/document.ts`) and served at `/docs/reference.json` for the reference page. The machine
 * document (`/v1/openapi.json`) stays as it is; this copy differs only in what a person reads:
 *
 * - every `x-service-*` field is removed, and the facts a reader needs from them (kind, the grant a key
 *   needs, resource access, `Service-Act-As`, `Idempotency-Key`, session access) are written into the
 *   operation's description in words;
 * - the document's own sections (`## ...` of `info.description`) become guides apart from the
 *   reference (tags marked `x-traitTag`, grouped with `x-tagGroups`), with the webhook guide from
 *   `guides/webhooks.md`, the error table built from every error code of the document and the member
 *   roles table built from the document's roles;
 * - each operation gets `x-codeSamples`: a curl call and a call through the typed client
 *   (`@workspace-operations/client`), made from the operation's own request example;
 * - wording about the tooling around the document (the document's build and its conformance tests) is
 *   dropped or put in words.
 *
 * Pure and deterministic (no clock, no state): every process builds the same copy.
 */
import fs from 'node:fs';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Obj = { [key: string]: Json };
type Operation = Obj & { operationId: string };

export interface ReaderDocumentOptions {
  /** The API's base URL for the samples, e.g. `https://ops.acme.example/v1`. */
  baseUrl: string;
  /** The guides served at `/docs/guides/<name>` (guides.ts), listed in a guide of their own. */
  guides?: readonly { name: string; title: string }[];
}

/** A guide: a tag of its own (no operations), shown in the "Guides" group. */
interface Guide {
  name: string;
  /** Sections of `info.description` (`## <title>`) it is made of, in order. */
  sections: string[];
  extra?: (doc: Obj) => string;
  before?: string;
  after?: string;
}

const guideFile = (name: string) => fs.readFileSync(new URL(`./guides/${name}`, import.meta.url), 'utf8');
const webhookGuide = guideFile('webhooks.md');
const startGuide = guideFile('getting-started.md');

const GUIDES: Guide[] = [
  { name: 'Getting started', sections: ['Calling an operation'], after: startGuide },
  { name: 'Authentication', sections: ['Authentication and grants', 'Sign-in sessions (pages served by the service)'] },
  { name: 'Delegation (act-as)', sections: ['Member delegation (`Service-Act-As`)'], extra: rolesTable },
  { name: 'Idempotency', sections: ['Idempotency (`Idempotency-Key`, every command)'] },
  { name: 'Errors', sections: ['Errors'], extra: errorTable },
  { name: 'Rate limits', sections: ['Rate limits'] },
  { name: 'Paging', sections: ['Paging cursors'] },
  { name: 'Webhooks and signatures', sections: [], before: webhookGuide },
  { name: 'Request ids and health', sections: ['Request ids and health'] },
  { name: 'Strings', sections: ['Strings'] },
  { name: 'Records and change events', sections: ['Records and change events'] },
  { name: 'Automation rules', sections: ['Automation rules'] },
];

const INTRO = [
  'The public HTTP JSON interface of the Workspace Operations service. The **guides** explain what every',
  'operation shares (authentication, acting for a member, idempotency, errors, rate limits, paging and',
  'webhooks); the **reference** lists every operation with its rules, request and response, and a sample',
  'call with curl and with the typed client `@workspace-operations/client`. The same document is served',
  'without a key at `/v1/openapi.yaml` and `/v1/openapi.json`.',
].join('\n');

/** The environment variable the samples read the reader's API key from (the reader's, not one this service reads). */
const KEY_VARIABLE = 'WSO_KEY';

/** Phrases about internal tooling, put in words a reader of the API needs (applied to every description). */
const REWRITES: [RegExp, string][] = [
  [/as documented `x-service-\*` fields \(see `openapi\/EXTENSIONS\.md`\), /g, 'in its description, '],
  [/the access named in `x-service-resource-access` on `x-service-resource`/g, 'the access its description names on its resource type'],
  [/\(`x-service-kind: query`, `x-service-act-as` optional or required\)/g, '(a query that accepts or requires `Service-Act-As`)'],
  [/`npm run generate` refuses the document otherwise/g, 'the service refuses such a document'],
  [/\(`x-service-member-roles` at the root of this document: /g, '(see the member roles below: '],
  [/\(`x-service-member-roles`\)/g, '(see the member roles in the delegation guide)'],
  [/`x-service-resource` of record operations/g, 'the resource type of a record operation'],
  // Anything added later still reads as words (the browser test keeps the page free of these names).
  [/`?x-service-resource-access`?/g, 'resource access'],
  [/`?x-service-([a-z-]+)`?(: [a-z]+)?/g, '$1$2'],
  [/[^.\n]*\bDredd\b[^.\n]*\.?/g, ''],
  [/\bgenerator\b/gi, 'build'],
];

/** A phrase may be broken across lines in the YAML: a space in a pattern matches any run of white space. */
const READER_REWRITES = REWRITES.map(([pattern, replacement]) => [new RegExp(pattern.source.replace(/ /g, '\\s+'), pattern.flags), replacement] as const);

export function readerText(text: string): string {
  let out = text;
  for (const [pattern, replacement] of READER_REWRITES) out = out.replace(pattern, replacement);
  return out;
}

/** The `## ` sections of a markdown text, by title (the text before the first heading under ''). */
function sections(markdown: string): Map<string, string> {
  const out = new Map<string, string>();
  let title = '';
  let lines: string[] = [];
  for (const line of markdown.split('\n')) {
    const heading = /^## (.+)$/.exec(line);
    if (heading) {
      out.set(title, lines.join('\n').trim());
      title = heading[1]!.trim();
      lines = [];
    } else lines.push(line);
  }
  out.set(title, lines.join('\n').trim());
  return out;
}

function operations(doc: Obj): { path: string; method: string; op: Operation }[] {
  const out: { path: string; method: string; op: Operation }[] = [];
  for (const [path, item] of Object.entries(doc.paths as Obj)) {
    for (const [method, op] of Object.entries(item as Obj)) {
      if (op && typeof op === 'object' && !Array.isArray(op) && typeof (op as Obj).operationId === 'string') out.push({ path, method, op: op as Operation });
    }
  }
  return out;
}

function resolve(doc: Obj, value: Json | undefined): Json | undefined {
  let v = value;
  for (let i = 0; i < 10 && v && typeof v === 'object' && !Array.isArray(v) && typeof v.$ref === 'string'; i++) {
    const ref = v.$ref as string;
    v = ref
      .replace(/^#\//, '')
      .split('/')
      .reduce<Json | undefined>((at, key) => (at && typeof at === 'object' && !Array.isArray(at) ? at[key.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined), doc);
  }
  return v;
}

/** Every error code of the document (the `error` enum of the Error schema) with the statuses that carry it. */
export function errorCodes(source: unknown): { code: string; statuses: string[]; meaning: string }[] {
  const doc = source as Obj;
  const schema = resolve(doc, ((doc.components as Obj).schemas as Obj).Error) as Obj;
  const codes = ((schema.properties as Obj).error as Obj).enum as string[];
  const statuses = new Map<string, Set<string>>(codes.map((c) => [c, new Set<string>()]));
  const meaning = new Map<string, string>();
  const note = (code: string, status: string) => statuses.get(code)?.add(status);
  /** What a response description says of `code`: "`code`: ..." up to the next code, or the description naming "(`code`)". */
  const explain = (code: string, text: string): string | undefined => {
    const description = text.replace(/\s+/g, ' ').trim();
    const at = description.indexOf(`\`${code}\`: `);
    if (at >= 0) {
      const rest = description.slice(at + code.length + 4);
      const end = rest.search(/\s`[a-z_]+`: /);
      return (end < 0 ? rest : rest.slice(0, end)).trim();
    }
    if (description.includes(`(\`${code}\`)`)) return description.replace(` (\`${code}\`)`, '');
    return undefined;
  };
  // The generic responses every operation shares say best what a code means.
  for (const raw of Object.values(((doc.components as Obj).responses as Obj | undefined) ?? {})) {
    const description = String((resolve(doc, raw) as Obj).description ?? '');
    for (const code of codes) {
      const said = explain(code, description);
      if (said && !meaning.has(code)) meaning.set(code, said);
    }
  }
  // The Errors section names each as "`<status> <code>`".
  const errorsText = (sections(String((doc.info as Obj).description)).get('Errors') ?? '').replace(/\s+/g, ' ');
  for (const m of errorsText.matchAll(/`(\d{3}) ([a-z_]+)`/g)) note(m[2]!, m[1]!);
  // Every documented error response of every operation: its example and the codes its description names.
  const fromOperations = new Map<string, string>();
  for (const { op } of operations(doc)) {
    for (const [status, raw] of Object.entries(op.responses as Obj)) {
      if (!/^[45]\d\d$/.test(status)) continue;
      const response = resolve(doc, raw) as Obj;
      const content = ((response.content as Obj | undefined)?.['application/json'] as Obj | undefined) ?? {};
      const example = content.example as Obj | undefined;
      if (example && typeof example.error === 'string') note(example.error, status);
      for (const code of codes) {
        const said = explain(code, String(response.description ?? ''));
        if (said === undefined) continue;
        note(code, status);
        if (!fromOperations.has(code)) fromOperations.set(code, said);
      }
    }
  }
  // Otherwise the parenthesis that follows the code in the Errors section.
  for (const code of codes) {
    if (meaning.has(code)) continue;
    const m = new RegExp(`\`\\d{3} ${code}\` \\(([^()]*(?:\\([^()]*\\)[^()]*)*)\\)`).exec(errorsText);
    meaning.set(code, m ? m[1]!.trim() : (fromOperations.get(code) ?? ''));
  }
  return codes.map((code) => ({ code, statuses: [...statuses.get(code)!].sort(), meaning: meaning.get(code)! }));
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\s+/g, ' ').trim() || '—';
}

function errorTable(doc: Obj): string {
  const rows = errorCodes(doc).map((e) => `| \`${e.code}\` | ${e.statuses.join(', ') || '—'} | ${cell(e.meaning)} |`);
  return ['## Every error code', '', 'The `error` field of an error body is one of these codes; each operation lists the statuses it may answer.', '', '| Code | HTTP status | When |', '| --- | --- | --- |', ...rows].join('\n');
}

function rolesTable(doc: Obj): string {
  const roles = (doc['x-service-member-roles'] ?? {}) as Obj;
  const rows = Object.entries(roles).map(([role, types]) => {
    const access = Object.entries(types as Obj).map(([type, acc]) => `${type === '*' ? 'every shared record type' : `\`${type}\``}: ${(acc as string[]).join(' and ')}`);
    return `| ${role} | ${access.join('; ')} |`;
  });
  return ['## Member roles', '', 'What each role may do with shared records, acting for that member (everyone reads and writes their own private records):', '', '| Role | Shared records |', '| --- | --- |', ...rows].join('\n');
}

/** The facts of an operation's `x-service-*` fields and security, in words for its description. */
function facts(op: Operation, doc: Obj): string {
  const id = op.operationId;
  const kind = op['x-service-kind'];
  const lines: string[] = [];
  if (kind === 'collection') {
    lines.push('**Public:** called by browsers without an API key, with a site\'s publishable collect key; not in the typed client.');
  } else {
    lines.push(kind === 'command' ? '**Kind:** command (changes state).' : '**Kind:** query (reads; changes nothing).');
    if (op['x-service-listed'] === false) lines.push('**Grant:** none needed: every valid key may call it.');
    else {
      const ns = id.split('.')[0];
      let grant = `**Grant:** the key needs the operation \`${id}\` (or its namespace \`${ns}.*\`)`;
      const resource = op['x-service-resource'];
      const access = op['x-service-resource-access'] as string[] | undefined;
      if (typeof resource === 'string' && access?.length) grant += `, and ${access.map((a) => `\`${a}\``).join(' and ')} on \`${resource}\``;
      lines.push(`${grant}.`);
    }
    const actAs = op['x-service-act-as'];
    lines.push(
      actAs === 'required'
        ? '**Acting for a member:** `Service-Act-As` is required: the call runs as that member, with their permissions.'
        : actAs === 'optional'
          ? '**Acting for a member:** `Service-Act-As` is optional; without it the call has workspace access.'
          : '**Acting for a member:** `Service-Act-As` is not accepted.',
    );
    if (kind === 'command') lines.push('**Idempotency:** `Idempotency-Key` is required; a retry with the same key and body replays the first answer.');
    const security = (op.security ?? doc.security) as Obj[];
    if (security.some((s) => 'SessionCookie' in s)) lines.push('**Sign-in session:** also callable from the service\'s pages with a member\'s session cookie.');
    if (op.deprecated === true) lines.push('**Deprecated.**');
  }
  return lines.map((l) => `- ${l}`).join('\n');
}

function requestExample(op: Operation, doc: Obj): Json | undefined {
  const body = resolve(doc, op.requestBody as Json | undefined) as Obj | undefined;
  const content = (body?.content as Obj | undefined)?.['application/json'] as Obj | undefined;
  if (!content) return undefined;
  if (content.example !== undefined) return content.example;
  const first = Object.values((content.examples as Obj | undefined) ?? {})[0];
  const resolved = resolve(doc, first) as Obj | undefined;
  return resolved?.value ?? {};
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

const MEMBER = 'mb_...';
const IDEMPOTENCY = '6f1c9a62-3b4e-4d7a-9a55-2c1f0f4e8b11';

/** Samples for one operation: curl, and the typed client (plain fetch for the public collection endpoints). */
export function codeSamples(path: string, method: string, op: Operation, doc: Obj, baseUrl: string): { lang: string; label: string; source: string }[] {
  const kind = op['x-service-kind'];
  const actAs = op['x-service-act-as'];
  const example = requestExample(op, doc);
  const url = `${baseUrl}${path}`;
  const json = example === undefined ? undefined : JSON.stringify(example);
  const curl = [`curl -X ${method.toUpperCase()} ${url}`];
  if (kind !== 'collection') curl.push(`-H "Authorization: Bearer $${KEY_VARIABLE}"`);
  if (json !== undefined) curl.push(`-H 'Content-Type: application/json'`);
  if (kind === 'command') curl.push(`-H 'Idempotency-Key: ${IDEMPOTENCY}'`);
  if (actAs === 'required') curl.push(`-H 'Service-Act-As: ${MEMBER}'`);
  if (json !== undefined) curl.push(`-d ${shellQuote(json)}`);
  const samples = [{ lang: 'Shell', label: 'curl', source: curl.join(' \\\n  ') }];

  // The example as a TypeScript object literal (keys unquoted where they may be).
  const pretty = example === undefined ? '' : JSON.stringify(example, null, 2).replace(/^(\s*)"([A-Za-z_$][\w$]*)":/gm, '$1$2:').replace(/\n/g, '\n  ');
  if (kind === 'collection') {
    const call =
      method === 'get'
        ? `const res = await fetch('${url}');`
        : `const res = await fetch('${url}', {\n  method: '${method.toUpperCase()}',\n  headers: { 'Content-Type': 'application/json' },\n  body: JSON.stringify(${pretty}),\n});`;
    samples.push({
      lang: 'TypeScript',
      label: 'TypeScript',
      source: `// Public endpoint for browsers: the typed client leaves it out; call it with fetch.\n${call}\nconsole.log(res.status);`,
    });
    return samples;
  }
  const options: string[] = [];
  if (actAs === 'required') options.push(`actAs: '${MEMBER}'`);
  if (kind === 'command') options.push(`idempotencyKey: '${IDEMPOTENCY}'`);
  let call: string;
  if (op['x-service-listed'] === false) {
    call = path === '/operations' ? 'api.listOperations()' : 'api.listDelegationMembers()';
  } else {
    const [ns, name] = op.operationId.split('.') as [string, string];
    const args = [pretty || '{}', ...(options.length ? [`{ ${options.join(', ')} }`] : [])];
    call = `api.${ns}.${name}(\n  ${args.join(',\n  ')},\n)`;
  }
  samples.push({
    lang: 'TypeScript',
    label: 'Typed client',
    source: [
      `import { createClient } from '@workspace-operations/client';`,
      '',
      `const api = createClient({\n  baseUrl: '${baseUrl}',\n  apiKey: process.env.${KEY_VARIABLE}!,\n});`,
      ...(kind === 'command' ? ['// Reuse the idempotency key (with the same body) to retry; a random one when omitted.'] : []),
      `const { data, error } = await ${call};`,
      `if (error) throw new Error(\`\${error.error}: \${error.message}\`);`,
      'console.log(data);',
    ].join('\n'),
  });
  return samples;
}

/** Removes every `x-service-*` key at any depth and rewrites every description. */
function clean(value: Json): Json {
  if (Array.isArray(value)) return value.map(clean);
  if (value && typeof value === 'object') {
    const out: Obj = {};
    for (const [key, v] of Object.entries(value)) {
      if (key.startsWith('x-service-')) continue;
      out[key] = (key === 'description' || key === 'summary') && typeof v === 'string' ? readerText(v) : clean(v);
    }
    return out;
  }
  return value;
}

export function buildReaderDocument(source: unknown, options: ReaderDocumentOptions): Obj {
  const doc = JSON.parse(JSON.stringify(source)) as Obj;
  const info = doc.info as Obj;
  const parts = sections(String(info.description ?? ''));

  const guideTags: Obj[] = [];
  const used = new Set<string>(['']);
  for (const guide of GUIDES) {
    const text: string[] = [];
    if (guide.before) text.push(guide.before.trim());
    for (const title of guide.sections) {
      const body = parts.get(title);
      if (body === undefined) continue;
      used.add(title);
      text.push(guide.sections.length > 1 ? `## ${title}\n\n${body}` : body);
    }
    if (guide.after) text.push(`## The typed client\n\n${guide.after.trim()}`);
    if (guide.extra) text.push(guide.extra(doc));
    if (text.length) guideTags.push({ name: guide.name, description: text.join('\n\n'), 'x-traitTag': true });
  }
  // A section added to the document later is still shown, as a guide of its own.
  for (const [title, body] of parts) if (!used.has(title)) guideTags.push({ name: title, description: body, 'x-traitTag': true });
  if (options.guides?.length) {
    const list = options.guides.map((g) => `- [${g.title}](/docs/guides/${g.name})`).join('\n');
    guideTags.push({ name: 'Running and operating the service', description: `How to run, operate and extend the service: [all guides](/docs/guides), each on a page of its own.\n\n${list}`, 'x-traitTag': true });
  }

  for (const { path, method, op } of operations(doc)) {
    const described = [facts(op, doc), String(op.description ?? '')].filter(Boolean).join('\n\n');
    op.description = described;
    op['x-codeSamples'] = codeSamples(path, method, op, doc, options.baseUrl) as unknown as Json;
  }

  const referenceTags = ((doc.tags as Obj[] | undefined) ?? []).map((t) => ({ ...t }));
  const reader = clean({
    ...doc,
    info: { ...info, description: INTRO },
    servers: [{ url: options.baseUrl, description: 'This service (interface version 1).' }],
    tags: [...guideTags, ...referenceTags],
    'x-tagGroups': [
      { name: 'Guides', tags: guideTags.map((t) => t.name as string) },
      { name: 'Reference', tags: referenceTags.map((t) => t.name as string) },
    ],
  }) as Obj;
  return reader;
}
