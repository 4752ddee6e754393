/**
 * The key lifecycle (spec §3, and past it): create (with an optional expiry,
 * client-address allowlist and rate limit of its own), list, roll with a
 * grace period, change the allowlist or the rate limit, revoke, delete. The CLI, the console and the API all go through
 * here, so the rules, the limit, the messages and the immediate effect are
 * the same whichever of them is used.
 *
 * - At most 25 keys per agency (agency-scope keys) and per sub-account count
 *   toward the limit: active ones that were not rolled (key-status.ts),
 *   counted under a row lock on the owning tenant, so concurrent creations
 *   cannot overshoot. A roll never fails on the limit: the old key stops
 *   counting as the new one starts.
 * - The plaintext is returned by `create` and `roll` once and kept nowhere.
 * - Every change commits first, whatever Redis is doing, with its audit event
 *   in the same transaction. Revoke, delete, roll (the old key's expiry is
 *   brought forward) and an allowlist or rate-limit change then tell every gateway replica
 *   and wait for each to confirm (see @scoped/shared/key-invalidation). When
 *   that cannot be confirmed within its deadline they throw
 *   InvalidationNotConfirmed (a 503 that says the change was saved and what
 *   was not confirmed); the key is refused everywhere within the stated
 *   bound all the same.
 */
import type { Pool, PoolClient } from '@scoped/shared/db'
import { inTransaction } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { canonicalCidrs, normalizeAddress, requireCidrList } from '@scoped/shared/ip-address'
import { generateKey, hashKey, keyHint } from '@scoped/shared/keys'
import type { RateLimit } from '@scoped/shared/rate-limit'
import { requireRateLimit, sameRateLimit } from '@scoped/shared/rate-limit'
import type { Scope } from '@scoped/shared/scope'
import type { InvalidationReport, KeyInvalidator } from '@scoped/shared/key-invalidation'
import { InvalidationNotConfirmed } from '@scoped/shared/key-invalidation'
import type { KeyInvalidation } from '@scoped/shared/key-state'
import { currentTransactionId } from '@scoped/shared/key-store'
import type { ListQuery, Page } from '@scoped/shared/pagination'
import { listPage } from '@scoped/shared/pagination'
import { requireName, requireUuid } from '@scoped/shared/validation'
import type { ActorInput } from '../audit/actor.js'
import { actorText, toActor } from '../audit/actor.js'
import type { AuditEventType } from '../audit/audit-log.js'
import { recordAuditEvent } from '../audit/audit-log.js'
import type { KeyStatus } from './key-status.js'
import { COUNTED_KEY_SQL, countsTowardLimit, keyStatus, MAX_GRACE_SECONDS } from './key-status.js'

export const ACTIVE_KEY_LIMIT = 25
export const KEY_NAME_MAX_LENGTH = 100
export { MAX_GRACE_SECONDS }

/** The tenant that owns a key: an agency (AGENCY scope) or a sub-account (SUB-ACCOUNT scope). */
export type KeyOwner = { scope: 'AGENCY'; agencyId: string } | { scope: 'SUB-ACCOUNT'; subAccountId: string }

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
  /** The key this one replaced (a roll), or null. */
  replaces: string | null
}

