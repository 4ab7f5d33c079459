import type { AuditWords } from '../../server/audit.ts';
import { isolateLabel } from '../../server/audit.ts';

/** The audit log's words for members, invitations and sign-in sessions. */
export const membersAuditWords: AuditWords = {
  families: { members: { label: 'Members', prefixes: ['member.', 'invitation.', 'session.'] } },
  actions: {
    'member.added': ({ named, email, role, d }) => `added ${named('member')}${email ? ` <${email}>` : ''}${role ? ` as ${role}` : ''}${d.disabled === true ? ' (disabled)' : ''}`,
    'member.invited': ({ label, email, role, d, list }) =>
      `invited ${label || email || 'someone'}${role ? ` as ${role}` : ''}${Array.isArray(d.replaces) && d.replaces.length ? `, which replaces the earlier open invitation${d.replaces.length > 1 ? 's' : ''} of the address (${list(d.replaces.map(String))})` : ''}`,
    'invitation.revoked': ({ label, email, id, role }) => `revoked the invitation for ${label || email || id}${role ? ` (as ${role})` : ''}`,
    'member.joined': ({ role, d }) => `joined${role ? ` as ${role}` : ''} through an invitation${typeof d.invited_by === 'string' ? ` from ${isolateLabel(d.invited_by)}` : ''}`,
    'member.role_changed': ({ named, possessive, change, valueWords, sessionsEnded }) => `changed ${possessive(named('member'))} role${change(valueWords)}${sessionsEnded}`,
    'member.disabled': ({ named, sessionsEnded }) => `disabled ${named('member')}${sessionsEnded}`,
    'member.enabled': ({ named }) => `enabled ${named('member')}`,
    'session.revoked': ({ subjectType, d, named, possessive, id }) => {
      if (subjectType === 'member') {
        const n = typeof d.sessions === 'number' ? d.sessions : undefined;
        return n === 1 ? `ended ${possessive(named('member'))} one sign-in session` : `ended all ${n === undefined ? '' : `${n} `}of ${possessive(named('member'))} sign-in sessions`;
      }
      const whose = typeof d.member_name === 'string' ? `${possessive(isolateLabel(d.member_name))} ` : '';
      return `ended ${whose}sign-in session ${id}`.replace(/\s+$/, '');
    },
  },
};
