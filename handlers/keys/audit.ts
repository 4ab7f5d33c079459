import type { AuditSentenceParts, AuditWords } from '../../server/audit.ts';

/** The API key in a sentence: by name (and id) when it has one. */
const key = ({ label, id, idNote, quoted }: AuditSentenceParts) => (label ? `the API key ${quoted(label)}${idNote}` : `the API key ${id}`.trim());

/** A workspace's API-key availability in words. */
function keyAccessWords(p: AuditSentenceParts, value: unknown): string {
  if (value === 'on') return 'on';
  if (value === 'off') return 'off (no new keys; existing keys keep working)';
  if (value === 'stopped') return 'stopped (no key works)';
  return p.valueWords(value);
}

/** The audit log's words for API keys and the workspace's API-key availability. */
export const keysAuditWords: AuditWords = {
  families: { keys: { label: 'API keys', prefixes: ['key.', 'workspace.api_keys_changed'] } },
  actions: {
    'key.created': (p) => {
      const ops = Array.isArray(p.d.operations) ? ` with ${p.plural(p.d.operations.length, 'operation')}` : '';
      const acts = p.d.delegation === undefined ? '' : `, acting for ${p.delegationWords(p.d.delegation)}`;
      return `created ${key(p)}${ops}${acts}`;
    },
    'key.revoked': (p) => `revoked ${key(p)}: it no longer works`,
    'key.replaced': (p) => {
      const old = p.d.replaces ?? p.d.replaced;
      return `made ${key(p)} to replace ${old ? p.valueWords(old) : 'an older key'} (both work until the old one is revoked)`;
    },
    'key.delegation_changed': (p) => `changed whom ${key(p)} may act for${p.change(p.delegationWords)}`,
    'workspace.api_keys_changed': (p) => `changed API keys for the workspace${p.change((v) => keyAccessWords(p, v)) || ` to ${keyAccessWords(p, p.d.access)}`}`,
  },
};