/** A rolled key: the new key, and the old one as it is now (active until the end of its grace period). */
export interface RolledKey extends CreatedKey {
  replaces: string
  old: KeySummary
  /**
   * Set when not every gateway replica confirmed dropping what it cached
   * about the old key: what the message of a revoke would say. The roll
   * itself committed, and the new key's plaintext must still be shown.
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
  rateLimit?: RateLimit
}

export function keyItem(key: KeySummary): KeyItem {
  const { id, name, scope, status, createdAt, lastUsedAt, lastUsedIp, revokedAt, expiresAt, replacedBy, allowedCidrs, rateLimit } = key
  const item: KeyItem = { id, name, scope, status, createdAt, lastUsedAt, lastUsedIp, revokedAt, expiresAt, replacedBy, allowedCidrs }
  if (rateLimit !== null) item.rateLimit = rateLimit
  return item
}

/** A rate limit as given by a caller: checked by the service (requireRateLimit), so any value may come in. */
export interface RateLimitInput {
  rate: unknown
  burst: unknown
}

/** How the caller's input names the fields, for messages (`body.expiresAt`, `--allow-cidr`, `--rate`). */
export interface KeyFieldNames {
  expiresAt?: string
  allowedCidrs?: string
  rate?: string
  burst?: string
}

/** A change of a key: what is given changes, what is left out stays. */
export interface KeyChanges {
  /** The new allowlist; empty: any address. */
  allowedCidrs?: unknown
  /** The key's own rate limit; null: back to the routes file's. */
  rateLimit?: RateLimitInput | null
}

export interface NewKeyOptions {
  /** When the key stops working; must be in the future. Undefined or null: never. */
  expiresAt?: Date | null
  /** CIDR blocks (or addresses) the key may be used from; undefined or empty: any address. */
  allowedCidrs?: unknown
  /** The key's own rate limit; undefined or null: the routes file's. */
  rateLimit?: RateLimitInput | null
  /** How the caller's input names these, for messages (`body.expiresAt`, `--allow-cidr`, `--rate`). */
  fields?: KeyFieldNames
}

interface KeyRow {
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
}

/** What every read of a key selects (allowlists as text: node-postgres does not read cidr[]). */
const KEY_COLUMNS = `id, name, scope, hint, agency_id, sub_account_id, key_hash, created_at, last_used_at, host(last_used_ip) AS last_used_ip,
  revoked_at, expires_at, replaces, replaced_by, allowed_cidrs::text[] AS allowed_cidrs, rate_limit_rate, rate_limit_burst`

export interface LifecycleResult {
  id: string
  invalidation: InvalidationReport
}

/** Keys ended inside a caller's transaction, to pass to `invalidate` once that transaction has committed. */
export interface PendingInvalidation {
  keys: KeyInvalidation[]
  /** The transaction that ended them. */
  xid: string
}

function iso(date: Date | null): string | null {
  return date === null ? null : date.toISOString()
}

function rateLimitOf(row: KeyRow): RateLimit | null {
  return row.rate_limit_rate === null || row.rate_limit_burst === null ? null : { rate: row.rate_limit_rate, burst: row.rate_limit_burst }
}

function checkedRateLimit(input: RateLimitInput | null | undefined, fields: KeyFieldNames | undefined): RateLimit | null {
  if (input === undefined || input === null) return null
  return requireRateLimit(input.rate, input.burst, { rate: fields?.rate ?? 'rateLimit.rate', burst: fields?.burst ?? 'rateLimit.burst' })
}

function summary(row: KeyRow, nowMs: number): KeySummary {
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
    countsTowardLimit: countsTowardLimit(lifecycle, nowMs),
  }
}

/** SQL that limits a statement to one owner's keys; `$n` is the owner id. */
function ownerCondition(owner: KeyOwner, parameter: number): string {
  return owner.scope === 'AGENCY' ? `scope = 'AGENCY' AND agency_id = $${parameter}` : `sub_account_id = $${parameter}`
}

function ownerId(owner: KeyOwner): string {
  return owner.scope === 'AGENCY' ? owner.agencyId : owner.subAccountId
}

function ownerOfRow(row: KeyRow): KeyOwner {
  return row.scope === 'AGENCY' ? { scope: 'AGENCY', agencyId: row.agency_id } : { scope: 'SUB-ACCOUNT', subAccountId: row.sub_account_id! }
}

function checkOwner(owner: KeyOwner): void {
  if (owner.scope === 'AGENCY') requireUuid(owner.agencyId, 'agency id')
  else requireUuid(owner.subAccountId, 'sub-account id')
}

/** A roll's grace period in whole seconds, 0 to 30 days; anything else is a 400. */
export function requireGraceSeconds(value: unknown, field = 'graceSeconds'): number {
  if (value === undefined || value === null) return 0
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_GRACE_SECONDS) {
    throw new ApiError('badRequest', `${field} must be a whole number of seconds from 0 to ${MAX_GRACE_SECONDS} (30 days)`)
  }
  return value
}

