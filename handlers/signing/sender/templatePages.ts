/**
 * The template pages of the Documents area: save a request's document and roles as a template (from
 * the request's page), list the templates (`/documents/templates`), use one with the people filled in,
 * delete one. Every change is the template operation itself, called as the member
 * (server/pages/calls.ts), so the pages allow exactly what the API allows the member.
 */
import type express from 'express';
import type { Request, Response } from 'express';
import type { components } from '../../../generated/openapi.ts';
import type { ModuleDeps } from '../../../server/module.ts';
import type { MemberPage, PageKit } from '../../../server/pages.ts';
import { formKey, IDEMPOTENCY_FIELD, newFormKey, type PageCallResult } from '../../../server/pages/calls.ts';
import { timeInWords } from '../../../server/pages/format.ts';
import { DEFAULT_DEADLINE_MS, MAX_DEADLINE_MS, MIN_DEADLINE_MS } from '../handlers.ts';
import type { SigningSettings } from '../settings.ts';
import { field, type Held, minuteMs, sentence, toMinute } from './pageParts.ts';

type SigningRequest = components['schemas']['SigningRequest'];
type Template = components['schemas']['SigningTemplate'];

export const TEMPLATES_PATH = '/documents/templates';
const TEMPLATE_ID = /^tpl_[0-9a-z]{1,36}$/;
const requestPath = (id: string) => `/documents/requests/${id}`;

export interface TemplatePageParts {
  deps: ModuleDeps<SigningSettings>;
  call: <T>(page: MemberPage, id: string, input: unknown, key?: string) => Promise<PageCallResult<T>>;
  views: ReturnType<PageKit['views']>;
  /** One action on a request (reads it as the member, holds the outcome, back to its page). */
  action: (work: (page: MemberPage, r: SigningRequest, body: Record<string, unknown>) => Promise<Held>) => (req: Request<{ id: string }>, res: Response) => Promise<void>;
  mayManage: (page: MemberPage, r: SigningRequest) => boolean;
}

