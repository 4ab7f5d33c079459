/**
 * Record pages for every record type the document publishes (types.ts): `/records` (the types),
 * `/records/<type>` (list with the list operation's filters and paging), `/records/<type>/new`,
 * `/records/<type>/<id>` (every field, read-only ones too), `/records/<type>/<id>/edit` and
 * `/records/<type>/<id>/delete` (a confirmation first), and `/records/open/<id>` (a record by id,
 * whatever its type: where a notice's "Open" leads).
 *
 * Every read and change goes through `callAsMember` (server/pages/calls.ts): the one execution path
 * with the member's own session, so the record kit decides what they see and change (their role on
 * shared records, their own private records, nobody else's) exactly as for an API call acting for
 * them. Commands carry the form's idempotency key (a double click acts once). An edit sends only what
 * the person changed, with what they saw as `expected` (form.ts): when someone else changed one of
 * those fields since the form was opened, the page says so field by field and keeps the person's
 * input; nothing is overwritten until they save again.
 */
import type { Request, Response } from 'express';
import type express from 'express';
import type { ExecuteOperation } from '../../server/execute.ts';
import { callAsMember, formKey, IDEMPOTENCY_FIELD, newFormKey, type PageCallResult } from '../../server/pages/calls.ts';
import { timeInWords } from '../../server/pages/format.ts';
import type { MemberPage, NavEntry, PageKit } from '../../server/pages.ts';
import { roleAllows } from '../../server/roles.ts';
import { createInput, decodeOpened, encodeOpened, type FormBody, FormProblem, same, shown, updateInput, writable } from './form.ts';
import { RECORD_TYPES, type RecordField, type RecordType, recordTypeBySlug } from './types.ts';

export const RECORDS_PATH = '/records';
export const RECORDS_CSS = new URL('./records.css', import.meta.url);
export const recordsNavigation: NavEntry[] = [{ label: 'Records', path: RECORDS_PATH, order: 12 }];

/** Rows a list page shows. */
export const LIST_LIMIT = 25;
/** Columns a list shows besides the title and the update time. */
const LIST_COLUMNS = 4;
const RECORD_ID = /^[a-z]{2,8}_[0-9a-z]{8,40}$/;

interface Envelope {
  id: string;
  created_at: number;
  updated_at: number;
  created_by: string | null;
  private: boolean;
  data: Record<string, unknown>;
}
interface Held {
  flash?: string;
}

/** A value in words for lists and the record page; a record id becomes a link to that record. */
function display(field: RecordField, value: unknown): { text: string; href?: string } {
  if (value === undefined || value === null || value === '') return { text: '—' };
  if (field.kind === 'integer' && field.name.endsWith('_at') && typeof value === 'number') return { text: timeInWords(value) };
  if (field.kind === 'boolean') return { text: value === true ? 'yes' : value === false ? 'no' : String(value) };
  if (field.kind === 'object' && typeof value === 'object') {
    const parts = field.fields.map((p) => (value as Record<string, unknown>)[p.name]).filter((v) => v !== undefined && v !== null && v !== '');
    return { text: parts.join(parts.length > 2 ? ', ' : ' ') };
  }
  if (field.kind === 'json') {
    // A list of named things (a pipeline's stages): their names in order.
    const nameOf = (v: unknown) => (v && typeof v === 'object' ? ((v as Record<string, unknown>).label ?? (v as Record<string, unknown>).name) : undefined);
    if (Array.isArray(value) && value.length && value.every((v) => typeof nameOf(v) === 'string')) return { text: value.map(nameOf).join(' → ') };
    return { text: JSON.stringify(value) };
  }
  const text = String(value);
  // A record id links to its record (a member id is no record: `mb_`).
  return RECORD_ID.test(text) && field.name.endsWith('_id') && !text.startsWith('mb_') ? { text, href: `${RECORDS_PATH}/open/${text}` } : { text };
}

/** A form's inputs: one entry per writable field, with what each input shows. */
function formFields(type: RecordType, value: (name: string) => string) {
  return writable(type).map((f) => ({
    name: f.name,
    label: f.label,
    kind: f.kind,
    required: f.required,
    hint: f.hint,
    maxLength: f.maxLength ?? 0,
    example: f.kind === 'json' && f.example !== undefined ? JSON.stringify(f.example) : '',
    options: f.options,
    value: value(`f.${f.name}`),
    parts: f.fields.map((p) => ({ name: p.name, label: p.label, kind: p.kind, options: p.options, required: p.required, value: value(`f.${f.name}.${p.name}`) })),
  }));
}

