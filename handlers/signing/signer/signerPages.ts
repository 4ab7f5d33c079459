/**
 * The signer's pages: recipients sign themselves through the link their invitation mail carries
 * (`/sign/<token>`, links.ts). They are not members: no navigation bar, no session, no cookie. The
 * token in the path is the credential and stands in for a CSRF token (a page of another site cannot
 * know it); posts whose `Origin` (or, without one, `Referer`) names another origin are refused (403).
 *
 *   GET  /sign/<token>               who asks (sender, workspace), the title, message and deadline, and
 *                                    "Continue". Changes and records nothing: mail scanners and link
 *                                    previews fetch links (GET and HEAD) and must not open them.
 *   POST /sign/<token>/open          records `opened` once (event recipient.opened), 303 to the review.
 *   GET  /sign/<token>/review        the rendered pages (pdf.js in the browser), a download, the typed
 *                                    name, the agreement checkbox and Sign; Decline with a reason. Before
 *                                    Continue it answers 303 to the first page (records nothing).
 *   GET  /sign/<token>/document.pdf  the original, byte-identical (`?download=1`: as an attachment);
 *                                    before Continue 303 to the first page.
 *   POST /sign/<token>/sign          typed name 1..200 and the agreement: records the signature with
 *                                    IP address (req.ip, TRUST_PROXY aware) and user agent, 303 to done.
 *   POST /sign/<token>/decline       a reason 1..500: the request is cancelled for everyone, 303 to done.
 *   GET  /sign/<token>/done          the confirmation of what this recipient did.
 *   GET  /assets/signing/*           this page's stylesheet, its script and pdf.js (from node_modules).
 *
 * Dead links: an unknown token answers 404, an ended one 410, each with a page saying why (signed,
 * declined, cancelled, expired or the deadline passed, completed). Bad form input re-renders the page
 * with 400 and the message; every post that acts answers 303 (post/redirect/get). A bankid request's
 * sign step posts to `/sign/<token>/bankid/start` (the provider's flow, bankid/flow.ts) instead of the
 * typed name.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import express, { type Request, type Response } from 'express';
import type { Sql } from '../../../db/database.ts';
import { type BrowserBundle, bundleFiles } from '../../../server/bundle.ts';
import type { ModuleDeps } from '../../../server/module.ts';
import { sameOrigin } from '../../../server/pages.ts';
import { timeInWords, untilInWords } from '../../../server/pages/format.ts';
import { bidiControlProblem } from '../../../server/text.cjs';
import { filesOf } from '../files.ts';
import type { ProviderInfo } from '../bankid/provider.ts';
import { type DbSigningFieldRow, type DbSigningRecipientRow, type DbSigningRequestRow, FIELD_KIND_WORDS, FILLED_KINDS, findMember, keyCreator, listFields, workspaceName } from '../queries.ts';
import { DRAWN_SIGNATURE_MAX_CHARS, parseDrawnSignature } from './drawnSignature.ts';
import { type EndedReason, resolveSignerLink } from './links.ts';
import { recordDeclined, recordOpened, recordSigned } from '../request/lifecycle.ts';

/** The limits of the forms (also said on the page and in the README). */
export const TYPED_NAME_MAX = 200;
export const DECLINE_REASON_MAX = 500;
const USER_AGENT_MAX = 1000;

const require = createRequire(import.meta.url);
const PDFJS_DIR = path.dirname(require.resolve('pdfjs-dist/package.json'));
const PAGES_DIR = new URL('./pages/', import.meta.url);
const ASSET_PREFIX = '/assets/signing/';
/**
 * The review page's policy: the page kit's (scripts, styles, connections and workers of this origin
 * only, no inline script or style, no framing) plus `font-src 'self'`, since pdf.js draws the 14
 * standard PDF fonts with the font files it loads from this service.
 */
const REVIEW_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

