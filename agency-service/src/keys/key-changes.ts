/**
 * Changing a key: its name, its permissions (null: unrestricted again), its
 * allowlist, its own rate limit (null: back to the route defaults), any of
 * them, in one transaction with one `key.updated` event (none when nothing
 * changed). Refused for a revoked or expired key. A change of what the
 * gateways enforce (all but the name) returns once every gateway replica has
 * dropped what it cached about the key, as a revoke does, so the next request
 * is judged by the new permissions and list and counted against the new limit.
 */
import { inTransaction } from '@scoped/shared/db'
import type { PoolClient } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { canonicalCidrs, requireCidrList } from '@scoped/shared/ip-address'
import { currentTransactionId } from '@scoped/shared/key-store'
import type { RateLimit } from '@scoped/shared/rate-limit'
import { sameRateLimit } from '@scoped/shared/rate-limit'
import { requireName } from '@scoped/shared/validation'
import type { ActorInput } from '../audit/actor.js'
import { toActor } from '../audit/actor.js'
import type { KeyContext } from './key-context.js'
import { KEY_NAME_MAX_LENGTH } from './key-creation.js'
import type { KeyFieldNames, RateLimitInput } from './key-input.js'
import { checkedRateLimit } from './key-input.js'
import type { KeyOwner } from './key-owner.js'
import { lockKeyRow } from './key-owner.js'
import type { KeyRow, KeySummary } from './key-records.js'
import { KEY_COLUMNS, rateLimitOf, recordKeyEvent, summary } from './key-records.js'
import { keyStatus } from './key-status.js'
import { checkedPermissions } from './permission-catalog.js'

/** A change of a key: what is given changes, what is left out stays. */
export interface KeyUpdate {
  actor: ActorInput
  /** When given, a key of another owner is not found. */
  owner?: KeyOwner
  /** The new name. */
  name?: unknown
  /** The new permissions (names the routes of the key's scope declare); null: unrestricted. */
  permissions?: unknown
  /** The new allowlist; empty: any address. */
  allowedCidrs?: unknown
  /** The key's own rate limit; null: back to the routes file's. */
  rateLimit?: RateLimitInput | null
  /** How the caller's input names these, for messages (`body.allowedCidrs`, `--rate`). */
  fields?: KeyFieldNames
}

/** The change, checked: undefined where nothing is to change. */
interface CheckedChange {
  name: string | undefined
  /** Checked against the key's scope once its row is read (checkedPermissions). */
  permissions: unknown
  cidrs: string[] | undefined
  rateLimit: RateLimit | null | undefined
}

export async function updateKey(context: KeyContext, id: string, update: KeyUpdate): Promise<KeySummary> {
  const fields = update.fields ?? {}
  const change: CheckedChange = {
    name: update.name === undefined ? undefined : requireName(update.name, { name: 'name', label: fields.name ?? 'name' }, KEY_NAME_MAX_LENGTH),
    permissions: update.permissions,
    cidrs:
      update.allowedCidrs === undefined
        ? undefined
        : requireCidrList(update.allowedCidrs, { name: 'allowedCidrs', label: fields.allowedCidrs ?? 'allowedCidrs' }),
    rateLimit: update.rateLimit === undefined ? undefined : checkedRateLimit(update.rateLimit, fields),
  }
  if (change.name === undefined && change.permissions === undefined && change.cidrs === undefined && change.rateLimit === undefined)
    throw new ApiError('badRequest', 'Nothing to change')
  const who = toActor(update.actor)
  const { row, enforced, xid } = await inTransaction(context.pool, async (client) => {
    const found = await lockKeyRow(client, id, update.owner)
    requireChangeable(found, change, context.now())
    const permissions =
      change.permissions === undefined ? undefined : checkedPermissions(change.permissions, found.scope, context.permissions, fields.permissions)
    const updated = await writeChange(client, id, change, permissions)
    const changed = changedFields(found, updated)
    if (changed.length > 0) await recordKeyEvent(client, updated, 'key.updated', who, changed)
    return { row: updated, enforced: changed.some((field) => field !== 'name'), xid: await currentTransactionId(client) }
  })
  if (enforced) await context.invalidate({ keys: [{ hash: row.key_hash, state: 'changed' }], xid }, invalidationWhat(change))
  return summary(row, context.now())
}

/**
 * Which settings changed, in the API's words (the audit trail labels the
 * event by them); all but `name` are what the gateways enforce.
 */
function changedFields(before: KeyRow, after: KeyRow): string[] {
  return [
    ...(before.name === after.name ? [] : ['name']),
    ...(JSON.stringify(before.permissions) === JSON.stringify(after.permissions) ? [] : ['permissions']),
    ...(canonicalCidrs(before.allowed_cidrs).join(',') === canonicalCidrs(after.allowed_cidrs).join(',') ? [] : ['allowedCidrs']),
    ...(sameRateLimit(rateLimitOf(before), rateLimitOf(after)) ? [] : ['rateLimit']),
  ]
}

function requireChangeable(found: KeyRow, change: CheckedChange, nowMs: number): void {
  const status = keyStatus({ revokedAt: found.revoked_at, expiresAt: found.expires_at }, nowMs)
  if (status === 'active') return
  const what =
    change.permissions !== undefined
      ? 'The permissions'
      : change.cidrs !== undefined
        ? 'The addresses'
        : change.rateLimit !== undefined
          ? 'The rate limit'
          : 'The name'
  throw new ApiError('badRequest', `${what} of ${status === 'revoked' ? 'a revoked' : 'an expired'} key cannot be changed`)
}

async function writeChange(client: PoolClient, id: string, change: CheckedChange, permissions: string[] | null | undefined): Promise<KeyRow> {
  const { name, cidrs, rateLimit } = change
  const { rows } = await client.query<KeyRow>(
    `UPDATE api_keys
        SET allowed_cidrs = CASE WHEN $2 THEN $3::cidr[] ELSE allowed_cidrs END,
            rate_limit_rate = CASE WHEN $4 THEN $5::float8 ELSE rate_limit_rate END,
            rate_limit_burst = CASE WHEN $4 THEN $6::int ELSE rate_limit_burst END,
            name = COALESCE($7::text, name),
            permissions = CASE WHEN $8 THEN $9::text[] ELSE permissions END
      WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
    [
      id,
      cidrs !== undefined,
      cidrs ?? [],
      rateLimit !== undefined,
      rateLimit?.rate ?? null,
      rateLimit?.burst ?? null,
      name ?? null,
      permissions !== undefined,
      permissions ?? null,
    ],
  )
  return rows[0]!
}

/** What an unconfirmed update says was saved. */
function invalidationWhat(change: CheckedChange): string {
  const changed = [
    change.permissions !== undefined ? 'permissions' : undefined,
    change.cidrs !== undefined ? 'addresses' : undefined,
    change.rateLimit !== undefined ? 'rate limit' : undefined,
  ].filter((what) => what !== undefined)
  const list = changed.length <= 1 ? changed.join('') : `${changed.slice(0, -1).join(', ')} and ${changed.at(-1)!}`
  return `The key’s ${list} ${list === 'rate limit' ? 'was' : 'were'} changed`
}
