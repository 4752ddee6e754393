/**
 * Changing a key: its allowlist, its own rate limit (null: back to the route
 * defaults), or both, in one transaction with one `key.updated` event (none
 * when nothing changed). Refused for a revoked or expired key. Returns once
 * every gateway replica has dropped what it cached about the key, so the next
 * request is judged by the new list and counted against the new limit.
 */
import { inTransaction } from '@scoped/shared/db'
import type { PoolClient } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { canonicalCidrs, requireCidrList } from '@scoped/shared/ip-address'
import { currentTransactionId } from '@scoped/shared/key-store'
import type { RateLimit } from '@scoped/shared/rate-limit'
import { sameRateLimit } from '@scoped/shared/rate-limit'
import type { ActorInput } from '../audit/actor.js'
import { toActor } from '../audit/actor.js'
import type { KeyContext } from './key-context.js'
import type { KeyFieldNames, RateLimitInput } from './key-input.js'
import { checkedRateLimit } from './key-input.js'
import type { KeyOwner } from './key-owner.js'
import { lockKeyRow } from './key-owner.js'
import type { KeyRow, KeySummary } from './key-records.js'
import { KEY_COLUMNS, rateLimitOf, recordKeyEvent, summary } from './key-records.js'
import { keyStatus } from './key-status.js'

/** A change of a key: what is given changes, what is left out stays. */
export interface KeyUpdate {
  actor: ActorInput
  /** When given, a key of another owner is not found. */
  owner?: KeyOwner
  /** The new allowlist; empty: any address. */
  allowedCidrs?: unknown
  /** The key's own rate limit; null: back to the routes file's. */
  rateLimit?: RateLimitInput | null
  /** How the caller's input names these, for messages (`body.allowedCidrs`, `--rate`). */
  fields?: KeyFieldNames
}

/** The change, checked: undefined where nothing is to change. */
interface CheckedChange {
  cidrs: string[] | undefined
  rateLimit: RateLimit | null | undefined
}

export async function updateKey(context: KeyContext, id: string, update: KeyUpdate): Promise<KeySummary> {
  const fields = update.fields ?? {}
  const change: CheckedChange = {
    cidrs:
      update.allowedCidrs === undefined
        ? undefined
        : requireCidrList(update.allowedCidrs, { name: 'allowedCidrs', label: fields.allowedCidrs ?? 'allowedCidrs' }),
    rateLimit: update.rateLimit === undefined ? undefined : checkedRateLimit(update.rateLimit, fields),
  }
  if (change.cidrs === undefined && change.rateLimit === undefined) throw new ApiError('badRequest', 'Nothing to change')
  const who = toActor(update.actor)
  const { row, changed, xid } = await inTransaction(context.pool, async (client) => {
    const found = await lockKeyRow(client, id, update.owner)
    requireChangeable(found, change, context.now())
    const updated = await writeChange(client, id, change)
    const changedFields = [
      ...(canonicalCidrs(found.allowed_cidrs).join(',') !== canonicalCidrs(updated.allowed_cidrs).join(',') ? ['allowedCidrs'] : []),
      ...(sameRateLimit(rateLimitOf(found), rateLimitOf(updated)) ? [] : ['rateLimit']),
    ]
    const isChange = changedFields.length > 0
    if (isChange) await recordKeyEvent(client, updated, 'key.updated', who, changedFields)
    return { row: updated, changed: isChange, xid: await currentTransactionId(client) }
  })
  if (changed) await context.invalidate({ keys: [{ hash: row.key_hash, state: 'changed' }], xid }, invalidationWhat(change))
  return summary(row, context.now())
}

function requireChangeable(found: KeyRow, change: CheckedChange, nowMs: number): void {
  const status = keyStatus({ revokedAt: found.revoked_at, expiresAt: found.expires_at }, nowMs)
  if (status === 'active') return
  const what = change.cidrs !== undefined ? 'The addresses' : 'The rate limit'
  throw new ApiError('badRequest', `${what} of ${status === 'revoked' ? 'a revoked' : 'an expired'} key cannot be changed`)
}

async function writeChange(client: PoolClient, id: string, change: CheckedChange): Promise<KeyRow> {
  const { cidrs, rateLimit } = change
  const { rows } = await client.query<KeyRow>(
    `UPDATE api_keys
        SET allowed_cidrs = CASE WHEN $2 THEN $3::cidr[] ELSE allowed_cidrs END,
            rate_limit_rate = CASE WHEN $4 THEN $5::float8 ELSE rate_limit_rate END,
            rate_limit_burst = CASE WHEN $4 THEN $6::int ELSE rate_limit_burst END
      WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
    [id, cidrs !== undefined, cidrs ?? [], rateLimit !== undefined, rateLimit?.rate ?? null, rateLimit?.burst ?? null],
  )
  return rows[0]!
}

/** What an unconfirmed update says was saved. */
function invalidationWhat(change: CheckedChange): string {
  const addresses = change.cidrs !== undefined
  if (addresses && change.rateLimit !== undefined) return 'The key’s addresses and rate limit were changed'
  return addresses ? 'The key’s addresses were changed' : 'The key’s rate limit was changed'
}