/** What the inputs show for stored data. */
function inputsOfData(type: RecordType, data: Record<string, unknown>): (name: string) => string {
  const map = new Map<string, string>();
  for (const f of writable(type)) {
    const v = data[f.name];
    if (f.kind === 'object') for (const p of f.fields) map.set(`f.${f.name}.${p.name}`, shown(p, v && typeof v === 'object' ? (v as Record<string, unknown>)[p.name] : undefined));
    else map.set(`f.${f.name}`, shown(f, v));
  }
  return (name) => map.get(name) ?? '';
}
/** What the inputs show for a posted form (as typed). */
const inputsOfBody = (body: FormBody) => (name: string) => (typeof body[name] === 'string' ? (body[name] as string) : '');

export function recordsRoutes(deps: { pages: PageKit; operations: { execute: ExecuteOperation } }): express.Router {
  const { pages } = deps;
  const router = pages.router();
  const views = pages.views(new URL('./pages', import.meta.url));
  const call = <T>(page: MemberPage, id: string, input: unknown, key?: string): Promise<PageCallResult<T>> => callAsMember<T>(deps.operations.execute, page, id, input, key);

  /** Whether the member may change shared records of the type (their own private ones always). */
  const writesShared = (page: MemberPage, type: RecordType) => roleAllows(page.member.role, type.resource, 'write');
  const mayChange = (page: MemberPage, type: RecordType, r: Envelope) => writesShared(page, type) || (r.private && r.created_by === page.member.id);

  const typeOf = async (req: Request, page: MemberPage): Promise<RecordType | undefined> => {
    const type = recordTypeBySlug.get(String(req.params.type));
    if (!type) await page.notice(404, 'No such kind of record', [`Records are ${RECORD_TYPES.map((t) => t.plural.toLowerCase()).join(', ')}: open ${RECORDS_PATH}.`]);
    return type;
  };
  const refusal = (page: MemberPage, r: { status: number; message: string }, what: string) =>
    page.notice(r.status === 400 ? 404 : r.status, r.status === 404 || r.status === 400 ? `No such ${what}` : r.status === 403 ? 'Not allowed' : 'Refused', [
      r.status === 404 || r.status === 400 ? `There is no ${what} with this id that you can see: it was deleted, it is someone else’s private record, or the link is wrong.` : r.message,
    ]);

  const loadRecord = async (page: MemberPage, type: RecordType, id: string): Promise<Envelope | undefined> => {
    if (!RECORD_ID.test(id)) return void (await refusal(page, { status: 404, message: '' }, type.singular));
    const r = await call<{ item: Envelope }>(page, type.get.id, { id });
    if (!r.ok) return void (await refusal(page, r, type.singular));
    return r.body.item;
  };

  /** A referenced record's name and page, when the member can see it (tried against each type's get). */
  const referenced = async (page: MemberPage, id: string): Promise<{ text: string; href: string } | undefined> => {
    for (const type of RECORD_TYPES) {
      const r = await call<{ item: Envelope }>(page, type.get.id, { id });
      if (r.ok) return { text: type.titleField ? String(r.body.item.data[type.titleField] ?? id) : id, href: `${RECORDS_PATH}/${type.slug}/${id}` };
    }
    return undefined;
  };

  router.get(RECORDS_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    await page.send(200, {
      title: 'Records',
      html: views.render('index', {
        types: RECORD_TYPES.map((t) => ({ href: `${RECORDS_PATH}/${t.slug}`, plural: t.plural, singular: t.singular, fields: writable(t).map((f) => f.label.toLowerCase()).join(', '), newHref: t.create && (writesShared(page, t) || t.canBePrivate) ? `${RECORDS_PATH}/${t.slug}/new` : '' })),
      }),
    });
  });

  // A record by id, whatever its type (notices link here: recordPagePath).
  router.get(`${RECORDS_PATH}/open/:id`, async (req: Request<{ id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const id = req.params.id;
    if (RECORD_ID.test(id)) {
      for (const type of RECORD_TYPES) {
        const r = await call<{ item: Envelope }>(page, type.get.id, { id });
        if (r.ok) return res.redirect(303, `${RECORDS_PATH}/${type.slug}/${encodeURIComponent(id)}`);
      }
    }
    await page.notice(404, 'No such record', ['There is no record with this id that you can see: it was deleted, it is someone else’s private record, or the link is wrong.']);
  });

  router.get(`${RECORDS_PATH}/:type`, async (req: Request<{ type: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const type = await typeOf(req, page);
    if (!type) return;
    const q = req.query as Record<string, unknown>;
    const input: Record<string, unknown> = { limit: LIST_LIMIT };
    const chosen: Record<string, string> = {};
    for (const f of type.filters) {
      const v = typeof q[f.name] === 'string' ? (q[f.name] as string).trim() : '';
      if (v) input[f.name] = chosen[f.name] = v;
    }
    if (typeof q.cursor === 'string' && q.cursor) input.cursor = q.cursor;
    const r = await call<{ items: Envelope[]; has_more: boolean; next_cursor: string | null }>(page, type.list.id, input);
    if (!r.ok) {
      if (r.status === 400) return page.notice(400, 'That list cannot be shown', [`${r.message}`, `Open ${RECORDS_PATH}/${type.slug} for the whole list.`]);
      return refusal(page, r, type.singular);
    }
    const title = type.titleField ? type.fields.find((f) => f.name === type.titleField)! : undefined;
    const columns = type.fields.filter((f) => f.name !== type.titleField && f.kind !== 'json').slice(0, LIST_COLUMNS);
    const held = ((await page.take()) ?? {}) as Held;
    const next = new URLSearchParams({ ...chosen, ...(r.body.next_cursor ? { cursor: r.body.next_cursor } : {}) });
    await page.send(200, {
      title: type.plural,
      html: views.render('list', {
        type: { slug: type.slug, plural: type.plural, singular: type.singular },
        flash: held.flash ?? '',
        newHref: type.create && (writesShared(page, type) || type.canBePrivate) ? `${RECORDS_PATH}/${type.slug}/new` : '',
        filters: type.filters.map((f) => ({ name: f.name, label: f.label, hint: f.hint, value: chosen[f.name] ?? '' })),
        filtered: Object.keys(chosen).length > 0,
        paged: typeof q.cursor === 'string' && q.cursor !== '',
        columns: columns.map((c) => c.label),
        rows: r.body.items.map((item) => ({
          href: `${RECORDS_PATH}/${type.slug}/${item.id}`,
          title: title ? display(title, item.data[title.name]).text : item.id,
          private: item.private,
          cells: columns.map((c) => ({ label: c.label, ...display(c, item.data[c.name]) })),
          updated: timeInWords(item.updated_at),
        })),
        nextHref: r.body.has_more && r.body.next_cursor ? `${RECORDS_PATH}/${type.slug}?${next}` : '',
        firstHref: `${RECORDS_PATH}/${type.slug}${Object.keys(chosen).length ? `?${new URLSearchParams(chosen)}` : ''}`,
      }),
    });
  });

  const renderForm = async (page: MemberPage, type: RecordType, status: number, o: { record?: Envelope; inputs: (name: string) => string; opened?: Record<string, unknown>; problem?: string; conflict?: Array<{ label: string; opened: string; now: string }>; privateChecked?: boolean; key?: string }) => {
    const editing = !!o.record;
    await page.send(status, {
      title: editing ? `Edit ${type.singular}` : `New ${type.singular}`,
      html: views.render('form', {
        type: { slug: type.slug, plural: type.plural, singular: type.singular },
        editing,
        record: o.record ? { id: o.record.id, href: `${RECORDS_PATH}/${type.slug}/${o.record.id}`, private: o.record.private } : null,
        action: editing ? `${RECORDS_PATH}/${type.slug}/${o.record!.id}/edit` : `${RECORDS_PATH}/${type.slug}/new`,
        csrf: page.csrf,
        idemField: IDEMPOTENCY_FIELD,
        idem: o.key ?? newFormKey(),
        opened: o.opened ? encodeOpened(o.opened) : '',
        fields: formFields(type, o.inputs),
        canBePrivate: !editing && type.canBePrivate,
        privateChecked: o.privateChecked ?? (!writesShared(page, type) && type.canBePrivate),
        sharedRefused: !writesShared(page, type),
        problem: o.problem ?? '',
        conflict: o.conflict ?? [],
      }),
    });
  };

  router.get(`${RECORDS_PATH}/:type/new`, async (req: Request<{ type: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const type = await typeOf(req, page);
    if (!type) return;
    if (!type.create) return page.notice(404, `${type.plural} are not created here`, [`The API has no operation that creates a ${type.singular}.`]);
    await renderForm(page, type, 200, { inputs: () => '' });
  });

  router.post(`${RECORDS_PATH}/:type/new`, pages.protectForm, async (req: Request<{ type: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const type = await typeOf(req, page);
    if (!type || !type.create) return type ? page.notice(404, 'Not found', ['Nothing to create here.']) : undefined;
    const body = (req.body ?? {}) as FormBody;
    const key = formKey(body);
    const again = (status: number, problem: string) => renderForm(page, type, status, { inputs: inputsOfBody(body), problem, privateChecked: body.private === 'on', key: newFormKey() });
    let input;
    try {
      input = createInput(type, body);
    } catch (err) {
      if (err instanceof FormProblem) return again(400, err.message);
      throw err;
    }
    const r = await call<{ item: Envelope }>(page, type.create.id, input, key);
    if (!r.ok) return again(r.status, r.message);
    await page.hold(`${RECORDS_PATH}/${type.slug}/${r.body.item.id}`, { flash: `Created this ${type.singular}.` } satisfies Held);
    res.redirect(303, `${RECORDS_PATH}/${type.slug}/${r.body.item.id}`);
  });

  router.get(`${RECORDS_PATH}/:type/:id`, async (req: Request<{ type: string; id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const type = await typeOf(req, page);
    if (!type) return;
    const record = await loadRecord(page, type, req.params.id);
    if (!record) return;
    const held = ((await page.take()) ?? {}) as Held;
    const changeable = mayChange(page, type, record);
    await page.send(200, {
      title: `${type.titleField ? String(record.data[type.titleField] ?? record.id) : record.id}`,
      html: views.render('record', {
        type: { slug: type.slug, plural: type.plural, singular: type.singular },
        flash: held.flash ?? '',
        title: type.titleField ? String(record.data[type.titleField] ?? record.id) : record.id,
        record: { id: record.id, private: record.private, created: timeInWords(record.created_at), updated: timeInWords(record.updated_at), mine: record.created_by === page.member.id },
        fields: await Promise.all(
          type.fields.map(async (f) => {
            const shownValue = display(f, record.data[f.name]);
            // A reference reads as the record's name, linked to it.
            const named = shownValue.href ? await referenced(page, shownValue.text) : undefined;
            return { label: f.label, readOnly: f.readOnly, hint: f.hint, ...shownValue, ...(named ? { text: named.text, href: named.href, named: true } : { named: false }) };
          }),
        ),
        editHref: type.update && changeable ? `${RECORDS_PATH}/${type.slug}/${record.id}/edit` : '',
        deleteHref: type.remove && changeable ? `${RECORDS_PATH}/${type.slug}/${record.id}/delete` : '',
      }),
    });
  });

  router.get(`${RECORDS_PATH}/:type/:id/edit`, async (req: Request<{ type: string; id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const type = await typeOf(req, page);
    if (!type) return;
    if (!type.update) return page.notice(404, `${type.plural} are not edited here`, [`The API has no operation that updates a ${type.singular}.`]);
    const record = await loadRecord(page, type, req.params.id);
    if (!record) return;
    await renderForm(page, type, 200, { record, inputs: inputsOfData(type, record.data), opened: record.data });
  });

  router.post(`${RECORDS_PATH}/:type/:id/edit`, pages.protectForm, async (req: Request<{ type: string; id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const type = await typeOf(req, page);
    if (!type || !type.update) return type ? page.notice(404, 'Not found', ['Nothing to edit here.']) : undefined;
    const body = (req.body ?? {}) as FormBody;
    const record = await loadRecord(page, type, req.params.id);
    if (!record) return;
    const opened = decodeOpened(body);
    // Without what the form was opened with, a save could not tell the person's changes from someone else's.
    if (!opened) return page.notice(400, 'Open the form again', [`This form does not carry the ${type.singular} as it was when you opened it, so saving it could overwrite someone else’s changes. Open the edit page again and make your change there.`]);
    const again = (status: number, o: { problem?: string; conflict?: Array<{ label: string; opened: string; now: string }>; opened?: Record<string, unknown> }) =>
      renderForm(page, type, status, { record, inputs: inputsOfBody(body), opened: o.opened ?? opened, problem: o.problem, conflict: o.conflict, key: newFormKey() });
    let update;
    try {
      update = updateInput(type, record.id, opened, body);
    } catch (err) {
      if (err instanceof FormProblem) return again(400, { problem: err.message });
      throw err;
    }
    if (update.problems.length) return again(400, { problem: update.problems.join(' ') });
    const target = `${RECORDS_PATH}/${type.slug}/${record.id}`;
    if (!update.changed.length) {
      await page.hold(target, { flash: 'Nothing changed.' } satisfies Held);
      return res.redirect(303, target);
    }
    const r = await call<{ item: Envelope }>(page, type.update.id, update.input, formKey(body));
    if (!r.ok) {
      if (r.status === 409) {
        // Someone changed what this person changed since they opened the form: show it, field by field.
        const now = record.data;
        const moved = type.fields.filter((f) => !f.readOnly && !same(opened[f.name], now[f.name]));
        if (moved.length) {
          // The fields this person did not change show the current values; theirs stay as typed.
          const fresh = inputsOfData(type, now);
          const mineOnly = (name: string) => {
            const field = writable(type).find((f) => name === `f.${f.name}` || name.startsWith(`f.${f.name}.`));
            return field && update.changed.includes(field.name) ? inputsOfBody(body)(name) : fresh(name);
          };
          return renderForm(page, type, 409, {
            record,
            inputs: mineOnly,
            key: newFormKey(),
            problem: `Changed by someone else since you opened it. Nothing was saved. Your changes are still in the form: save again to replace their values with yours.`,
            conflict: moved.map((f) => ({ label: f.label, opened: display(f, opened[f.name]).text, now: display(f, now[f.name]).text })),
            opened: now,
          });
        }
      }
      return again(r.status, { problem: r.message });
    }
    await page.hold(target, { flash: `Saved: ${update.changed.map((n) => type.fields.find((f) => f.name === n)?.label ?? n).join(', ')}.` } satisfies Held);
    res.redirect(303, target);
  });

  router.get(`${RECORDS_PATH}/:type/:id/delete`, async (req: Request<{ type: string; id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const type = await typeOf(req, page);
    if (!type) return;
    if (!type.remove) return page.notice(404, `${type.plural} are not deleted here`, [`The API has no operation that deletes a ${type.singular}.`]);
    const record = await loadRecord(page, type, req.params.id);
    if (!record) return;
    await page.send(200, {
      title: `Delete ${type.singular}?`,
      html: views.render('delete', {
        type: { slug: type.slug, plural: type.plural, singular: type.singular },
        title: type.titleField ? String(record.data[type.titleField] ?? record.id) : record.id,
        record: { id: record.id, href: `${RECORDS_PATH}/${type.slug}/${record.id}`, private: record.private },
        action: `${RECORDS_PATH}/${type.slug}/${record.id}/delete`,
        csrf: page.csrf,
        idemField: IDEMPOTENCY_FIELD,
        idem: newFormKey(),
      }),
    });
  });

  router.post(`${RECORDS_PATH}/:type/:id/delete`, pages.protectForm, async (req: Request<{ type: string; id: string }>, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    const type = await typeOf(req, page);
    if (!type || !type.remove) return type ? page.notice(404, 'Not found', ['Nothing to delete here.']) : undefined;
    const body = (req.body ?? {}) as FormBody;
    const id = req.params.id;
    if (body.confirm !== 'yes') return res.redirect(303, `${RECORDS_PATH}/${type.slug}/${encodeURIComponent(id)}/delete`);
    if (!RECORD_ID.test(id)) return refusal(page, { status: 404, message: '' }, type.singular);
    const r = await call<{ deleted: boolean }>(page, type.remove.id, { id }, formKey(body));
    if (!r.ok) return refusal(page, r, type.singular);
    await page.hold(`${RECORDS_PATH}/${type.slug}`, { flash: `Deleted the ${type.singular}.` } satisfies Held);
    res.redirect(303, `${RECORDS_PATH}/${type.slug}`);
  });

  return router;
}