export function templateRoutes(router: express.Router, parts: TemplatePageParts): void {
  const { deps, call, views, action } = parts;
  const { clock, pages } = deps;

  // Templates: a request's document and roles saved for reuse, listed, used and deleted (the template operations).
  router.post('/documents/requests/:id/template', pages.protectForm, action(async (page, r, body) => {
    const name = field(body, 'name').trim().slice(0, 200) || r.title;
    let signer = 0;
    let copy = 0;
    const roles = r.recipients.map((c) => (c.role === 'cc' ? { role: `Copy ${++copy}`, cc: true } : { role: `Signer ${++signer}`, order: c.signing_order }));
    // The request's fields go with the roles of the recipients they were placed for.
    const roleOf = new Map(r.recipients.map((c, i) => [c.recipient_id, roles[i]!.role]));
    // Fields found from the document's text tags are found again by the template (and keep covering their tags).
    const fields = r.signature_method === 'standard' && !r.fields.every((f) => f.tag)
      ? r.fields.flatMap((f) => {
          const role = roleOf.get(f.recipient_id);
          return role ? [{ role, kind: f.kind, page: f.page, x: f.x, y: f.y, width: f.width, height: f.height, required: f.required, ...(f.label ? { label: f.label } : {}) }] : [];
        })
      : [];
    const made = await call<{ template_id: string; name: string }>(page, 'signing.CreateTemplate', { file_id: r.source_file_id, name, title: r.title, ...(r.message ? { message: r.message } : {}), signature_method: r.signature_method, roles, ...(fields.length || r.fields.length === 0 ? { fields } : {}) }, formKey(body));
    return made.ok ? { flash: `Saved the template "${made.body.name}": use it from Documents › Templates.` } : { problem: sentence(made.message) };
  }));

  router.get(TEMPLATES_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const cursor = typeof req.query.cursor === 'string' ? req.query.cursor : '';
    const listed = await call<{ items: Template[]; has_more: boolean; next_cursor: string | null }>(page, 'signing.ListTemplates', { limit: 25, ...(cursor ? { cursor } : {}) });
    const held = ((await page.take()) ?? {}) as Held;
    await page.send(listed.ok ? 200 : listed.status, {
      title: 'Templates',
      html: views.render('templates', {
        csrf: page.csrf,
        idem: newFormKey(),
        idemField: IDEMPOTENCY_FIELD,
        flash: held.flash ?? '',
        problem: listed.ok ? (held.problem ?? '') : sentence(listed.message),
        items: listed.ok ? listed.body.items.map((t) => ({ id: t.template_id, name: t.name, title: t.title ?? '', private: t.private, created: timeInWords(t.created_at), roles: t.roles.map((x) => `${x.role}${x.cc ? ' (copy)' : ''}`).join(', ') })) : [],
        next: listed.ok && listed.body.next_cursor ? `${TEMPLATES_PATH}?cursor=${encodeURIComponent(listed.body.next_cursor)}` : '',
      }),
    });
  });

  /** The template of a page's path, read through ListTemplates' visibility; null after a 404 page. */
  async function readTemplate(page: MemberPage, id: string): Promise<Template | null> {
    if (TEMPLATE_ID.test(id)) {
      let cursor: string | undefined;
      for (let i = 0; i < 40; i++) {
        const listed = await call<{ items: Template[]; next_cursor: string | null }>(page, 'signing.ListTemplates', { limit: 100, ...(cursor ? { cursor } : {}) });
        if (!listed.ok) break;
        const found = listed.body.items.find((t) => t.template_id === id);
        if (found) return found;
        if (!listed.body.next_cursor) break;
        cursor = listed.body.next_cursor;
      }
    }
    await page.notice(404, 'No such template', ['There is no template at this address that you may use.']);
    return null;
  }

  async function usePage(page: MemberPage, t: Template, status: number, kept: { problem?: string; people?: Record<string, { name: string; email: string }>; title?: string; message?: string; deadline?: string } = {}) {
    await page.send(status, {
      title: `Send ${t.name}`,
      html: views.render('use', {
        csrf: page.csrf,
        idem: newFormKey(),
        idemField: IDEMPOTENCY_FIELD,
        problem: kept.problem ?? '',
        t: { id: t.template_id, name: t.name },
        roles: t.roles.map((x, i) => ({ i, role: x.role, cc: x.cc, order: x.order, name: kept.people?.[i]?.name ?? '', email: kept.people?.[i]?.email ?? '' })),
        inOrder: new Set(t.roles.filter((x) => !x.cc).map((x) => x.order)).size > 1,
        title: kept.title ?? t.title ?? '',
        message: kept.message ?? t.message ?? '',
        deadline: kept.deadline ?? toMinute(clock.now() + DEFAULT_DEADLINE_MS),
        deadlineMin: toMinute(clock.now() + MIN_DEADLINE_MS + 60_000),
        deadlineMax: toMinute(clock.now() + MAX_DEADLINE_MS),
      }),
    });
  }

  router.get('/documents/templates/:id', async (req: Request<{ id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const t = await readTemplate(page, req.params.id);
    if (t) await usePage(page, t, 200);
  });

  router.post('/documents/templates/:id/send', pages.protectForm, async (req: Request<{ id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const t = await readTemplate(page, req.params.id);
    if (!t) return;
    const body = (req.body ?? {}) as Record<string, unknown>;
    const people: Record<string, { name: string; email: string }> = {};
    t.roles.forEach((_x, i) => (people[i] = { name: field(body, `name_${i}`).trim(), email: field(body, `email_${i}`).trim() }));
    const kept = { people, title: field(body, 'title').trim(), message: field(body, 'message'), deadline: field(body, 'deadline') };
    const empty = t.roles.findIndex((_x, i) => !people[i]!.name || !people[i]!.email);
    if (empty >= 0) return usePage(page, t, 400, { ...kept, problem: `${t.roles[empty]!.role} needs both a name and an e-mail address.` });
    const deadline = kept.deadline ? minuteMs(kept.deadline) : null;
    if (kept.deadline && deadline === null) return usePage(page, t, 400, { ...kept, problem: 'The deadline is not a date and time (YYYY-MM-DD HH:MM, UTC).' });
    const input: Record<string, unknown> = { template_id: t.template_id, recipients: t.roles.map((x, i) => ({ role: x.role, email: people[i]!.email, name: people[i]!.name })) };
    if (kept.title) input.title = kept.title;
    if (kept.message.trim()) input.message = kept.message;
    if (deadline !== null) input.deadline_at = deadline;
    const made = await call<SigningRequest>(page, 'signing.SendTemplate', input, formKey(body));
    if (!made.ok) return usePage(page, t, made.status === 404 ? 404 : 400, { ...kept, problem: sentence(made.message) });
    const r = made.body;
    await page.hold(requestPath(r.signing_request_id), { flash: `Sent "${r.title}" from the template ${t.name}.` } satisfies Held);
    res.redirect(303, requestPath(r.signing_request_id));
  });

  router.post('/documents/templates/:id/delete', pages.protectForm, async (req: Request<{ id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const body = (req.body ?? {}) as Record<string, unknown>;
    const done = TEMPLATE_ID.test(req.params.id) ? await call<{ deleted: boolean }>(page, 'signing.DeleteTemplate', { template_id: req.params.id }, formKey(body)) : null;
    await page.hold(TEMPLATES_PATH, (!done ? { problem: 'No such template.' } : done.ok ? { flash: done.body.deleted ? 'Deleted the template.' : 'The template was already deleted.' } : { problem: sentence(done.message) }) satisfies Held);
    res.redirect(303, TEMPLATES_PATH);
  });
}
