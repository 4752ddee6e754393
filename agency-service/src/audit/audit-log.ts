/**
 * The audit trail (table audit_events): every key event, every sub-account
 * creation or deletion, and every console user event (created, disabled,
 * password changed, signed in, sign-in refused, membership removed), with its
 * time, who did it and from which client address. Written in the transaction of the change it records, so
 * one never commits without the other; append-only (the database refuses
 * UPDATE, DELETE and TRUNCATE); never a plaintext key or a hash.
 *
 * Read by the agency it belongs to (its own events and its sub-accounts'),
 * newest first, with the same cursor pagination as every list:
 * GET /v1/agency/audit-events and the console's settings pages.
 */
import type { Pool, PoolClient } from '@scoped/shared/db'
import { isUuid } from '@scoped/shared/db'
import { normalizeAddress } from '@scoped/shared/ip-address'
import type { ListQuery, Page } from '@scoped/shared/pagination'
import { listPage } from '@scoped/shared/pagination'
import type { Scope } from '@scoped/shared/scope'
import type { Role } from '../users/roles.js'
import type { Actor, ActorKind } from './actor.js'

export const auditEventTypes = [
  'key.created',
  'key.rolled',
  'key.revoked',
  'key.deleted',
  'key.updated',
  'key.leaked',
  'sub-account.created',
  'sub-account.updated',
  'sub-account.deleted',
  'user.created',
  'user.updated',
  'user.disabled',
  'user.password-changed',
  'user.signed-in',
  'user.sign-in-refused',
  'membership.added',
  'membership.removed',
  'invitation.created',
  'invitation.accepted',
] as const
export type AuditEventType = (typeof auditEventTypes)[number]

/** The user an event of a user or a membership is about, as they were at the time. */
export interface AuditSubjectUser {
  id: string
  email: string
  /** Their role in the event's agency; null when they had none. */
  role: Role | null
}

export interface NewAuditEvent {
  type: AuditEventType
  actor: Actor
  agencyId: string
  subAccountId: string | null
  keyId?: string | null
  /** The key's name and scope at the time, for readers after it is gone. */
  keyName?: string | null
  scope?: Scope | null
  /** Required for user.* and membership.* events (the database checks it), absent otherwise. */
  user?: AuditSubjectUser | null
  /** How many refusals a coalesced user.sign-in-refused event stands for (users/sign-in-refusals.ts). */
  refusals?: number | null
  /** Required for key.leaked (the database checks it), absent otherwise: where the leak was reported from (leaks/leak-response.ts). */
  leak?: LeakReport | null
  /** For invitation.created: whom, with what role (there is no user yet). */
  invitee?: { email: string; role: Role } | null
  /** The key's hint (sak_live_…xxxx), so the trail matches the key list. */
  keyHint?: string | null
  /** For key.updated: which settings changed (`allowedCidrs`, `rateLimit`, …). */
  changedFields?: readonly string[] | null
}

/** Where a leaked key was reported: GitHub's `source` (`content`, `commit`, …) and URL, or `report` (the public revocation API) and no URL. */
export interface LeakReport {
  source: string
  url: string | null
}

/** One event, in the API's shape. */
export interface AuditEvent {
  id: string
  type: AuditEventType
  at: string
  actor: { kind: ActorKind; id: string }
  keyId: string | null
  subAccountId: string | null
  clientAddress: string | null
}

/** One event with what the console shows beside it (the API item keeps the contract's fields). */
export interface AuditRecord extends AuditEvent {
  keyName: string | null
  scope: Scope | null
  user: AuditSubjectUser | null
  /** How many refusals a coalesced user.sign-in-refused event stands for; null on every other event. */
  refusals: number | null
  /** For an update: the before and after of each column that changed (never a hash or a secret); null otherwise. */
  changes: AuditChanges | null
  /**
   * The database login that wrote the change (null before migration 015): what
   * the database itself vouches for, where the actor is what the writer declared.
   */
  databaseLogin: string | null
  /** For invitation.created, the email and role invited. */
  invitee: { email: string; role: Role | null } | null
  /** The key's hint at the time (sak_live_…xxxx); null on events written before it was kept. */
  keyHint: string | null
  /** For key.updated, which settings changed; null when not recorded (then `changes` says). */
  changedFields: string[] | null
}

