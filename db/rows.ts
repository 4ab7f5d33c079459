/** Row types: one per table, as the database returns them (SQLite booleans arrive as 0/1). */

export type DbBoolean = boolean | 0 | 1;

export interface DbWorkspaceRow {
  id: string;
  name: string;
  auth_version: number;
  /** Whether the workspace's API keys may be made and used (handlers/keys/pages.ts). */
  api_key_access: ApiKeyAccess;
  created_at: number;
}

/** `on`; `off`: no new keys, existing ones keep working; `stopped`: no new keys and existing ones are refused (403). */
export type ApiKeyAccess = 'on' | 'off' | 'stopped';

import type { MemberRole } from '../generated/catalogue.ts';

/** A member's role: the keys of x-service-member-roles in the document. */
export type { MemberRole };

export interface DbMemberRow {
  id: string;
  workspace_id: string;
  name: string;
  email: string;
  role: MemberRole;
  disabled_at: number | null;
  created_at: number;
}

export interface DbBundleRow {
  id: string;
  workspace_id: string;
  name: string;
  domain: string;
  created_at: number;
}

export interface DbAppRow {
  id: string;
  workspace_id: string;
  app_key: string;
  name: string;
  /** JSON array of qualified resource types. */
  resource_types: string;
  created_at: number;
}

export type Delegation = 'none' | 'selected' | 'all';

export interface DbApiKeyRow {
  id: string;
  workspace_id: string;
  name: string;
  secret_hash: string;
  created_by: string | null;
  replaces_key_id: string | null;
  /** JSON array of operation ids (namespace grants expanded when the key was made). */
  operations: string;
  /** JSON object: resource type -> ["read", "write"]. */
  resources: string;
  delegation: Delegation;
  created_at: number;
  revoked_at: number | null;
  /** When the key was last used; written at most once a minute per key (null: never). */
  last_used_at: number | null;
}

export interface DbApiKeyDelegateRow {
  key_id: string;
  member_id: string;
}

/** The columns every record table (server/recordKit.ts) has; each adds typed columns mirrored from `data`. */
export interface DbRecordRow {
  id: string;
  workspace_id: string;
  /** The member a private record belongs to; null for a shared record. */
  private_owner_id: string | null;
  /** JSON object: the record's stored `data`. */
  data: string;
  created_by: string | null;
  created_at: number;
  updated_at: number;
}

export interface DbRecordEventRow {
  seq: number;
  id: string;
  workspace_id: string;
  /** The event's kind (server/events.ts: record changes, or a kind a module declared). */
  type: string;
  resource_type: string;
  record_id: string;
  private: DbBoolean;
  /** JSON array of changed `data` keys (updates only). */
  changed_fields: string | null;
  actor_key_id: string | null;
  actor_member_id: string | null;
  occurred_at: number;
  /** The automation run whose action made this change (null for API writes), its rule (`app_id/rule_id`) and chain depth. */
  cause_run_id: string | null;
  cause_rule: string | null;
  cause_depth: number | null;
  /** JSON object: the payload of an event of a module's declared kind (null for record changes). */
  data: string | null;
}

export interface DbIdempotencyReceiptRow {
  scope: string;
  idem_key: string;
  operation_id: string;
  fingerprint: string;
  locked_at: number | null;
  completed_at: number | null;
  status_code: number | null;
  response_body: string | null;
  created_at: number;
}

export interface DbRateLimitRow {
  bucket: string;
  tat: number;
  allowed: DbBoolean;
  auth_version: number;
}

export interface DbJobRow {
  id: number;
  kind: string;
  dedupe_key: string | null;
  payload: string;
  run_at: number;
  attempts: number;
  locked_by: string | null;
  locked_until: number | null;
  last_error: string | null;
}
