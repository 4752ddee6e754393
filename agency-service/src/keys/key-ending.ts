/**
 * Ending keys: revoke (the record stays, with its last use), delete, and
 * every key of a sub-account that is being deleted. Each commits first,
 * whatever Redis is doing, with its audit event in the same transaction,
 * then tells every gateway replica and waits for each to confirm (see
 * @scoped/shared/key-invalidation).
 */
import { inTransaction } from '@scoped/shared/db'
import type { PoolClient } from '@scoped/shared/db'
import type { InvalidationReport } from '@scoped/shared/key-invalidation'
import { currentTransactionId } from '@scoped/shared/key-store'
import type { ActorInput } from '../audit/actor.js'
import { actorText, toActor } from '../audit/actor.js'
import type { KeyContext, PendingInvalidation } from './key-context.js'
import type { KeyOwner } from './key-owner.js'
import { lockKeyRow } from './key-owner.js'
import type { KeyRow } from './key-records.js'
import { KEY_COLUMNS, recordKeyEvent, revokedInvalidation } from './key-records.js'

export interface LifecycleResult {
  id: string
  invalidation: InvalidationReport
}

export async function revokeKey(context: KeyContext, id: string, actor: ActorInput, owner?: KeyOwner): Promise<LifecycleResult> {
  const who = toActor(actor)
  const { row, xid } = await inTransaction(context.pool, async (client) => {
    const found = await lockKeyRow(client, id, owner)
    // Revoking again changes nothing and records nothing, but still makes sure every replica has dropped the key.
    if (found.revoked_at === null) {
      await client.query(`UPDATE api_keys SET revoked_at = now(), revoked_by = $2 WHERE id = $1`, [id, actorText(who)])
      await recordKeyEvent(client, found, 'key.revoked', who)
    }
    return { row: found, xid: await currentTransactionId(client) }
  })
  const invalidation = await context.invalidate({ keys: [revokedInvalidation(row)], xid }, 'The key was revoked')
  return { id: row.id, invalidation }
}

export async function deleteKey(context: KeyContext, id: string, actor: ActorInput, owner?: KeyOwner): Promise<LifecycleResult> {
  const who = toActor(actor)
  const { row, xid } = await inTransaction(context.pool, async (client) => {
    const found = await lockKeyRow(client, id, owner)
    await client.query(`DELETE FROM api_keys WHERE id = $1`, [id])
    await recordKeyEvent(client, found, 'key.deleted', who)
    return { row: found, xid: await currentTransactionId(client) }
  })
  const invalidation = await context.invalidate({ keys: [{ hash: row.key_hash, state: 'deleted' }], xid }, 'The key was deleted')
  return { id: row.id, invalidation }
}

/**
 * Deletes every key of a sub-account inside the caller's transaction (the
 * one that deletes the sub-account). The caller must pass the returned
 * invalidations to `invalidate` once that transaction has committed.
 */
export async function deleteAllOfSubAccount(client: PoolClient, subAccountId: string, actor: ActorInput): Promise<PendingInvalidation> {
  const who = toActor(actor)
  const { rows } = await client.query<KeyRow>(`DELETE FROM api_keys WHERE sub_account_id = $1 RETURNING ${KEY_COLUMNS}`, [subAccountId])
  for (const row of rows) await recordKeyEvent(client, row, 'key.deleted', who)
  return { keys: rows.map((row) => ({ hash: row.key_hash, state: 'deleted' as const })), xid: await currentTransactionId(client) }
}