export class KeyService {
  private readonly clock: () => number

  constructor(
    private readonly pool: Pool,
    private readonly invalidator: KeyInvalidator,
    options: { now?: () => number } = {},
  ) {
    this.clock = options.now ?? (() => Date.now())
  }

  /** This service's clock (epoch ms): the one key statuses and expiries are judged by. */
  now(): number {
    return this.clock()
  }

  async create(owner: KeyOwner, name: unknown, actor: ActorInput, options: NewKeyOptions = {}): Promise<CreatedKey> {
    checkOwner(owner)
    const keyName = requireName(name, 'name', KEY_NAME_MAX_LENGTH)
    const expiresAt = options.expiresAt ?? null
    if (expiresAt !== null && !(expiresAt.getTime() > this.clock()))
      throw new ApiError('badRequest', `${options.fields?.expiresAt ?? 'expiresAt'} must be in the future`)
    const allowedCidrs =
      options.allowedCidrs === undefined || options.allowedCidrs === null
        ? []
        : requireCidrList(options.allowedCidrs, options.fields?.allowedCidrs ?? 'allowedCidrs')
    const rateLimit = checkedRateLimit(options.rateLimit, options.fields)
    const who = toActor(actor)
    return inTransaction(this.pool, async (client) => {
      const agencyId = await this.lockOwner(client, owner)
      const { rows } = await client.query<{ active: number }>(
        `SELECT count(*)::int AS active FROM api_keys WHERE ${ownerCondition(owner, 1)} AND ${COUNTED_KEY_SQL}`,
        [ownerId(owner)],
      )
      if ((rows[0]?.active ?? 0) >= ACTIVE_KEY_LIMIT) throw new ApiError('keyLimitReached')

      const key = generateKey()
      const subAccountId = owner.scope === 'SUB-ACCOUNT' ? owner.subAccountId : null
      const inserted = await client.query<KeyRow>(
        `INSERT INTO api_keys (scope, agency_id, sub_account_id, name, key_hash, hint, created_by, expires_at, allowed_cidrs, rate_limit_rate, rate_limit_burst)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::cidr[], $10, $11) RETURNING ${KEY_COLUMNS}`,
        [
          owner.scope,
          agencyId,
          subAccountId,
          keyName,
          hashKey(key),
          keyHint(key),
          actorText(who),
          expiresAt,
          allowedCidrs,
          rateLimit?.rate ?? null,
          rateLimit?.burst ?? null,
        ],
      )
      const row = inserted.rows[0]!
      await this.recordEvent(client, row, 'key.created', who)
      return created(row, key)
    })
  }

