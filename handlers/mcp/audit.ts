import type { AuditSentenceParts, AuditWords } from '../../server/audit.ts';

const connection = ({ label, id, idNote, quoted }: AuditSentenceParts) => (label ? `the MCP connection ${quoted(label)}${idNote}` : `the MCP connection ${id}`.trim());

/** The audit log's words for agent (MCP) connections. */
export const connectionsAuditWords: AuditWords = {
  families: { connections: { label: 'Agent connections', prefixes: ['connection.'] } },
  actions: {
    'connection.approved': (p) => {
      const { d } = p;
      const ops = Array.isArray(d.operations) ? p.plural(d.operations.length, 'operation') : '';
      const how =
        d.access === 'personal'
          ? ` with personal access${typeof d.acts_as === 'string' ? ` (acting as ${p.valueWords(d.acts_as)})` : ''}${ops ? `: ${ops}` : ''}`
          : ` with workspace access${ops ? `: ${ops}` : ''}${d.delegation === undefined ? '' : `, acting for ${p.delegationWords(d.delegation)}`}`;
      const sets = Array.isArray(d.toolsets) && d.toolsets.length ? `; toolsets ${p.valueWords(d.toolsets)}` : '';
      return `approved ${connection(p)}${how}${sets}${d.read_only === true ? '; read only' : ''}${d.tool_listing === 'full' ? '; every tool listed in full' : ''}`;
    },
    'connection.revoked': (p) => {
      const { d } = p;
      const whose = d.access === 'personal' && typeof d.acts_as === 'string' ? ` (personal, acting as ${p.valueWords(d.acts_as)})` : d.access === 'workspace' ? ' (workspace access)' : '';
      return `revoked ${connection(p)}${whose}: its tokens no longer work`;
    },
  },
};
