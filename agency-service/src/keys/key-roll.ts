/**
 * Rolling a key: a new key with the same name, scope, tenant and every limit
 * of the old one (allowlist, rate limit, permissions, and its expiry policy: a key made to
 * live a given time is replaced by one that lives as long from the roll, a
 * key without expiry by one without), which records the key it replaced; the
 * old key keeps working for the grace period (0, the default: not at all),
 * then is refused like an expired key, on every replica at that instant. Its
 * expiry is only ever brought forward. While in its grace period the old key
 * does not count toward the limit and cannot be rolled again; a revoked or
 * expired key cannot be rolled, so a roll never fails on the limit.
 *
 * A tenant never has more than one key in grace per chain of rolls: rolling
 * a key whose predecessor is still in its grace period ends that grace at
 * once (the predecessor expires now), so at any moment at most 25 keys work
 * plus one key in grace per roll in progress, however quickly rolls follow.
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
  const { result, hashes, createdHash, xid } = await inTransaction(context.pool, async (client) => {
    const seen = await findKeyRow(client, id, owner)
    if (seen === undefined) throw new ApiError('keyNotFound')
    // The tenant first, then the key: the order sub-account deletion locks in.
    await lockOwner(client, ownerOfRow(seen))
    const old = await lockKeyRow(client, id, owner)
    requireRollable(old, context.now())
    const key = generateKey()
    const ended = await endPredecessorGrace(client, old)
    const fresh = await insertSuccessor(client, old, key, actorText(who))
    const updated = await startGrace(client, old, fresh, graceSeconds)
    await recordKeyEvent(client, fresh, 'key.created', who)
    await recordKeyEvent(client, old, 'key.rolled', who)
    const rolled: RolledKey = { ...created(fresh, key), replaces: old.id, old: summary(updated, context.now()) }
    return { result: rolled, hashes: [old.key_hash, ...ended], createdHash: fresh.key_hash, xid: await currentTransactionId(client) }
  })
  try {
    // The new key goes into every replica's issued-key filter in the same confirmation.
    const keys = [...hashes.map((hash) => ({ hash, state: 'changed' as const })), { hash: createdHash, state: 'created' as const }]
    await context.invalidate({ keys, xid }, 'The key was rolled')
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

/**
 * The key that `old` replaced, when it is still in its grace period: it ends
 * now (an expiry only moves earlier), so the chain never has two keys in
 * grace. Answers the hashes of what ended, for the gateways to forget.
 */
async function endPredecessorGrace(client: PoolClient, old: KeyRow): Promise<string[]> {
  if (old.replaces === null) return []
  const { rows } = await client.query<{ key_hash: string }>(
    `UPDATE api_keys SET expires_at = now()
      WHERE id = $1 AND replaced_by = $2 AND revoked_at IS NULL AND expires_at > now()
      RETURNING key_hash`,
    [old.replaces, old.id],
  )
  return rows.map((row) => row.key_hash)
}

/**
 * The new key: the old one's name, scope, tenant, allowlist, rate limit and permissions,
 * the old one's lifetime counted from now (no expiry when it had none), and a
 * record of what it replaces. The old key is not rolled yet, so its expiry is
 * still the one it was made with.
 */
async function insertSuccessor(client: PoolClient, old: KeyRow, key: string, createdBy: string): Promise<KeyRow> {
  const inserted = await client.query<KeyRow>(
    `INSERT INTO api_keys (scope, agency_id, sub_account_id, name, key_hash, hint, created_by, allowed_cidrs, rate_limit_rate, rate_limit_burst, permissions, replaces, expires_at)
     SELECT scope, agency_id, sub_account_id, name, $2, $3, $4, allowed_cidrs, rate_limit_rate, rate_limit_burst, permissions, id,
            now() + (expires_at - created_at)
       FROM api_keys WHERE id = $1
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
