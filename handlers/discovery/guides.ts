/**
 * The guides of docs/ (the repository's `docs/*.md`, which README.md maps) served to people beside the
 * API reference: `GET /docs/guides` lists them with their sections, `GET /docs/guides/<name>` is one
 * guide rendered on the server (markdown.ts: markdown-it with raw HTML escaped, GitHub's heading
 * anchors), inside the page layout: no script, the page kit's policy. The files are read and rendered
 * once when the process starts (the same bytes on every process); `npm run build` copies docs/ beside
 * the compiled service, where this module finds it (`../../docs/` from here, in both).
 *
 * Links are written for GitHub (relative, `operations.md#compiled-build`) and rewritten here: to
 * another guide, `/docs/guides/<name>#...`; to README.md, the list; to any other file of the repository
 * (a source file, `client/README.md`), no link at all (the service does not serve its sources), the
 * words kept. A shell block marked `no-run: <reason>` for the docs check shows that reason above it.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Token } from 'markdown-it';
import { type Heading, headingsOf, type Markdown, markdown, parseInfo } from './markdown.ts';

export const DOCS_DIR = new URL('../../docs/', import.meta.url);

/** The reading order of the list (README.md's map); a guide not named here follows, by name. */
const ORDER = [
  'first-steps',
  'testing',
  'developing',
  'operations',
  'automation-and-inbox',
  'webhooks',
  'collection',
  'documents-and-signing',
  'operator-cli',
  'dashboard-and-members',
  'agent-access',
  'design-decisions',
  'measured',
  'benchmarks',
];

export interface Guide {
  /** The file's name without `.md`: its address, `/docs/guides/<name>`. */
  name: string;
  /** Its first heading. */
  title: string;
  /** Its sections (`##` headings), for the list and the guide's contents. */
  sections: Heading[];
  /** The guide rendered (raw HTML in the Markdown escaped). */
  html: string;
}

const NAME = /^[a-z0-9][a-z0-9-]*$/;

/** A link of a guide as this service serves it: its new href, or null for a file the service does not serve. */
export function servedHref(href: string, names: ReadonlySet<string>): string | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith('//') || href.startsWith('#')) return href;
  const [target = '', anchor] = href.split('#', 2) as [string, string | undefined];
  const resolved = path.posix.normalize(path.posix.join('docs', target));
  const hash = anchor ? `#${anchor}` : '';
  const guide = /^docs\/([^/]+)\.md$/.exec(resolved)?.[1];
  if (guide && names.has(guide)) return `/docs/guides/${guide}${hash}`;
  if (resolved === 'README.md') return '/docs/guides';
  return null;
}

function renderer(names: ReadonlySet<string>): Markdown {
  const md = markdown();
  const fence = md.renderer.rules.fence!;
  md.renderer.rules.fence = (tokens, idx, options, env, self) => {
    const { noRun } = parseInfo(tokens[idx]!.info);
    const note = noRun === undefined ? '' : `<p class="no-run">Not run by the docs check: ${md.utils.escapeHtml(noRun)}</p>\n`;
    return note + fence(tokens, idx, options, env, self);
  };
  const linkOpen = md.renderer.rules.link_open ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
  const linkClose = md.renderer.rules.link_close ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
  md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
    const token = tokens[idx]!;
    const href = servedHref(String(token.attrGet('href') ?? ''), names);
    if (href === null) {
      token.meta = { unserved: true };
      return '<span class="repo-path">';
    }
    token.attrSet('href', href);
    return linkOpen(tokens, idx, options, env, self);
  };
  md.renderer.rules.link_close = (tokens, idx, options, env, self) => {
    // The matching link_open is the nearest earlier one at this nesting level.
    let open = idx - 1;
    while (open >= 0 && tokens[open]!.type !== 'link_open') open--;
    return (tokens[open]?.meta as { unserved?: boolean } | null)?.unserved ? '</span>' : linkClose(tokens, idx, options, env, self);
  };
  return md;
}

/** Every guide of `dir`, in reading order. */
export function loadGuides(dir: URL = DOCS_DIR): Guide[] {
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.md') && NAME.test(f.slice(0, -3))) : [];
  const names = new Set(files.map((f) => f.slice(0, -3)));
  const md = renderer(names);
  const rank = (n: string) => (ORDER.includes(n) ? ORDER.indexOf(n) : ORDER.length);
  return [...names]
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))
    .map((name) => {
      const tokens: Token[] = md.parse(fs.readFileSync(new URL(`${name}.md`, dir), 'utf8'), {});
      const headings = headingsOf(tokens);
      const title = headings.find((h) => h.level === 1)?.text ?? name;
      return { name, title, sections: headings.filter((h) => h.level === 2), html: md.renderer.render(tokens, md.options, {}) };
    });
}
