import { type AuditWords, isolateLabel } from '../../server/audit.ts';

const text = (v: unknown, otherwise: string) => (typeof v === 'string' ? isolateLabel(v) : otherwise);

/** The audit log's words for signing: changes a sender makes to who signs a request. */
export const signingAuditWords: AuditWords = {
  families: { signing: { label: 'Signing', prefixes: ['signing.'] } },
  actions: {
    'signing.recipient_replaced': ({ label, id, d }) =>
      `gave a signer of ${label || id} another address: ${text(d.previous_email, 'an address')} → ${text(d.email, 'a new one')}${typeof d.name === 'string' ? ` (now ${text(d.name, '')})` : ''}`,
  },
};