type Asset = { file: string; type: string; cache: string } | { build: () => Promise<Buffer>; type: string; cache: string };
const JS = 'text/javascript; charset=utf-8';
const PDFJS_CACHE = 'public, max-age=86400';
const ASSETS: Record<string, Asset> = {
  'signer.css': { file: fileURLToPath(new URL('signer.css', PAGES_DIR)), type: 'text/css; charset=utf-8', cache: 'no-cache' },
  'viewer.js': { build: () => viewerBundle(), type: JS, cache: 'no-cache' },
  'pdf.mjs': { file: path.join(PDFJS_DIR, 'legacy/build/pdf.min.mjs'), type: JS, cache: PDFJS_CACHE },
  'pdf.worker.mjs': { file: path.join(PDFJS_DIR, 'legacy/build/pdf.worker.min.mjs'), type: JS, cache: PDFJS_CACHE },
};
/** pdf.js's data folders (fonts of the 14 standard PDF fonts, character maps, image decoders), by file name. */
const PDFJS_FOLDERS: Record<string, { dir: string; names: Set<string>; type: (name: string) => string }> = Object.fromEntries(
  (['standard_fonts', 'cmaps', 'wasm'] as const).map((folder) => {
    const dir = path.join(PDFJS_DIR, folder);
    const names = new Set(fs.existsSync(dir) ? fs.readdirSync(dir).filter((n) => !n.startsWith('LICENSE')) : []);
    const type = (name: string) => (name.endsWith('.wasm') ? 'application/wasm' : name.endsWith('.js') ? JS : 'application/octet-stream');
    return [folder, { dir, names, type }];
  }),
);

/** The review page's script, pages/viewer.ts (pdf.js itself is loaded by URL): `viewer.js`. */
export const viewerBrowserBundle: BrowserBundle = {
  entry: new URL('viewer.ts', PAGES_DIR),
  out: new URL('./viewer.bundle/', PAGES_DIR),
  target: 'es2020',
};

let viewer: Promise<Buffer> | null = null;
/** The viewer's bundle, read (or bundled) once per process; a failure is retried on the next request. */
function viewerBundle(): Promise<Buffer> {
  viewer ??= bundleFiles(viewerBrowserBundle)
    .then((files) => {
      const js = files.get('viewer.js');
      if (!js) throw new Error(`the viewer's bundle has no viewer.js (${[...files.keys()].join(', ')})`);
      return js;
    })
    .catch((err: unknown) => {
      viewer = null;
      throw err;
    });
  return viewer;
}

/** A post from a page of this service (or from no page at all: the token is the credential). */
function fromThisService(req: Request): boolean {
  if (req.headers.origin !== undefined) return sameOrigin(req);
  const referer = req.headers.referer;
  if (referer === undefined) return true;
  try {
    return new URL(referer).host === req.host;
  } catch {
    return false;
  }
}

/** A form field as one string (a repeated or missing field is ''). */
function field(req: Request, name: string): string {
  const value: unknown = (req.body as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' ? value : '';
}

/** Text typed into a one-line field: control characters removed, spaces collapsed, trimmed. */
const oneLine = (s: string) => s.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').replace(/\s+/g, ' ').trim();
/** Text typed into a text area: line breaks kept, other control characters removed, trimmed. */
const multiLine = (s: string) => s.replace(/\r\n?/g, '\n').replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]+/g, '').trim();

/** How long until the deadline: `in 29 days`, below two days `in 47 h 10 min`. */
function dueInWords(ms: number): string {
  const days = Math.floor(ms / 86_400_000);
  return days >= 2 ? `in ${days} days` : untilInWords(ms);
}

