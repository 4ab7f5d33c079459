import type { AuditSentenceParts, AuditWords } from '../../server/audit.ts';

/** The webhook subscription in a sentence: by name (and id) when it has one. */
const webhook = ({ label, id, idNote, quoted }: AuditSentenceParts) => (label ? `the webhook subscription ${quoted(label)}${idNote}` : `the webhook subscription ${id}`.trim());

/** A webhook signing contract in words. */
function contractWords(p: AuditSentenceParts, value: unknown): string {
  if (value === 'v1') return 'the timestamped v1= signature';
  if (value === 'legacy' || value === 'bare' || value === 'hmac' || value === 'bare_hmac') return 'the bare HMAC signature';
  return p.valueWords(value);
}

/** The audit log's words for webhook subscriptions. */
export const webhooksAuditWords: AuditWords = {
  families: { webhooks: { label: 'Webhooks', prefixes: ['webhook.'] } },
  actions: {
    'webhook.approved': (p) => `approved ${webhook(p)}`,
    'webhook.rejected': (p) => (p.id.startsWith('whp_') ? `rejected the proposed webhook ${p.label ? `${p.quoted(p.label)} (${p.id})` : p.id}` : `rejected ${webhook(p)}`),
    'webhook.secret_rotated': (p) => `rotated the signing secret of ${webhook(p)}`,
    'webhook.signing_contract_changed': (p) => `moved ${webhook(p)}${p.change((v) => contractWords(p, v)) || ' to another signing contract'}`,
  },
};