export type AuditChanges = Record<string, { before: unknown; after: unknown }>

export interface AuditFilters {
  type?: AuditEventType
  keyId?: string
  subAccountId?: string
  /** From this instant on (inclusive). */
  since?: Date
  /** Before this instant (exclusive). */
  until?: Date
}

/** Whose trail: an agency's (its own events and its sub-accounts'), or one sub-account's. */
export type AuditOwner = { agencyId: string } | { subAccountId: string }

interface AuditRow {
  id: string
  type: AuditEventType
  at: Date
  actor_kind: ActorKind
  actor_id: string
  sub_account_id: string | null
  key_id: string | null
  key_name: string | null
  scope: Scope | null
  client_address: string | null
  user_id: string | null
  user_email: string | null
  role: Role | null
  refusals: number | null
  changes: AuditChanges | null
  database_login: string | null
  key_hint: string | null
  changed_fields: string[] | null
}

const COLUMNS =
  'id, type, at, actor_kind, actor_id, sub_account_id, key_id, key_name, scope, host(client_address) AS client_address, user_id, user_email, role, refusals, changes, database_login, key_hint, changed_fields'

function toRecord(row: AuditRow): AuditRecord {
  return {
    id: row.id,
    type: row.type,
    at: row.at.toISOString(),
    actor: { kind: row.actor_kind, id: row.actor_id },
    keyId: row.key_id,
    subAccountId: row.sub_account_id,
    clientAddress: row.client_address === null ? null : (normalizeAddress(row.client_address) ?? row.client_address),
    keyName: row.key_name,
    scope: row.scope,
    user: row.user_id === null || row.user_email === null ? null : { id: row.user_id, email: row.user_email, role: row.role },
    refusals: row.refusals,
    changes: row.changes,
    databaseLogin: row.database_login,
    invitee: row.user_id === null && row.user_email !== null ? { email: row.user_email, role: row.role } : null,
    keyHint: row.key_hint,
    changedFields: row.changed_fields,
  }
}

/** The contract's item: exactly these fields. */
export function toAuditEvent(record: AuditRecord): AuditEvent {
  const { id, type, at, actor, keyId, subAccountId, clientAddress } = record
  return { id, type, at, actor, keyId, subAccountId, clientAddress }
}

/**
 * Declares one event of the caller's transaction (audit_declare, migration
 * 015), and makes its actor the transaction's when it has none yet. The
 * database writes it at the commit: with the table change it stands for
 * (key.*, sub-account.*, user.* but sign-in-refused, membership.*), whose
 * trigger finds the declaration of its type and subject, made before or
 * after the change, and uses its actor and fields (one event per change,
 * however many declare it); on its own for an event with no table change
 * (user.sign-in-refused). The services cannot insert into the trail.
 */
export async function recordAuditEvent(client: PoolClient, event: NewAuditEvent): Promise<void> {
  await client.query(`SELECT audit_declare($1::jsonb)`, [
    JSON.stringify({
      type: event.type,
      actor_kind: event.actor.kind,
      actor_id: event.actor.id,
      client_address: event.actor.clientAddress,
      agency_id: event.agencyId,
      sub_account_id: event.subAccountId,
      key_id: event.keyId ?? null,
      key_name: event.keyName ?? null,
      scope: event.scope ?? null,
      user_id: event.user?.id ?? null,
      user_email: event.user?.email ?? event.invitee?.email ?? null,
      role: event.user?.role ?? event.invitee?.role ?? null,
      refusals: event.refusals ?? null,
      leak_source: event.leak?.source ?? null,
      leak_url: event.leak?.url ?? null,
      key_hint: event.keyHint ?? null,
      changed_fields: event.changedFields ?? null,
    }),
  ])
}