/** A size in words: `48 KB`, `3.2 MB`. */
function sizeInWords(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/** At most this many characters in a text field (one line). */
const FIELD_TEXT_MAX = 200;

/** A field as the signer's page shows it. */
function fieldView(f: DbSigningFieldRow) {
  return { id: f.id, kind: f.kind, words: FIELD_KIND_WORDS[f.kind], page: f.page, x: f.x, y: f.y, width: f.width, height: f.height, required: f.required, label: f.label ?? '', covers: Boolean(f.tag) };
}

/** How a field is named to the signer: its label, else its kind and page. */
function fieldName(f: Pick<DbSigningFieldRow, 'kind' | 'label' | 'page'>, _i: number): string {
  if (f.label) return `“${f.label}”`;
  return `the ${f.kind === 'checkbox' ? 'check box' : 'text field'} on page ${f.page}`;
}

type Live = Extract<Awaited<ReturnType<typeof resolveSignerLink>>, { state: 'live' }>;
type Ended = Extract<Awaited<ReturnType<typeof resolveSignerLink>>, { state: 'ended' }>;

export function signerRoutes(deps: ModuleDeps<unknown>, options: { bankid?: ProviderInfo | null } = {}): express.Router {
  const { db, clock, pages, storage, logger } = deps;
  const views = pages.views(PAGES_DIR);
  const router = pages.router();
  const bankid = options.bankid ?? null;
  // The viewer's bundle is read (or, from the TypeScript sources, bundled) when the service starts, not on a signer's first request.
  viewerBundle().catch((err: unknown) => logger.error({ err }, 'signer viewer bundle failed'));

  /** Who asks: the member who sent it (or the creator of the key that did), and the workspace. */
  async function who(request: DbSigningRequestRow): Promise<{ sender: string; workspace: string }> {
    const workspace = await workspaceName(db.sql, request.workspace_id);
    const memberId = request.owner_member_id ?? (request.created_by_key_id ? await keyCreator(db.sql, request.created_by_key_id) : null);
    const member = memberId ? await findMember(db.sql, request.workspace_id, memberId) : undefined;
    // A disabled member no longer speaks for the workspace (as in the mails, senderOf).
    return { sender: member && member.disabled_at === null ? member.name : workspace, workspace };
  }

  function send(res: Response, status: number, title: string, html: string, script = false): void {
    res.setHeader('X-Robots-Tag', 'noindex, nofollow');
    if (script) res.setHeader('Content-Security-Policy', REVIEW_POLICY);
    pages.send(res, status, { title, bodyClass: 'signer', styles: [`${ASSET_PREFIX}signer.css`], scripts: script ? [`${ASSET_PREFIX}viewer.js`] : [], html });
  }

  function unknown(res: Response): void {
    send(res, 404, 'Unknown link', views.render('signer-ended', {
      workspace: '',
      documentTitle: '',
      heading: 'Unknown link',
      paragraphs: ['This signing link does not exist. Check that the whole link from the e-mail was copied, or ask the sender for a new one.'],
    }));
  }

  async function ended(res: Response, link: Ended): Promise<void> {
    const { request, recipient } = link;
    const { sender, workspace } = await who(request);
    const { heading, paragraphs } = endedWords(link.reason, request, recipient, sender);
    send(res, 410, heading, views.render('signer-ended', { workspace, documentTitle: request.title, heading, paragraphs }));
  }

  /** The link of a request, or null after answering the dead link's page. */
  async function live(req: Request<{ token: string }>, res: Response): Promise<Live | null> {
    const link = await resolveSignerLink(db.sql, req.params.token, clock.now());
    if (link.state === 'unknown') unknown(res);
    else if (link.state === 'ended') await ended(res, link);
    else return link;
    return null;
  }

  function refuseForeign(req: Request, res: Response): boolean {
    if (fromThisService(req)) return false;
    pages.notice(res, 403, 'Refused', ['This form may only be sent from a page of this service.']);
    return true;
  }

  async function pageData(link: Live) {
    const { request, recipient } = link;
    const { sender, workspace } = await who(request);
    const file = await filesOf(deps).find(db.sql, request.workspace_id, request.source_file_id);
    const now = clock.now();
    return {
      token: '',
      title: request.title,
      message: request.message ?? '',
      sender,
      workspace,
      recipient: { name: recipient.name, email: recipient.email },
      deadline: timeInWords(request.deadline_at),
      deadlineIso: new Date(request.deadline_at).toISOString(),
      deadlineIn: dueInWords(request.deadline_at - now),
      filename: filesOf(deps).downloadName(file?.filename ?? 'document.pdf'),
      pageCount: file?.pageCount ?? 0,
      size: sizeInWords(file?.size ?? 0),
      method: request.signature_method,
      provider: bankid?.name ?? 'BankID',
      fields: (await listFields(db.sql, request.id)).filter((f) => f.recipient_id === recipient.id).map(fieldView),
    };
  }

  interface ReviewInput {
    typedName?: string;
    /** What the signer typed or ticked in their fields, by field id (kept when the form is refused). */
    values?: ReadonlyMap<string, string>;
    /** The fields left empty that must be filled. */
    missing?: ReadonlySet<string>;
    drawn?: string;
    reason?: string;
    errors?: string[];
    nameError?: boolean;
    agreeError?: boolean;
    declineErrors?: string[];
  }
  async function review(res: Response, token: string, link: Live, status: number, input: ReviewInput = {}): Promise<void> {
    const data = await pageData(link);
    send(
      res,
      status,
      status === 200 ? link.request.title : `Check the form · ${link.request.title}`,
      views.render('signer-review', {
        ...data,
        token,
        typedName: input.typedName ?? '',
        values: Object.fromEntries(input.values ?? []),
        missing: [...(input.missing ?? [])],
        drawn: input.drawn ?? '',
        drawnMax: DRAWN_SIGNATURE_MAX_CHARS,
        fieldsJson: JSON.stringify(data.fields),
        reason: input.reason ?? '',
        errors: input.errors ?? [],
        nameError: input.nameError ?? false,
        agreeError: input.agreeError ?? false,
        declineErrors: input.declineErrors ?? [],
      }),
      true,
    );
  }

  // ---- the pages' assets ---------------------------------------------------------------------
  router.get(`${ASSET_PREFIX}:name`, async (req: Request<{ name: string }>, res: Response) => {
    const asset = Object.hasOwn(ASSETS, req.params.name) ? ASSETS[req.params.name]! : undefined;
    if (!asset) return pages.notFound(res);
    res.setHeader('Content-Type', asset.type);
    res.setHeader('Cache-Control', asset.cache);
    if ('file' in asset) return void fs.createReadStream(asset.file).pipe(res);
    try {
      res.status(200).send(await asset.build());
    } catch (err) {
      logger.error({ err }, 'signing: the signer page script could not be built');
      res.status(500).type('text/plain').send('The page script could not be built; see the service log.');
    }
  });
  router.get(`${ASSET_PREFIX}:folder/:name`, (req: Request<{ folder: string; name: string }>, res: Response) => {
    const folder = Object.hasOwn(PDFJS_FOLDERS, req.params.folder) ? PDFJS_FOLDERS[req.params.folder]! : undefined;
    if (!folder || !folder.names.has(req.params.name)) return pages.notFound(res);
    res.setHeader('Content-Type', folder.type(req.params.name));
    res.setHeader('Cache-Control', PDFJS_CACHE);
    fs.createReadStream(path.join(folder.dir, req.params.name)).pipe(res);
  });

  // ---- the link --------------------------------------------------------------------------------
  router.get('/sign/:token', async (req: Request<{ token: string }>, res: Response) => {
    const link = await live(req, res);
    if (!link) return;
    const data = await pageData(link);
    send(res, 200, link.request.title, views.render('signer-start', { ...data, token: req.params.token }));
  });

  router.post('/sign/:token/open', async (req: Request<{ token: string }>, res: Response) => {
    if (refuseForeign(req, res)) return;
    const link = await live(req, res);
    if (!link) return;
    const opened = await db.tx((sql) => recordOpened(sql, { recipientId: link.recipient.id, now: clock.now() }));
    if (!opened.ok) return reEnded(req, res);
    res.redirect(303, `/sign/${req.params.token}/review`);
  });

  router.get('/sign/:token/review', async (req: Request<{ token: string }>, res: Response) => {
    const link = await live(req, res);
    if (!link) return;
    if (link.recipient.status === 'pending') return res.redirect(303, `/sign/${req.params.token}`);
    await review(res, req.params.token, link, 200);
  });

  router.get('/sign/:token/document.pdf', async (req: Request<{ token: string }>, res: Response) => {
    const link = await live(req, res);
    if (!link) return;
    if (link.recipient.status === 'pending') return res.redirect(303, `/sign/${req.params.token}`);
    const file = await filesOf(deps).find(db.sql, link.request.workspace_id, link.request.source_file_id);
    if (!file || file.sha256 !== link.request.source_sha256) {
      logger.error({ requestId: link.request.id }, 'signing: the source file of a request is missing or changed');
      return pages.notice(res, 500, 'The document is not available', ['The document of this request cannot be read. Tell the sender; nothing was recorded.']);
    }
    // Streamed from the blob store (checked against its size and SHA-256 on the way), never held whole:
    // slow readers of a large document cost a stream's buffers each, not the file.
    const bytes = await storage.get(file.blobId);
    const disposition = req.query.download === '1' ? 'attachment' : 'inline';
    res.setHeader('Content-Type', 'application/pdf');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('X-Robots-Tag', 'noindex, nofollow');
    res.setHeader('Content-Disposition', filesOf(deps).disposition(disposition, file.filename));
    res.setHeader('Content-Length', String(file.size));
    res.setHeader('Cache-Control', 'no-store');
    res.status(200);
    try {
      await pipeline(bytes, res);
    } catch (err) {
      // Headers are out: a failure (a reader that went away, damaged bytes) can only cut the body short.
      if (!res.destroyed) res.destroy(err as Error);
    }
  });

  router.post('/sign/:token/sign', async (req: Request<{ token: string }>, res: Response) => {
    if (refuseForeign(req, res)) return;
    const link = await live(req, res);
    if (!link) return;
    const token = req.params.token;
    if (link.recipient.status === 'pending') return res.redirect(303, `/sign/${token}`);
    if (link.request.signature_method === 'bankid') return res.redirect(303, `/sign/${token}/review#sign`);
    const typedName = oneLine(field(req, 'typed_name'));
    const agreed = field(req, 'agree') === 'yes';
    const errors: string[] = [];
    // The typed name goes into the evidence, the sender's mails and pages: the display-text rule of every name (server/text.cjs).
    const bidi = bidiControlProblem('name', typedName);
    if (typedName === '') errors.push('Type your full name.');
    else if (typedName.length > TYPED_NAME_MAX) errors.push(`Your name may have at most ${TYPED_NAME_MAX} characters.`);
    else if (bidi) errors.push(bidi);
    // The signer's own text and check box fields, in the order placed.
    const mine = (await listFields(db.sql, link.request.id)).filter((f) => f.recipient_id === link.recipient.id && FILLED_KINDS.has(f.kind));
    const values = new Map<string, string>();
    const missing = new Set<string>();
    mine.forEach((f, i) => {
      const what = fieldName(f, i);
      if (f.kind === 'checkbox') {
        const ticked = field(req, `field_${f.id}`) === 'yes';
        values.set(f.id, ticked ? 'true' : 'false');
        if (f.required && !ticked) {
          missing.add(f.id);
          errors.push(`Tick ${what}.`);
        }
        return;
      }
      const text = oneLine(field(req, `field_${f.id}`));
      values.set(f.id, text.slice(0, FIELD_TEXT_MAX));
      const problem = text.length > FIELD_TEXT_MAX ? `${what} may have at most ${FIELD_TEXT_MAX} characters.` : bidiControlProblem(what, text);
      if (problem) {
        missing.add(f.id);
        errors.push(problem);
      } else if (f.required && text === '') {
        missing.add(f.id);
        errors.push(`Fill in ${what}.`);
      }
    });
    const drawnText = field(req, 'drawn_signature');
    const drawn = parseDrawnSignature(drawnText);
    if (typeof drawn === 'string') errors.push(drawn);
    if (!agreed) errors.push('Tick “I agree to sign this document electronically”.');
    if (errors.length) {
      return review(res, token, link, 400, {
        typedName: typedName.slice(0, TYPED_NAME_MAX),
        errors,
        nameError: typedName === '' || typedName.length > TYPED_NAME_MAX || bidi !== null,
        agreeError: !agreed,
        values,
        missing,
        drawn: typeof drawn === 'string' ? '' : drawnText.slice(0, DRAWN_SIGNATURE_MAX_CHARS),
      });
    }
    const input = {
      recipientId: link.recipient.id,
      typedName,
      fieldValues: values,
      drawnSignature: drawn ? JSON.stringify(drawn) : null,
      ip: req.ip ?? null,
      userAgent: (req.get('user-agent') ?? '').slice(0, USER_AGENT_MAX) || null,
      now: clock.now(),
    };
    const used: Sql[] = [];
    const signed = await db.tx((sql) => {
      used.push(sql);
      return recordSigned(sql, deps, input);
    });
    // The archive job was enqueued in that transaction: start it now rather than at the next poll.
    for (const sql of used) deps.jobs.committed(sql);
    if (!signed.ok) return reEnded(req, res);
    res.redirect(303, `/sign/${token}/done`);
  });

  router.post('/sign/:token/decline', async (req: Request<{ token: string }>, res: Response) => {
    if (refuseForeign(req, res)) return;
    const link = await live(req, res);
    if (!link) return;
    const token = req.params.token;
    if (link.recipient.status === 'pending') return res.redirect(303, `/sign/${token}`);
    const reason = multiLine(field(req, 'reason'));
    const problem = reason === '' ? 'Say why you decline (the sender sees it).' : reason.length > DECLINE_REASON_MAX ? `Your reason may have at most ${DECLINE_REASON_MAX} characters (it has ${reason.length}).` : bidiControlProblem('reason', reason);
    if (problem) return review(res, token, link, 400, { reason: reason.slice(0, DECLINE_REASON_MAX), declineErrors: [problem] });
    const used: Sql[] = [];
    const declined = await db.tx((sql) => {
      used.push(sql);
      return recordDeclined(sql, { recipientId: link.recipient.id, reason, now: clock.now() }, deps.jobs);
    });
    // The declined mails were enqueued in that transaction: start them now rather than at the next poll.
    for (const sql of used) deps.jobs.committed(sql);
    if (!declined.ok) return reEnded(req, res);
    res.redirect(303, `/sign/${token}/done`);
  });

  router.get('/sign/:token/done', async (req: Request<{ token: string }>, res: Response) => {
    const link = await resolveSignerLink(db.sql, req.params.token, clock.now());
    if (link.state === 'unknown') return unknown(res);
    const { request, recipient } = link;
    if (recipient.status !== 'signed' && recipient.status !== 'declined') return res.redirect(303, `/sign/${req.params.token}`);
    const { sender, workspace } = await who(request);
    const signed = recipient.status === 'signed';
    const at = Number(signed ? recipient.signed_at : recipient.declined_at);
    send(
      res,
      200,
      signed ? 'Signed' : 'Declined',
      views.render('signer-done', {
        workspace,
        sender,
        title: request.title,
        outcome: recipient.status,
        typedName: recipient.typed_name ?? '',
        reason: recipient.decline_reason ?? '',
        at: timeInWords(at),
        atIso: new Date(at).toISOString(),
        completed: request.status === 'completed',
        method: request.signature_method,
      }),
    );
  });

  /** A post that lost a race (the request ended meanwhile): the dead link's page. */
  async function reEnded(req: Request<{ token: string }>, res: Response): Promise<void> {
    const link = await resolveSignerLink(db.sql, req.params.token, clock.now());
    if (link.state === 'unknown') return unknown(res);
    if (link.state === 'ended') return ended(res, link);
    res.redirect(303, `/sign/${req.params.token}`);
  }

  return router;
}

/** What a dead link's page says (410). */
export function endedWords(reason: EndedReason, request: DbSigningRequestRow, recipient: DbSigningRecipientRow, sender: string): { heading: string; paragraphs: string[] } {
  const title = `“${request.title}”`;
  if (recipient.status === 'signed') {
    return {
      heading: 'You already signed this document',
      paragraphs: [
        `You signed ${title} on ${timeInWords(Number(recipient.signed_at))}${recipient.typed_name ? ` as ${recipient.typed_name}` : ''}.`,
        request.status === 'completed'
          ? 'Every recipient has signed: the request is complete. Nothing more is needed from you.'
          : request.status === 'pending'
            ? 'The other recipients have not all signed yet. This link can no longer change anything.'
            : `The request has since ended (${request.status}).`,
      ],
    };
  }
  if (recipient.status === 'declined') {
    return {
      heading: 'You declined this document',
      paragraphs: [`You declined to sign ${title} on ${timeInWords(Number(recipient.declined_at))}. The request has ended for every recipient.`],
    };
  }
  switch (reason) {
    case 'declined':
      return { heading: 'This request was declined', paragraphs: [`Another recipient declined to sign ${title}, so the request has ended and nobody can sign it. Ask ${sender} if you have questions.`] };
    case 'cancelled':
      return {
        heading: 'This request was cancelled',
        paragraphs: [
          `${sender} cancelled the request to sign ${title}${request.cancelled_at ? ` on ${timeInWords(Number(request.cancelled_at))}` : ''}. Nothing more is needed from you.`,
          ...(request.cancel_reason ? [`Reason given: ${request.cancel_reason}`] : []),
        ],
      };
    case 'expired':
      return {
        heading: 'The deadline has passed',
        paragraphs: [`The deadline to sign ${title} was ${timeInWords(Number(request.deadline_at))}. The request has expired; ask ${sender} for a new one if you still need to sign.`],
      };
    case 'completed':
      return { heading: 'This request is complete', paragraphs: [`Every recipient has signed ${title}. Nothing more is needed from you.`] };
    case 'signed':
      return { heading: 'You already signed this document', paragraphs: [`You signed ${title}.`] };
  }
}
