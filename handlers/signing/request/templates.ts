/**
 * Templates: a document with its roles saved for reuse (signing.CreateTemplate, ListTemplates,
 * DeleteTemplate), sent with the people filled in (signing.SendTemplate, which makes the request as
 * signing.RequestFileSignatures does). A template over a member's private file is that member's own;
 * over a workspace file, the workspace's.
 */
import { mayManageSettings } from '../../../server/capabilities.ts';
import { DEFAULT_PAGE_LIMIT, decodeCursor, encodeCursor, positionField } from '../../../server/cursor.ts';
import { conflict, forbidden, invalidInput, notFound } from '../../../server/errors.ts';
import { newId } from '../../../server/ids.ts';
import type { Input, OperationContext } from '../../../server/operation.ts';
import { filesOf } from '../files.ts';
import type { SigningRuntime } from './invitationMail.ts';
import { type FieldKind, storedRequired } from '../queries.ts';
import { checkFieldPages, checkFieldsMethod, fieldsFromTags } from './fieldRules.ts';

export interface TemplateRole {
  role: string;
  order: number;
  cc: boolean;
}

export interface TemplateField {
  role: string;
  kind: FieldKind;
  page: number;
  x: number;
  y: number;
  width: number;
  height: number;
  required: boolean;
  label: string | null;
  /** Found from the document's text tag (request/textTags.ts); null when given in `fields`. */
  tag: string | null;
}

interface DbTemplateRow {
  id: string;
  workspace_id: string;
  name: string;
  file_id: string;
  title: string | null;
  message: string | null;
  signature_method: 'standard' | 'bankid';
  roles: string;
  fields?: string | null;
  private: boolean | number;
  owner_member_id: string | null;
  created_by_key_id: string | null;
  created_at: number | string;
}

/** Templates a workspace may keep (each keeps its file): signing.CreateTemplate answers 409 past it. */
export const MAX_TEMPLATES = 500;

const CURSOR = { t: positionField.millis, i: { type: 'string', maxLength: 40 } } as const;
const MISMATCH = 'cursor belongs to a listing of another caller; send the same key and Service-Act-As as for the first page.';

export function templateView(t: DbTemplateRow) {
  return {
    template_id: t.id,
    name: t.name,
    file_id: t.file_id,
    title: t.title,
    message: t.message,
    signature_method: t.signature_method,
    roles: JSON.parse(t.roles) as TemplateRole[],
    fields: (t.fields ? (JSON.parse(t.fields) as TemplateField[]) : []).map((f) => ({ ...f, tag: f.tag ?? null })),
    private: Boolean(t.private),
    created_at: Number(t.created_at),
  };
}

/** Whether the caller sees the template: a workspace template, or their own private one. */
const visible = (ctx: OperationContext, t: DbTemplateRow) => !t.private || (ctx.member !== null && t.owner_member_id === ctx.member.id);

/** The template when the caller may see it; else 404. */
async function visibleTemplate(ctx: OperationContext, id: string): Promise<DbTemplateRow> {
  const t = await ctx.sql.one<DbTemplateRow>(`SELECT * FROM signing_templates WHERE workspace_id = ? AND id = ?`, [ctx.workspaceId, id]);
  if (!t || !visible(ctx, t)) throw notFound(`No template ${id} is visible to this credential.`);
  return t;
}

const blank = (s: string) => s.trim() === '';

