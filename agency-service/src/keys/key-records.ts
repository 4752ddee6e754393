/**
 * A key as stored (KeyRow, the columns every read selects) and the shapes it
 * leaves in: the summary the console and the CLI read, the API's item (never
 * a plaintext or a hash), and a new key with its plaintext, shown once.
 */
import type { PoolClient } from '@scoped/shared/db'
import { canonicalCidrs, normalizeAddress } from '@scoped/shared/ip-address'
import type { KeyInvalidation } from '@scoped/shared/key-state'
import type { RateLimit } from '@scoped/shared/rate-limit'
import type { Scope } from '@scoped/shared/scope'
import type { Actor } from '../audit/actor.js'
import type { AuditEventType } from '../audit/audit-log.js'
import { recordAuditEvent } from '../audit/audit-log.js'
import type { KeyStatus } from './key-status.js'
import { countsTowardLimit, keyStatus } from './key-status.js'

export interface KeyRow {
  id: string
  name: string
  scope: Scope
  hint: string
  agency_id: string
  sub_account_id: string | null
  key_hash: string
  created_at: Date
  last_used_at: Date | null
  last_used_ip: string | null
  revoked_at: Date | null
  expires_at: Date | null
  replaces: string | null
  replaced_by: string | null
  allowed_cidrs: string[]
  rate_limit_rate: number | null
  rate_limit_burst: number | null
  /** Sorted, each once; null: unrestricted (migration 016). */
  permissions: string[] | null
}

/** What every read of a key selects (allowlists as text: node-postgres does not read cidr[]). */
export const KEY_COLUMNS = `id, name, scope, hint, agency_id, sub_account_id, key_hash, created_at, last_used_at, host(last_used_ip) AS last_used_ip,
  revoked_at, expires_at, replaces, replaced_by, allowed_cidrs::text[] AS allowed_cidrs, rate_limit_rate, rate_limit_burst, permissions`

export interface CreatedKey {
  id: string
  name: string
  scope: Scope
  /** The plaintext, shown this once. */
  key: string
  agencyId: string
  subAccountId: string | null
  createdAt: string
  expiresAt: string | null
  allowedCidrs: string[]
  /** The key's own rate limit, or null: the routes file's. */
  rateLimit: RateLimit | null
  /** The key's permissions, sorted, or null: unrestricted (every permission of its scope). */
  permissions: string[] | null
  /** The key this one replaced (a roll), or null. */
  replaces: string | null
  /**
   * Set when not every gateway replica confirmed knowing the new key (or, for
   * a roll, dropping the old key's cached state) in time: what went wrong.
   * The key is returned all the same: its plaintext exists nowhere else.
   */
  unconfirmed?: string
}

export interface KeySummary {
  id: string
  name: string
  scope: Scope
  status: KeyStatus
  hint: string
  createdAt: string
  lastUsedAt: string | null
  /** The client address of the last use, or null. */
  lastUsedIp: string | null
  revokedAt: string | null
  /** When the key stops working (its expiry, or the end of a roll's grace period), or null. */
  expiresAt: string | null
  /** The key that replaced this one, or null. */
  replacedBy: string | null
  /** The key this one replaced, or null. */
  replaces: string | null
  /** Client addresses the key may be used from; empty: any. */
  allowedCidrs: string[]
  /** The key's own rate limit (replacing the route's `key` limit on every route of its scope), or null: the routes file's. */
  rateLimit: RateLimit | null
  /** Its permissions, sorted, or null: unrestricted (every permission of its scope). */
  permissions: string[] | null
  /** Whether it takes one of the tenant's 25 places. */
  countsTowardLimit: boolean
}

/** A key in the API's shape (never a plaintext or a hash); `rateLimit` only when the key has its own. */
export interface KeyItem {
  id: string
  name: string
  scope: Scope
  status: KeyStatus
  createdAt: string
  lastUsedAt: string | null
  lastUsedIp: string | null
  revokedAt: string | null
  expiresAt: string | null
  replacedBy: string | null
  allowedCidrs: string[]
  /** Sorted, or null: unrestricted. */
  permissions: string[] | null
  rateLimit?: RateLimit
}

export function keyItem(key: KeySummary): KeyItem {
  const { id, name, scope, status, createdAt, lastUsedAt, lastUsedIp, revokedAt, expiresAt, replacedBy, allowedCidrs, permissions, rateLimit } = key
  const item: KeyItem = { id, name, scope, status, createdAt, lastUsedAt, lastUsedIp, revokedAt, expiresAt, replacedBy, allowedCidrs, permissions }
  if (rateLimit !== null) item.rateLimit = rateLimit
  return item
}

function iso(date: Date | null): string | null {
  return date === null ? null : date.toISOString()
}

export function rateLimitOf(row: KeyRow): RateLimit | null {
  return row.rate_limit_rate === null || row.rate_limit_burst === null ? null : { rate: row.rate_limit_rate, burst: row.rate_limit_burst }
}

export function summary(row: KeyRow, nowMs: number): KeySummary {
  const lifecycle = { revokedAt: row.revoked_at, expiresAt: row.expires_at, replacedBy: row.replaced_by }
  return {
    id: row.id,
    name: row.name,
    scope: row.scope,
    status: keyStatus(lifecycle, nowMs),
    hint: row.hint,
    createdAt: row.created_at.toISOString(),
    lastUsedAt: iso(row.last_used_at),
    lastUsedIp: row.last_used_ip === null ? null : (normalizeAddress(row.last_used_ip) ?? row.last_used_ip),
    revokedAt: iso(row.revoked_at),
    expiresAt: iso(row.expires_at),
    replacedBy: row.replaced_by,
    replaces: row.replaces,
    allowedCidrs: canonicalCidrs(row.allowed_cidrs),
    rateLimit: rateLimitOf(row),
    permissions: row.permissions,
    countsTowardLimit: countsTowardLimit(lifecycle, nowMs),
  }
}

export function created(row: KeyRow, key: string): CreatedKey {
  return {
    id: row.id,
    name: row.name,
    scope: row.scope,
    key,
    agencyId: row.agency_id,
    subAccountId: row.sub_account_id,
    createdAt: row.created_at.toISOString(),
    expiresAt: iso(row.expires_at),
    allowedCidrs: canonicalCidrs(row.allowed_cidrs),
    rateLimit: rateLimitOf(row),
    permissions: row.permissions,
    replaces: row.replaces,
  }
}

/** The audit event of a change to the key in `row`, inside the change's transaction; `changedFields` for key.updated. */
export async function recordKeyEvent(client: PoolClient, row: KeyRow, type: AuditEventType, actor: Actor, changedFields?: readonly string[]): Promise<void> {
  await recordAuditEvent(client, {
    type,
    actor,
    agencyId: row.agency_id,
    subAccountId: row.sub_account_id,
    keyId: row.id,
    keyName: row.name,
    scope: row.scope,
    keyHint: row.hint,
    changedFields: changedFields ?? null,
  })
}

/**
 * A revoke's invalidation, naming the key's owner: the revoker's sealed Redis marker carries it, so a
 * gateway that meets the marker counts the key's refusals for its tenant without asking Postgres.
 */
export function revokedInvalidation(row: KeyRow): KeyInvalidation {
  return {
    hash: row.key_hash,
    state: 'revoked',
    tenant: { scope: row.scope, agencyId: row.agency_id, subAccountId: row.sub_account_id, keyId: row.id },
  }
}
