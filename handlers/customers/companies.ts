import { countRows } from '../../db/queries/records.ts';
import { isActiveMember } from '../../db/queries/workspaces.ts';
import type { DbCompanyRow } from './rows.ts';
import type { components } from '../../generated/openapi.ts';
import { conflict, invalidInput } from '../../server/errors.ts';
import { RecordType } from '../../server/recordKit.ts';
import { canonicalMoney } from './money.ts';

type CompanyData = components['schemas']['CompanyData'];

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * A company's domain in its one stored form (the CompanyDomain schema states the rule): the host of
 * a host name or http(s) URL, lower case, IDN as punycode (the WHATWG URL parser does both), without
 * a trailing dot or one leading `www.`; at least two labels, the last not all digits.
 */
export function normaliseDomain(input: string, field: string): string {
  const bad = () => invalidInput(`${field} "${input.slice(0, 300)}" is not a domain name or an http(s) URL of one (e.g. globex.com).`);
  const raw = input.trim();
  let url: URL;
  try {
    url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`);
  } catch {
    throw bad();
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password) throw bad();
  let host = url.hostname.replace(/\.$/, '');
  if (host.startsWith('www.') && host.split('.').length > 2) host = host.slice(4);
  const labels = host.split('.');
  if (host.length > 253 || labels.length < 2 || !labels.every((l) => LABEL.test(l)) || /^[0-9]+$/.test(labels[labels.length - 1]!)) throw bad();
  return host;
}

/** `core:Company` on the record kit: upsert by normalised domain (unique per scope), exact money, an owner who is an active member. */
export const companies = new RecordType<CompanyData, CompanyData, DbCompanyRow>({
  table: { name: 'companies', columns: ['domain', 'owner_member_id'] },
  idPrefix: 'co',
  noun: 'company',
  plural: 'companies',
  dataSchema: 'CompanyData',
  columns: (data) => ({ domain: data.domain ?? null, owner_member_id: data.owner_member_id ?? null }),
  match: { field: 'domain', column: 'domain', unique: true },
  rules: {
    normalise(data, where) {
      const out = { ...data };
      if (out.domain !== undefined) out.domain = normaliseDomain(out.domain, `${where}.domain`);
      if (out.annual_revenue !== undefined) out.annual_revenue = canonicalMoney(out.annual_revenue, `${where}.annual_revenue`);
      return out;
    },
    async prepare(w) {
      // Checked when set to a new id: a company keeps an owner who was disabled later.
      const owner = w.next.owner_member_id;
      if (typeof owner === 'string' && owner !== w.before?.data.owner_member_id && !(await isActiveMember(w.ctx.sql, w.ctx.workspaceId, owner))) {
        throw invalidInput(`data.owner_member_id: ${owner} is not an active member of this workspace.`);
      }
    },
    async beforeDelete(ctx, company) {
      const n = await countRows(ctx.sql, 'deals', { company_id: company.row.id });
      if (n) {
        throw conflict(
          `${n} ${n === 1 ? 'deal refers' : 'deals refer'} to this company (private deals included); remove company_id from ${n === 1 ? 'it' : 'them'} or delete ${n === 1 ? 'it' : 'them'} first. Nothing was written.`,
        );
      }
    },
  },
});

export const companyHandlers = companies.operations({
  list: 'customers.ListCompanies',
  get: 'customers.GetCompany',
  create: 'customers.CreateCompany',
  upsert: 'customers.UpsertCompany',
  update: 'customers.UpdateCompany',
  delete: 'customers.DeleteCompany',
});
