/**
 * Signing's event kinds in the shared outbox (issue 22): the history kinds a caller may act on are
 * also written, in the same transaction, as change events that automation rules trigger on and
 * webhook subscriptions to the kind receive. Their payload (`SigningEventData` in the document) holds
 * ids, the request's status, its title and counts of signers: never addresses (IP or e-mail), names,
 * user agents, links, tokens or document contents (seed 4.10). A private request's events are
 * private: no rule runs for them and no webhook carries them.
 */
import type { Sql } from '../../db/database.ts';
import { emitEvent, type EventKindDeclaration, eventKind } from '../../server/events.ts';
import type { SigningEventKind } from './queries.ts';

const READ_WITH = 'signing.ListSigningEvents';

const kinds = {
  'request.created': ['signing.request.created', 'A signing request was created (its invitations are queued).'],
  'invitation.sent': ['signing.request.sent', 'An invitation to a signer went out (one event per signer; reminders are not included).'],
  'recipient.opened': ['signing.request.opened', 'A signer opened the document for the first time.'],
  'recipient.signed': ['signing.request.signed', 'A signer signed.'],
  'recipient.declined': ['signing.request.declined', 'A signer declined; the request is cancelled (a signing.request.cancelled event follows).'],
  'request.completed': ['signing.request.completed', 'Every signer signed; the signed archive is being built.'],
  'archive.completed': ['signing.archive.ready', 'The signed archive of a completed request is ready (`file_id`).'],
  'request.cancelled': ['signing.request.cancelled', 'The request was cancelled, by its sender or because a signer declined.'],
  'request.expired': ['signing.request.expired', 'The deadline passed before every signer signed.'],
} as const satisfies Partial<Record<SigningEventKind, readonly [string, string]>>;

type Published = keyof typeof kinds;

/** The kinds signing declares (`ServiceModule.events`). */
export const SIGNING_EVENT_KINDS: readonly EventKindDeclaration[] = Object.values(kinds).map(([kind, description]) => ({
  kind: eventKind(kind),
  description,
  payload: 'SigningEventData',
  readWith: READ_WITH,
}));

const published = (kind: SigningEventKind): kind is Published => kind in kinds;

interface RequestFacts {
  id: string;
  workspace_id: string;
  title: string;
  status: string;
  signature_method: string;
  private: unknown;
  owner_member_id: string | null;
  created_by_key_id: string | null;
  archive_file_id: string | null;
  signers: number | string;
  signed: number | string;
}

/**
 * Writes the outbox event of a history event of a published kind (others write none), in `sql`, the
 * history event's transaction. The actor is the request's sender (its key and member), so a rule's
 * `notify` to `actor` reaches the member who sent the request.
 */
export async function publishSigningEvent(sql: Sql, e: { requestId: string; kind: SigningEventKind; recipientId?: string | null; at: number }, historyEventId: string): Promise<void> {
  if (!published(e.kind)) return;
  const r = await sql.one<RequestFacts>(
    `SELECT q.id, q.workspace_id, q.title, q.status, q.signature_method, q.private, q.owner_member_id, q.created_by_key_id, q.archive_file_id,
       (SELECT COUNT(*) FROM signing_recipients x WHERE x.request_id = q.id AND x.role <> 'cc') AS signers,
       (SELECT COUNT(*) FROM signing_recipients x WHERE x.request_id = q.id AND x.status = 'signed') AS signed
     FROM signing_requests q WHERE q.id = ?`,
    [e.requestId],
  );
  if (!r) return;
  await emitEvent(sql, {
    kind: eventKind(kinds[e.kind][0]),
    workspaceId: r.workspace_id,
    subjectType: 'signing_request',
    subjectId: r.id,
    private: Boolean(r.private),
    actorKeyId: r.created_by_key_id,
    actorMemberId: r.owner_member_id,
    occurredAt: e.at,
    data: {
      signing_request_id: r.id,
      history_event_id: historyEventId,
      status: r.status,
      title: r.title,
      signature_method: r.signature_method,
      signers: Number(r.signers),
      signed: Number(r.signed),
      recipient_id: e.recipientId ?? null,
      file_id: r.archive_file_id,
    },
  });
}