/**
 * Names who is changing things in the caller's transaction, for the events of
 * changes no declaration names (a rename, say); without it, and without any
 * declaration, the database records the change as `unattributed`.
 */
export async function setAuditActor(client: PoolClient, actor: Actor): Promise<void> {
  const value = JSON.stringify({ actor_kind: actor.kind, actor_id: actor.id, client_address: actor.clientAddress })
  await client.query(`SELECT set_config('scoped.actor', $1, true)`, [value])
}

/** The audit trail, read over the pool (events are written inside their own transactions: recordAuditEvent). */
export class AuditLog {
  constructor(private readonly pool: Pool) {}

  /** One page of a trail, newest first, filtered. */
  async list(owner: AuditOwner, filters: AuditFilters, query: ListQuery): Promise<Page<AuditRecord>> {
    const where: string[] = []
    const values: unknown[] = []
    const add = (sql: (parameter: string) => string, value: unknown): void => {
      values.push(value)
      where.push(sql(`$${values.length}`))
    }
    if ('agencyId' in owner) add((p) => `agency_id = ${p}`, owner.agencyId)
    else add((p) => `sub_account_id = ${p}`, owner.subAccountId)
    if (filters.type !== undefined) add((p) => `type = ${p}`, filters.type)
    if (filters.keyId !== undefined) add((p) => `key_id = ${p}`, filters.keyId)
    if (filters.subAccountId !== undefined) add((p) => `sub_account_id = ${p}`, filters.subAccountId)
    if (filters.since !== undefined) add((p) => `at >= ${p}`, filters.since)
    if (filters.until !== undefined) add((p) => `at < ${p}`, filters.until)
    return listPage(this.pool, { table: 'audit_events', columns: COLUMNS, where, values, timeColumn: 'at', order: 'desc', query, toItem: toRecord })
  }

  /**
   * Names for the ids a page of events mentions (a user's email, a key's or a
   * sub-account's name), only within the agency: users who belong to it, its
   * keys, its sub-accounts. A deleted key or sub-account has no name any more.
   */
  async names(records: ReadonlyArray<Pick<AuditRecord, 'actor' | 'keyId' | 'subAccountId'>>, agencyId: string): Promise<AuditNames> {
    const userIds = [...new Set(records.filter((r) => r.actor.kind === 'user' && isUuid(r.actor.id)).map((r) => r.actor.id))]
    const keyIds = [...new Set(records.flatMap((r) => [r.keyId, r.actor.kind === 'key' ? r.actor.id : null]).filter((id): id is string => isUuid(id)))]
    const subIds = [...new Set(records.map((r) => r.subAccountId).filter((id): id is string => id !== null))]
    const [users, keys, subs] = await Promise.all([
      this.pool.query<{ id: string; email: string }>(
        `SELECT u.id, u.email FROM users u JOIN agency_memberships m ON m.user_id = u.id AND m.agency_id = $2 WHERE u.id = ANY($1::uuid[])`,
        [userIds, agencyId],
      ),
      this.pool.query<{ id: string; name: string }>(`SELECT id, name FROM api_keys WHERE id = ANY($1::uuid[]) AND agency_id = $2`, [keyIds, agencyId]),
      this.pool.query<{ id: string; name: string }>(`SELECT id, name FROM sub_accounts WHERE id = ANY($1::uuid[]) AND agency_id = $2`, [subIds, agencyId]),
    ])
    return {
      users: new Map(users.rows.map((row) => [row.id, row.email])),
      keys: new Map(keys.rows.map((row) => [row.id, row.name])),
      subAccounts: new Map(subs.rows.map((row) => [row.id, row.name])),
    }
  }
}

/** Names for the ids an event mentions, looked up for a page of the trail. */
export interface AuditNames {
  users: ReadonlyMap<string, string>
  keys: ReadonlyMap<string, string>
  subAccounts: ReadonlyMap<string, string>
}