  /** Newest first; never a plaintext or a hash. */
  async list(owner: KeyOwner): Promise<KeySummary[]> {
    checkOwner(owner)
    await this.requireOwner(this.pool, owner)
    const { rows } = await this.pool.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE ${ownerCondition(owner, 1)} ORDER BY created_at DESC, id DESC`, [
      ownerId(owner),
    ])
    const now = this.clock()
    return rows.map((row) => summary(row, now))
  }

  /** One page of a sub-account's keys, in the API's list order (oldest first) and shape. */
  async listPage(subAccountId: string, query: ListQuery): Promise<Page<KeyItem>> {
    const now = this.clock()
    return listPage(this.pool, {
      table: 'api_keys',
      columns: KEY_COLUMNS,
      where: ['sub_account_id = $1'],
      values: [subAccountId],
      query,
      toItem: (row: KeyRow) => keyItem(summary(row, now)),
    })
  }

  /** One key, if it exists and (when `owner` is given) belongs to that owner. */
  async find(id: string, owner?: KeyOwner): Promise<KeySummary | undefined> {
    const row = await this.findRow(this.pool, id, owner)
    return row && summary(row, this.clock())
  }

  async revoke(id: string, actor: ActorInput, owner?: KeyOwner): Promise<LifecycleResult> {
    const who = toActor(actor)
    const { row, xid } = await inTransaction(this.pool, async (client) => {
      const found = await this.findRow(client, id, owner, true)
      if (found === undefined) throw new ApiError('keyNotFound')
      if (found.revoked_at === null) {
        await client.query(`UPDATE api_keys SET revoked_at = now(), revoked_by = $2 WHERE id = $1`, [id, actorText(who)])
        await this.recordEvent(client, found, 'key.revoked', who)
      }
      return { row: found, xid: await currentTransactionId(client) }
    })
    const invalidation = await this.invalidate({ keys: [{ hash: row.key_hash, state: 'revoked' }], xid }, 'The key was revoked')
    return { id: row.id, invalidation }
  }

  async delete(id: string, actor: ActorInput, owner?: KeyOwner): Promise<LifecycleResult> {
    const who = toActor(actor)
    const { row, xid } = await inTransaction(this.pool, async (client) => {
      const found = await this.findRow(client, id, owner, true)
      if (found === undefined) throw new ApiError('keyNotFound')
      await client.query(`DELETE FROM api_keys WHERE id = $1`, [id])
      await this.recordEvent(client, found, 'key.deleted', who)
      return { row: found, xid: await currentTransactionId(client) }
    })
    const invalidation = await this.invalidate({ keys: [{ hash: row.key_hash, state: 'deleted' }], xid }, 'The key was deleted')
    return { id: row.id, invalidation }
  }

  /**
   * Rolls a key: a new key with the same name, scope, tenant, allowlist and rate limit,
   * which records the key it replaced; the old key keeps working for
   * `graceSeconds` (0, the default: not at all), then is refused like an
   * expired key, on every replica at that instant. Its expiry is only ever
   * brought forward. While in its grace period the old key does not count
   * toward the limit and cannot be rolled again; a revoked or expired key
   * cannot be rolled. Returns once every gateway replica has dropped what it
   * cached about the old key; when that cannot be confirmed it still returns
   * the new key (its plaintext exists nowhere else), with `unconfirmed` saying
   * so, and every replica refuses the old key within the stated bound of its
   * new expiry all the same.
   */
  async roll(id: string, actor: ActorInput, owner?: KeyOwner, options: { graceSeconds?: unknown } = {}): Promise<RolledKey> {
    const graceSeconds = requireGraceSeconds(options.graceSeconds)
    const who = toActor(actor)
    const { result, hash, xid } = await inTransaction(this.pool, async (client) => {
      const seen = await this.findRow(client, id, owner)
      if (seen === undefined) throw new ApiError('keyNotFound')
      // The tenant first, then the key: the order sub-account deletion locks in.
      await this.lockOwner(client, ownerOfRow(seen))
      const old = await this.findRow(client, id, owner, true)
      if (old === undefined) throw new ApiError('keyNotFound')
      if (old.revoked_at !== null) throw new ApiError('badRequest', 'A revoked key cannot be rolled')
      if (old.replaced_by !== null) throw new ApiError('badRequest', 'This key was already rolled; roll the key that replaced it instead')
      if (old.expires_at !== null && old.expires_at.getTime() <= this.clock()) throw new ApiError('badRequest', 'An expired key cannot be rolled')

      const key = generateKey()
      const inserted = await client.query<KeyRow>(
        `INSERT INTO api_keys (scope, agency_id, sub_account_id, name, key_hash, hint, created_by, allowed_cidrs, rate_limit_rate, rate_limit_burst, replaces)
         SELECT scope, agency_id, sub_account_id, name, $2, $3, $4, allowed_cidrs, rate_limit_rate, rate_limit_burst, id FROM api_keys WHERE id = $1
         RETURNING ${KEY_COLUMNS}`,
        [old.id, hashKey(key), keyHint(key), actorText(who)],
      )
      const fresh = inserted.rows[0]!
      const updated = await client.query<KeyRow>(
        `UPDATE api_keys SET replaced_by = $2,
                expires_at = LEAST(COALESCE(expires_at, 'infinity'::timestamptz), now() + $3 * interval '1 second')
          WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
        [old.id, fresh.id, graceSeconds],
      )
      await this.recordEvent(client, fresh, 'key.created', who)
      await this.recordEvent(client, old, 'key.rolled', who)
      const rolled: RolledKey = { ...created(fresh, key), replaces: old.id, old: summary(updated.rows[0]!, this.clock()) }
      return { result: rolled, hash: old.key_hash, xid: await currentTransactionId(client) }
    })
    try {
      await this.invalidate({ keys: [{ hash, state: 'changed' }], xid }, 'The key was rolled')
    } catch (error) {
      if (!(error instanceof InvalidationNotConfirmed)) throw error
      result.unconfirmed = error.message
    }
    return result
  }

  /**
   * Replaces a key's allowlist (empty: any address). Refused for a revoked or
   * expired key. Returns once every gateway replica has dropped what it
   * cached about the key, so the next request is judged by the new list.
   */
  async updateAllowedCidrs(id: string, actor: ActorInput, allowedCidrs: unknown, owner?: KeyOwner, field = 'allowedCidrs'): Promise<KeySummary> {
    return this.update(id, actor, { allowedCidrs }, owner, { allowedCidrs: field })
  }

  /**
   * Changes a key's allowlist, its own rate limit (null: back to the route
   * defaults), or both, in one transaction with one `key.updated` event
   * (none when nothing changed). Refused for a revoked or expired key.
   * Returns once every gateway replica has dropped what it cached about the
   * key, so the next request is judged by the new list and counted against
   * the new limit.
   */
  async update(id: string, actor: ActorInput, changes: KeyChanges, owner?: KeyOwner, fields: KeyFieldNames = {}): Promise<KeySummary> {
    const cidrs = changes.allowedCidrs === undefined ? undefined : requireCidrList(changes.allowedCidrs, fields.allowedCidrs ?? 'allowedCidrs')
    const rateLimit = changes.rateLimit === undefined ? undefined : checkedRateLimit(changes.rateLimit, fields)
    if (cidrs === undefined && rateLimit === undefined) throw new ApiError('badRequest', 'Nothing to change')
    const who = toActor(actor)
    const { row, changed, xid } = await inTransaction(this.pool, async (client) => {
      const found = await this.findRow(client, id, owner, true)
      if (found === undefined) throw new ApiError('keyNotFound')
      const status = keyStatus({ revokedAt: found.revoked_at, expiresAt: found.expires_at }, this.clock())
      if (status !== 'active') {
        const what = cidrs !== undefined ? 'The addresses' : 'The rate limit'
        throw new ApiError('badRequest', `${what} of ${status === 'revoked' ? 'a revoked' : 'an expired'} key cannot be changed`)
      }
      const { rows } = await client.query<KeyRow>(
        `UPDATE api_keys
            SET allowed_cidrs = CASE WHEN $2 THEN $3::cidr[] ELSE allowed_cidrs END,
                rate_limit_rate = CASE WHEN $4 THEN $5::float8 ELSE rate_limit_rate END,
                rate_limit_burst = CASE WHEN $4 THEN $6::int ELSE rate_limit_burst END
          WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
        [id, cidrs !== undefined, cidrs ?? [], rateLimit !== undefined, rateLimit?.rate ?? null, rateLimit?.burst ?? null],
      )
      const updated = rows[0]!
      const isChange =
        canonicalCidrs(found.allowed_cidrs).join(',') !== canonicalCidrs(updated.allowed_cidrs).join(',') ||
        !sameRateLimit(rateLimitOf(found), rateLimitOf(updated))
      if (isChange) await this.recordEvent(client, updated, 'key.updated', who)
      return { row: updated, changed: isChange, xid: await currentTransactionId(client) }
    })
    if (changed)
      await this.invalidate({ keys: [{ hash: row.key_hash, state: 'changed' }], xid }, invalidationWhat(cidrs !== undefined, rateLimit !== undefined))
    return summary(row, this.clock())
  }

  /**
   * Deletes every key of a sub-account inside the caller's transaction (the
   * one that deletes the sub-account). The caller must pass the returned
   * invalidations to `invalidate` once that transaction has committed.
   */
  async deleteAllOfSubAccount(client: PoolClient, subAccountId: string, actor: ActorInput): Promise<PendingInvalidation> {
    const who = toActor(actor)
    const { rows } = await client.query<KeyRow>(`DELETE FROM api_keys WHERE sub_account_id = $1 RETURNING ${KEY_COLUMNS}`, [subAccountId])
    for (const row of rows) await this.recordEvent(client, row, 'key.deleted', who)
    return { keys: rows.map((row) => ({ hash: row.key_hash, state: 'deleted' as const })), xid: await currentTransactionId(client) }
  }

  /**
   * Tells every gateway replica, once the transaction `pending.xid` has
   * committed, and waits for each to confirm; throws InvalidationNotConfirmed
   * (saying `what` happened and what was not confirmed) when that fails.
   */
  async invalidate(pending: PendingInvalidation, what: string): Promise<InvalidationReport> {
    const report = await this.invalidator.invalidate(pending.keys, pending.xid)
    if (!report.confirmed) throw new InvalidationNotConfirmed(report, what)
    return report
  }

  private async findRow(db: Pool | PoolClient, id: string, owner?: KeyOwner, forUpdate = false): Promise<KeyRow | undefined> {
    requireUuid(id, 'key id')
    if (owner !== undefined) checkOwner(owner)
    const lock = forUpdate ? ' FOR UPDATE' : ''
    const { rows } =
      owner === undefined
        ? await db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1${lock}`, [id])
        : await db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1 AND ${ownerCondition(owner, 2)}${lock}`, [id, ownerId(owner)])
    return rows[0]
  }

  private async recordEvent(client: PoolClient, row: KeyRow, type: AuditEventType, actor: ReturnType<typeof toActor>): Promise<void> {
    await recordAuditEvent(client, {
      type,
      actor,
      agencyId: row.agency_id,
      subAccountId: row.sub_account_id,
      keyId: row.id,
      keyName: row.name,
      scope: row.scope,
    })
  }

  /** Locks the owning tenant's row for the count-then-insert; answers the agency id. */
  private async lockOwner(client: PoolClient, owner: KeyOwner): Promise<string> {
    if (owner.scope === 'AGENCY') {
      const { rows } = await client.query<{ id: string }>(`SELECT id FROM agencies WHERE id = $1 FOR NO KEY UPDATE`, [owner.agencyId])
      if (rows[0] === undefined) throw new ApiError('agencyNotFound')
      return rows[0].id
    }
    const { rows } = await client.query<{ agency_id: string }>(`SELECT agency_id FROM sub_accounts WHERE id = $1 FOR NO KEY UPDATE`, [owner.subAccountId])
    if (rows[0] === undefined) throw new ApiError('subAccountNotFound')
    return rows[0].agency_id
  }

  private async requireOwner(db: Pool, owner: KeyOwner): Promise<void> {
    const { rows } =
      owner.scope === 'AGENCY'
        ? await db.query(`SELECT 1 FROM agencies WHERE id = $1`, [owner.agencyId])
        : await db.query(`SELECT 1 FROM sub_accounts WHERE id = $1`, [owner.subAccountId])
    if (rows.length === 0) throw new ApiError(owner.scope === 'AGENCY' ? 'agencyNotFound' : 'subAccountNotFound')
  }
}

function created(row: KeyRow, key: string): CreatedKey {
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
    replaces: row.replaces,
  }
}

/** What an unconfirmed update says was saved. */
function invalidationWhat(addresses: boolean, rateLimit: boolean): string {
  if (addresses && rateLimit) return 'The key’s addresses and rate limit were changed'
  return addresses ? 'The key’s addresses were changed' : 'The key’s rate limit was changed'
}
