/**
 * Rolling a key: a new key with the same name, scope, tenant, allowlist and
 * rate limit, which records the key it replaced; the old key keeps working
 * for the grace period (0, the default: not at all), then is refused like an
 * expired key, on every replica at that instant. Its expiry is only ever
 * brought forward. While in its grace period the old key does not count
 * toward the limit and cannot be rolled again; a revoked or expired key
 * cannot be rolled, so a roll never fails on the limit.
 */
import { inTransaction } from '@scoped/shared/db'
import type { PoolClient } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { InvalidationNotConfirmed } from '@scoped/shared/key-invalidation'
import { currentTransactionId } from '@scoped/shared/key-store'
import { generateKey, hashKey, keyHint } from '@scoped/shared/keys'
import type { ActorInput } from '../audit/actor.js'
import { actorText, toActor } from '../audit/actor.js'
import type { KeyContext } from './key-context.js'
import { requireGraceSeconds } from './key-input.js'
import type { KeyOwner } from './key-owner.js'
import { findKeyRow, lockKeyRow, lockOwner, ownerOfRow } from './key-owner.js'
import type { CreatedKey, KeyRow, KeySummary } from './key-records.js'
import { created, KEY_COLUMNS, recordKeyEvent, summary } from './key-records.js'

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

/**
 * Returns once every gateway replica has dropped what it cached about the old
 * key; when that cannot be confirmed it still returns the new key (its
 * plaintext exists nowhere else), with `unconfirmed` saying so, and every
 * replica refuses the old key within the stated bound of its new expiry all
 * the same.
 */
export async function rollKey(context: KeyContext, id: string, actor: ActorInput, owner: KeyOwner | undefined, grace: unknown): Promise<RolledKey> {
  const graceSeconds = requireGraceSeconds(grace)
  const who = toActor(actor)
  const { result, hash, createdHash, xid } = await inTransaction(context.pool, async (client) => {
    const seen = await findKeyRow(client, id, owner)
    if (seen === undefined) throw new ApiError('keyNotFound')
    // The tenant first, then the key: the order sub-account deletion locks in.
    await lockOwner(client, ownerOfRow(seen))
    const old = await lockKeyRow(client, id, owner)
    requireRollable(old, context.now())
    const key = generateKey()
    const fresh = await insertSuccessor(client, old, key, actorText(who))
    const updated = await startGrace(client, old, fresh, graceSeconds)
    await recordKeyEvent(client, fresh, 'key.created', who)
    await recordKeyEvent(client, old, 'key.rolled', who)
    const rolled: RolledKey = { ...created(fresh, key), replaces: old.id, old: summary(updated, context.now()) }
    return { result: rolled, hash: old.key_hash, createdHash: fresh.key_hash, xid: await currentTransactionId(client) }
  })
  try {
    // The new key goes into every replica's issued-key filter in the same confirmation.
    await context.invalidate(
      {
        keys: [
          { hash, state: 'changed' },
          { hash: createdHash, state: 'created' },
        ],
        xid,
      },
      'The key was rolled',
    )
  } catch (error) {
    if (!(error instanceof InvalidationNotConfirmed)) throw error
    result.unconfirmed = error.message
  }
  return result
}

function requireRollable(old: KeyRow, nowMs: number): void {
  if (old.revoked_at !== null) throw new ApiError('badRequest', 'A revoked key cannot be rolled')
  if (old.replaced_by !== null) throw new ApiError('badRequest', 'This key was already rolled; roll the key that replaced it instead')
  if (old.expires_at !== null && old.expires_at.getTime() <= nowMs) throw new ApiError('badRequest', 'An expired key cannot be rolled')
}

/** The new key: the old one's name, scope, tenant, allowlist and rate limit, no expiry, and a record of what it replaces. */
async function insertSuccessor(client: PoolClient, old: KeyRow, key: string, createdBy: string): Promise<KeyRow> {
  const inserted = await client.query<KeyRow>(
    `INSERT INTO api_keys (scope, agency_id, sub_account_id, name, key_hash, hint, created_by, allowed_cidrs, rate_limit_rate, rate_limit_burst, replaces)
     SELECT scope, agency_id, sub_account_id, name, $2, $3, $4, allowed_cidrs, rate_limit_rate, rate_limit_burst, id FROM api_keys WHERE id = $1
     RETURNING ${KEY_COLUMNS}`,
    [old.id, hashKey(key), keyHint(key), createdBy],
  )
  return inserted.rows[0]!
}

/** The old key is replaced and ends at now + the grace, or at its own expiry when that comes first. */
async function startGrace(client: PoolClient, old: KeyRow, fresh: KeyRow, graceSeconds: number): Promise<KeyRow> {
  const updated = await client.query<KeyRow>(
    `UPDATE api_keys SET replaced_by = $2,
            expires_at = LEAST(COALESCE(expires_at, 'infinity'::timestamptz), now() + $3 * interval '1 second')
      WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
    [old.id, fresh.id, graceSeconds],
  )
  return updated.rows[0]!
}
