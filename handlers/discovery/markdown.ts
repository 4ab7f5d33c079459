/**
 * The guides' Markdown (README.md and docs/*.md), read one way by the page that serves them
 * (`/docs/guides/<name>`, guides.ts) and by the check that runs their shell blocks and follows their
 * links (scripts/docs-check.ts): markdown-it (CommonMark, GitHub's tables and strikethrough) with raw
 * HTML off, so a `<` in a guide is text, never markup; heading anchors as GitHub makes them
 * (github-slugger), so one link works on GitHub and on the service.
 */
import GithubSlugger from 'github-slugger';
import MarkdownIt, { type MarkdownIt as Markdown, type Token } from 'markdown-it';

export type { Markdown };

/** A parser with raw HTML off (escaped as text) and no bare-URL links; links to `javascript:` and the like are refused by markdown-it. */
export function markdown(): Markdown {
  return new MarkdownIt({ html: false, linkify: false, typographer: false });
}

const parser = markdown();

/** The text of an inline token as GitHub reads a heading for its anchor (code spans by their content). */
function inlineText(token: Token | undefined): string {
  return (token?.children ?? []).map((c) => (c.type === 'text' || c.type === 'code_inline' ? c.content : '')).join('');
}

export interface Heading {
  level: number;
  text: string;
  /** GitHub's anchor of the heading (`#` + this). */
  slug: string;
  /** 1-based line in the file. */
  line: number;
}

/** Every heading of a parsed document with its GitHub anchor, and the anchor set on its `heading_open` token (`id`). */
export function headingsOf(tokens: Token[]): Heading[] {
  const slugger = new GithubSlugger();
  const out: Heading[] = [];
  tokens.forEach((t, i) => {
    if (t.type !== 'heading_open') return;
    const text = inlineText(tokens[i + 1]);
    const slug = slugger.slug(text);
    t.attrSet('id', slug);
    out.push({ level: Number(t.tag.slice(1)), text, slug, line: (t.map?.[0] ?? 0) + 1 });
  });
  return out;
}

export interface Fence {
  /** The info string's first word (`sh`, `ts`, `text`, ...). */
  lang: string;
  /** Why it is not run, when its info string says `no-run: <reason>` (an empty string: no reason given). */
  noRun?: string;
  /** The block's text, as pasted. */
  source: string;
  /** 1-based line of the opening fence. */
  line: number;
}

/** `sh no-run: <reason>`: the info string of a shell block the docs check does not run, with the reason. */
export function parseInfo(info: string): { lang: string; noRun?: string } {
  const [lang = '', ...rest] = info.trim().split(/\s+/);
  const tail = rest.join(' ');
  const m = /^no-run\b:?\s*(.*)$/.exec(tail);
  return m ? { lang, noRun: m[1]!.trim() } : { lang };
}

export function fencesOf(tokens: Token[]): Fence[] {
  return tokens
    .filter((t) => t.type === 'fence')
    .map((t) => ({ ...parseInfo(t.info), source: t.content, line: (t.map?.[0] ?? 0) + 1 }));
}

export interface Link {
  href: string;
  /** 1-based line of the block holding it. */
  line: number;
}

/** Every link and image of a document (inline and reference links, autolinks). */
export function linksOf(tokens: Token[]): Link[] {
  const out: Link[] = [];
  for (const t of tokens) {
    if (t.type !== 'inline') continue;
    for (const c of t.children ?? []) {
      const href = c.type === 'link_open' ? c.attrGet('href') : c.type === 'image' ? c.attrGet('src') : null;
      if (href !== null) out.push({ href: String(href), line: (t.map?.[0] ?? 0) + 1 });
    }
  }
  return out;
}

/** Parses a document once for all of the above. */
export function parse(source: string): Token[] {
  return parser.parse(source, {});
}
