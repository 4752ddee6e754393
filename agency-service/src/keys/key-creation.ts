/**
 * Creating a key (spec §3): at most 25 per agency (agency-scope keys) and per
 * sub-account count toward the limit (key-status.ts), counted under a row
 * lock on the owning tenant, so concurrent creations cannot overshoot. The
 * plaintext is returned once and kept nowhere; only its hash and hint are
 * stored, with the audit event in the same transaction. A sub-account key
 * without a rate limit of its own gets its sub-account's default for new
 * keys (routes/sub-account-store.ts), which its agency sets. Returns once
 * every gateway replica knows the key (confirmCreated).
 */
import { inTransaction } from '@scoped/shared/db'
import type { PoolClient } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { describeProblems, InvalidationNotConfirmed, STALE_AFTER_MS } from '@scoped/shared/key-invalidation'
import { currentTransactionId } from '@scoped/shared/key-store'
import { generateKey, hashKey, keyHint } from '@scoped/shared/keys'
import type { RateLimit } from '@scoped/shared/rate-limit'
import { requireName } from '@scoped/shared/validation'
import type { ActorInput } from '../audit/actor.js'
import { actorText, toActor } from '../audit/actor.js'
import type { KeyContext, PendingInvalidation } from './key-context.js'
import type { KeyFieldNames, RateLimitInput } from './key-input.js'
import { checkedCidrs, checkedExpiry, checkedRateLimit } from './key-input.js'
import type { KeyOwner } from './key-owner.js'
import { checkOwner, lockOwner, ownerCondition, ownerId } from './key-owner.js'
import type { CreatedKey, KeyRow } from './key-records.js'
import { created, KEY_COLUMNS, recordKeyEvent } from './key-records.js'
import { COUNTED_KEY_SQL } from './key-status.js'
import { checkedPermissions } from './permission-catalog.js'

export const ACTIVE_KEY_LIMIT = 25
export const KEY_NAME_MAX_LENGTH = 100

export interface NewKeyOptions {
  /** When the key stops working; must be in the future. Undefined or null: never. */
  expiresAt?: Date | null
  /** CIDR blocks (or addresses) the key may be used from; undefined or empty: any address. */
  allowedCidrs?: unknown
  /** The key's own rate limit; undefined or null: its sub-account's default for new keys, else the routes file's. */
  rateLimit?: RateLimitInput | null
  /** Names the routes of the key's scope declare (`contacts:read`); undefined or null: unrestricted. */
  permissions?: unknown
  /** How the caller's input names these, for messages (`body.expiresAt`, `--allow-cidr`, `--rate`). */
  fields?: KeyFieldNames
}

interface CheckedKey {
  name: string
  expiresAt: Date | null
  allowedCidrs: string[]
  rateLimit: RateLimit | null
  permissions: string[] | null
}

export async function createKey(context: KeyContext, owner: KeyOwner, name: unknown, actor: ActorInput, options: NewKeyOptions): Promise<CreatedKey> {
  checkOwner(owner)
  const checked: CheckedKey = {
    name: requireName(name, 'name', KEY_NAME_MAX_LENGTH),
    expiresAt: checkedExpiry(options.expiresAt, context.now(), options.fields),
    allowedCidrs: checkedCidrs(options.allowedCidrs, options.fields),
    rateLimit: checkedRateLimit(options.rateLimit, options.fields),
    permissions: checkedPermissions(options.permissions, owner.scope, context.permissions, options.fields?.permissions),
  }
  const who = toActor(actor)
  const { result, pending } = await inTransaction(context.pool, async (client) => {
    const agencyId = await lockOwner(client, owner)
    await requireRoomForKey(client, owner)
    const key = generateKey()
    const row = await insertKey(client, owner, agencyId, key, checked, actorText(who))
    await recordKeyEvent(client, row, 'key.created', who)
    const pending: PendingInvalidation = { keys: [{ hash: row.key_hash, state: 'created' }], xid: await currentTransactionId(client) }
    return { result: created(row, key), pending }
  })
  await confirmCreated(context, pending, result)
  return result
}

/**
 * Waits until every live gateway replica has the new key in its issued-key
 * filter, as a revoke waits for every replica to drop a key: a replica
 * answers a key outside its filter 401 without a lookup, so the key must be
 * in every filter when its creation returns. When that cannot be confirmed,
 * `unconfirmed` says so, and the key is still returned (its plaintext exists
 * nowhere else); every replica learns of it within the invalidation log's
 * bound all the same.
 */
export async function confirmCreated(context: KeyContext, pending: PendingInvalidation, result: CreatedKey): Promise<void> {
  try {
    await context.invalidate(pending, 'The key was created')
  } catch (error) {
    if (!(error instanceof InvalidationNotConfirmed)) throw error
    result.unconfirmed =
      `The key was created, but not every gateway replica confirmed knowing it (${describeProblems(error.report)}); ` +
      `every replica accepts it within ${STALE_AFTER_MS / 1000} s all the same`
  }
}

/** The limit of 25, counted under the tenant's lock (lockOwner) so that concurrent creations cannot overshoot it. */
async function requireRoomForKey(client: PoolClient, owner: KeyOwner): Promise<void> {
  const { rows } = await client.query<{ active: number }>(
    `SELECT count(*)::int AS active FROM api_keys WHERE ${ownerCondition(owner, 1)} AND ${COUNTED_KEY_SQL}`,
    [ownerId(owner)],
  )
  if ((rows[0]?.active ?? 0) >= ACTIVE_KEY_LIMIT) throw new ApiError('keyLimitReached')
}

async function insertKey(client: PoolClient, owner: KeyOwner, agencyId: string, key: string, checked: CheckedKey, createdBy: string): Promise<KeyRow> {
  const subAccountId = owner.scope === 'SUB-ACCOUNT' ? owner.subAccountId : null
  const inserted = await client.query<KeyRow>(
    `INSERT INTO api_keys (scope, agency_id, sub_account_id, name, key_hash, hint, created_by, expires_at, allowed_cidrs, rate_limit_rate, rate_limit_burst, permissions)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::cidr[],
             COALESCE($10::float8, (SELECT key_rate_limit_rate FROM sub_accounts WHERE id = $3)),
             COALESCE($11::int, (SELECT key_rate_limit_burst FROM sub_accounts WHERE id = $3)), $12::text[])
     RETURNING ${KEY_COLUMNS}`,
    [
      owner.scope,
      agencyId,
      subAccountId,
      checked.name,
      hashKey(key),
      keyHint(key),
      createdBy,
      checked.expiresAt,
      checked.allowedCidrs,
      checked.rateLimit?.rate ?? null,
      checked.rateLimit?.burst ?? null,
      checked.permissions,
    ],
  )
  return inserted.rows[0]!
}