/** The template operations; `makeRequest` is signing.RequestFileSignatures' own. */
export function templateHandlers(deps: SigningRuntime, makeRequest: (input: Input<'signing.RequestFileSignatures'>, ctx: OperationContext) => Promise<unknown>) {
  return {
    create: async (input: Input<'signing.CreateTemplate'>, ctx: OperationContext) => {
      if (blank(input.name)) throw invalidInput('name is blank.');
      if (input.title !== undefined && blank(input.title)) throw invalidInput('title is blank.');
      const seen = new Map<string, number>();
      input.roles.forEach((r, i) => {
        if (blank(r.role)) throw invalidInput(`roles[${i}].role is blank.`);
        const key = r.role.trim().toLowerCase();
        const first = seen.get(key);
        if (first !== undefined) throw invalidInput(`roles[${i}].role repeats roles[${first}].role (compared without case); name each role once.`);
        seen.set(key, i);
      });
      if (input.roles.every((r) => r.cc === true)) throw invalidInput('roles: at least one role must sign (cc: false).');
      const signing = new Map(input.roles.filter((r) => r.cc !== true).map((r) => [r.role.trim().toLowerCase(), r.role.trim()]));
      const fields: TemplateField[] = (input.fields ?? []).map((f, i) => {
        const role = signing.get(f.role.trim().toLowerCase());
        if (!role) {
          throw invalidInput(`fields[${i}].role "${f.role}" is not a signing role of this template (${[...signing.values()].join(', ')}); a CC role fills no fields.`);
        }
        if (f.label !== undefined && blank(f.label)) throw invalidInput(`fields[${i}].label is blank.`);
        return { role, kind: f.kind, page: f.page, x: f.x, y: f.y, width: f.width, height: f.height, required: storedRequired(f.kind, f.required), label: f.label?.trim() || null, tag: null };
      });
      checkFieldsMethod(fields.length, input.signature_method);
      const count = await ctx.sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM signing_templates WHERE workspace_id = ?`, [ctx.workspaceId]);
      if (Number(count?.n ?? 0) >= MAX_TEMPLATES) throw conflict(`This workspace has ${MAX_TEMPLATES} templates, the most it may keep; delete one (signing.DeleteTemplate) before saving another.`);
      const memberId = ctx.member?.id ?? null;
      const files = filesOf(deps);
      const file = await files.find(ctx.sql, ctx.workspaceId, input.file_id);
      const missing = () => notFound(`No file ${input.file_id} is visible to this credential (a workspace file, or your own private file when acting for its owner).`);
      if (!file || !files.visibleTo(file, memberId)) throw missing();
      // No `fields`: the document's text tags place them, `signer=N` naming the Nth signing role.
      const roleNames = [...signing.values()];
      for (const f of fieldsFromTags(file.textTags, input.fields !== undefined, input.signature_method, roleNames.length, { owner: 'template', slot: 'signing role' })) {
        fields.push({ role: roleNames[f.signer]!, kind: f.kind, page: f.page, x: f.x, y: f.y, width: f.width, height: f.height, required: f.required, label: f.label ?? null, tag: f.tag });
      }
      checkFieldPages(fields, file.pageCount);
      if (!(await files.keep(ctx.sql, ctx.workspaceId, file.id))) throw missing();
      const row: DbTemplateRow = {
        id: newId('tpl'),
        workspace_id: ctx.workspaceId,
        name: input.name.trim(),
        file_id: file.id,
        title: input.title ?? null,
        message: input.message ? input.message : null,
        signature_method: input.signature_method ?? 'standard',
        roles: JSON.stringify(input.roles.map((r) => ({ role: r.role.trim(), order: r.order ?? 1, cc: r.cc ?? false }))),
        // `[]` given is kept as `[]` (the document's tags ignored); null: none given and no tags.
        fields: fields.length || input.fields !== undefined ? JSON.stringify(fields) : null,
        private: file.ownerMemberId !== null,
        owner_member_id: memberId,
        created_by_key_id: ctx.credential.kind === 'system' || ctx.credential.kind === 'session' ? null : ctx.credential.keyId,
        created_at: ctx.now,
      };
      await ctx.sql.run(
        `INSERT INTO signing_templates (id, workspace_id, name, file_id, title, message, signature_method, roles, fields, private, owner_member_id, created_by_key_id, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [row.id, row.workspace_id, row.name, row.file_id, row.title, row.message, row.signature_method, row.roles, row.fields ?? null, Boolean(row.private), row.owner_member_id, row.created_by_key_id, row.created_at],
      );
      return templateView(row);
    },

    list: async (input: Input<'signing.ListTemplates'>, ctx: OperationContext) => {
      const limit = input.limit ?? DEFAULT_PAGE_LIMIT;
      const filters = [ctx.workspaceId, ctx.credential.keyId, ctx.member?.id ?? null];
      const after = input.cursor ? await decodeCursor(ctx, input.cursor, CURSOR, filters, MISMATCH) : null;
      const params: Array<string | number | boolean> = [ctx.workspaceId, false];
      let where = `workspace_id = ? AND (private = ?${ctx.member ? ' OR owner_member_id = ?' : ''})`;
      if (ctx.member) params.push(ctx.member.id);
      if (after) {
        where += ' AND (created_at < ? OR (created_at = ? AND id < ?))';
        params.push(after.t, after.t, after.i);
      }
      params.push(limit + 1);
      const rows = await ctx.sql.all<DbTemplateRow>(`SELECT * FROM signing_templates WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT ?`, params);
      const more = rows.length > limit;
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      return {
        items: page.map(templateView),
        has_more: more,
        next_cursor: more && last ? await encodeCursor(ctx, CURSOR, { t: Number(last.created_at), i: last.id }, filters) : null,
      };
    },

    remove: async (input: Input<'signing.DeleteTemplate'>, ctx: OperationContext) => {
      const t = await ctx.sql.one<DbTemplateRow>(`SELECT * FROM signing_templates WHERE workspace_id = ? AND id = ?`, [ctx.workspaceId, input.template_id]);
      if (!t) return { template_id: input.template_id, deleted: false };
      if (!visible(ctx, t)) throw notFound(`No template ${input.template_id} is visible to this credential.`);
      const own = ctx.member ? t.owner_member_id === ctx.member.id : t.owner_member_id === null && t.created_by_key_id === ctx.credential.keyId;
      const admin = ctx.member !== null && !t.private && mayManageSettings(ctx.member.role);
      if (!own && !admin) throw forbidden(`Only who made template ${t.id}, or an owner or admin of the workspace, may delete it.`);
      const gone = await ctx.sql.run(`DELETE FROM signing_templates WHERE id = ?`, [t.id]);
      return { template_id: t.id, deleted: gone > 0 };
    },

    /** The RequestFileSignatures body a template and its people make. */
    requestOf: async (input: Input<'signing.SendTemplate'>, ctx: OperationContext): Promise<Input<'signing.RequestFileSignatures'>> => {
      const t = await visibleTemplate(ctx, input.template_id);
      const roles = JSON.parse(t.roles) as TemplateRole[];
      const byRole = new Map<string, (typeof input.recipients)[number]>();
      input.recipients.forEach((r, i) => {
        const key = r.role.trim().toLowerCase();
        if (!roles.some((x) => x.role.toLowerCase() === key)) throw invalidInput(`recipients[${i}].role "${r.role}" is not a role of template ${t.id} (its roles: ${roles.map((x) => x.role).join(', ')}).`);
        if (byRole.has(key)) throw invalidInput(`recipients[${i}].role "${r.role}" is given twice; fill each role once.`);
        byRole.set(key, r);
      });
      const missingRole = roles.find((x) => !byRole.has(x.role.toLowerCase()));
      if (missingRole) throw invalidInput(`recipients: the role "${missingRole.role}" of template ${t.id} has nobody; fill every role.`);
      const person = (x: TemplateRole) => byRole.get(x.role.toLowerCase())!;
      // A field goes to the signer filling its role (signers are the signing roles, in the template's order).
      const signerRoles = roles.filter((x) => !x.cc).map((x) => x.role.toLowerCase());
      const saved = t.fields ? (JSON.parse(t.fields) as TemplateField[]) : null;
      // Fields from the document's tags are found again from the same file when the request is made (and cover their tags).
      const fromTags = saved !== null && saved.length > 0 && saved.every((f) => f.tag);
      const fields = (fromTags || saved === null ? [] : saved).flatMap((f) => {
        const signer = signerRoles.indexOf(f.role.toLowerCase());
        if (signer < 0) return [];
        return [{ signer, kind: f.kind, page: f.page, x: f.x, y: f.y, width: f.width, height: f.height, required: f.required, ...(f.label ? { label: f.label } : {}) }];
      });
      const title = input.title ?? t.title ?? undefined;
      const message = input.message ?? t.message ?? undefined;
      return {
        file_id: t.file_id,
        signers: roles.filter((x) => !x.cc).map((x) => ({ email: person(x).email, name: person(x).name, order: x.order })),
        ...(roles.some((x) => x.cc) ? { cc: roles.filter((x) => x.cc).map((x) => ({ email: person(x).email, name: person(x).name })) } : {}),
        signature_method: t.signature_method,
        // An explicit empty list stays one: the template ignores the document's tags.
        ...(fields.length || (saved !== null && saved.length === 0) ? { fields } : {}),
        ...(title !== undefined ? { title } : {}),
        ...(message !== undefined ? { message } : {}),
        ...(input.deadline_at !== undefined ? { deadline_at: input.deadline_at } : {}),
        ...(input.reminder_interval_days !== undefined ? { reminder_interval_days: input.reminder_interval_days } : {}),
      };
    },
  };
}

