/**
 * Deleting a sub-account deletes its resources and its keys in one
 * transaction, and its keys with the same immediate effect as deleting a
 * key: every gateway replica has dropped them before the DELETE answers
 * (through Redis, or through the invalidation log in Postgres); when that
 * cannot be confirmed, the DELETE says so (503).
 */
import t from 'tap'
import type { Pool } from '@scoped/shared/db'
import { hashKey } from '@scoped/shared/keys'
import { lookupKeyByHash } from '@scoped/shared/key-store'
import { DEADLINE_MS, STALE_AFTER_MS } from '@scoped/shared/key-invalidation'
import { redisNames } from '@scoped/shared/key-state'
import { redisChannelOf, standInReplica } from '../helpers/invalidation.js'
import { startAgencyService } from './fixture.js'

async function seedResources(pool: Pool, subAccountId: string): Promise<void> {
  await pool.query(
    `WITH agent AS (INSERT INTO agents (sub_account_id, name) VALUES ($1, 'Agent') RETURNING id),
          contact AS (INSERT INTO contacts (sub_account_id, name) VALUES ($1, 'Contact') RETURNING id)
     INSERT INTO calls (sub_account_id, agent_id, contact_id) SELECT $1, agent.id, contact.id FROM agent, contact`,
    [subAccountId],
  )
}

async function resourceCounts(pool: Pool, subAccountId: string): Promise<number[]> {
  const counts: number[] = []
  for (const table of ['agents', 'contacts', 'calls']) {
    const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE sub_account_id = $1`, [subAccountId])
    counts.push(rows[0]!.n)
  }
  return counts
}

t.test('deleting a sub-account removes its resources and keys, and gateways drop the keys before it answers', async (t) => {
  const { db, redis, keys, invalidator, acme } = await startAgencyService(t)
  // The fixture's revoker seals with a key-cache secret of its own; its codec is what a gateway of this deployment holds.
  const { codec } = redisChannelOf(invalidator)
  // One replica hears through Redis and acknowledges; another only follows the log in Postgres.
  const listening = await standInReplica(t, { codec, redis })
  const following = await standInReplica(t, { codec, registry: { pool: db.pool } })
  const doomed = (await acme.post('/v1/agency/sub-accounts', { name: 'Doomed' })).item['id']!
  const kept = (await acme.post('/v1/agency/sub-accounts', { name: 'Kept' })).item['id']!
  for (const id of [doomed, kept]) await seedResources(db.pool, id)
  const doomedKeys = [
    await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: doomed }, 'crm import', 'test'),
    await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: doomed }, 'billing', 'test'),
  ]
  await keys.revoke(doomedKeys[1]!.id, 'test')
  const [heardBefore, appliedBefore] = [listening.droppedByMessage.length, following.droppedByLog.length]
  const keptKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: kept }, 'kept', 'test')
  const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: acme.tenant.agencyId }, 'agency', 'test')

  const response = await acme.delete(`/v1/agency/sub-accounts/${doomed}`)
  t.equal(response.status, 204)

  const doomedHashes = doomedKeys.map((key) => hashKey(key.key))
  const sorted = (hashes: string[]) => [...hashes].sort()
  t.same(
    sorted(listening.droppedByMessage.slice(heardBefore)),
    sorted(doomedHashes),
    'the listening replica dropped both keys (active and revoked) before the DELETE answered',
  )
  t.same(sorted(following.droppedByLog.slice(appliedBefore)), sorted(doomedHashes), 'and so did the one following the log')
  for (const hash of doomedHashes) {
    t.same(await lookupKeyByHash(db.pool, hash), { status: 'deleted' }, "the sub-account's keys now look up as deleted")
    const entry = await redis.client.get(redisNames(redis.prefix).cacheEntry(hash))
    t.same(codec.decodeEntry(hash, entry ?? '', Date.now()), { status: 'deleted' }, 'and are marked deleted in the shared cache, sealed')
  }
  t.same(await resourceCounts(db.pool, doomed), [0, 0, 0], 'its agents, contacts and calls are gone')
  t.equal((await db.pool.query(`SELECT 1 FROM api_keys WHERE sub_account_id = $1`, [doomed])).rowCount, 0, 'its key records are gone')
  const events = await db.pool.query<{ key_id: string; actor: string }>(`SELECT key_id, actor FROM api_key_events WHERE event = 'deleted'`)
  t.same(events.rows.map((row) => row.key_id).sort(), doomedKeys.map((key) => key.id).sort(), 'each key deletion is in the audit trail')
  t.ok(
    events.rows.every((row) => row.actor === `api-key:${acme.tenant.keyId}`),
    'naming the agency key that asked for it',
  )
  t.equal((await acme.get(`/v1/agency/sub-accounts/${doomed}`)).status, 404)

  t.same(await resourceCounts(db.pool, kept), [1, 1, 1], "the other sub-account's resources are untouched")
  t.match(await lookupKeyByHash(db.pool, hashKey(keptKey.key)), { status: 'active' }, "the other sub-account's key still works")
  t.match(await lookupKeyByHash(db.pool, hashKey(agencyKey.key)), { status: 'active' }, "the agency's own key still works")
})

t.test('another agency cannot delete a sub-account: 404, and nothing is removed', async (t) => {
  const { db, keys, acme, globex } = await startAgencyService(t)
  const id = (await acme.post('/v1/agency/sub-accounts', { name: 'Acme West' })).item['id']!
  await seedResources(db.pool, id)
  const key = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: id }, 'crm', 'test')
  const response = await globex.delete(`/v1/agency/sub-accounts/${id}`)
  t.equal(response.status, 404)
  t.same(response.json, { success: false, message: 'Sub-account not found' })
  t.same(await resourceCounts(db.pool, id), [1, 1, 1])
  t.match(await lookupKeyByHash(db.pool, hashKey(key.key)), { status: 'active' })
})

t.test('when the gateways cannot be told, the DELETE says so (503) rather than claim immediate effect', async (t) => {
  const { db, keys, invalidator, acme } = await startAgencyService(t)
  const { codec } = redisChannelOf(invalidator)
  // A replica that keeps polling (so stays live) but never applies the log, and Redis gone from the revoker:
  // nothing can confirm, so the DELETE answers at the revoker's deadline (the fixture's default, DEADLINE_MS).
  const stuck = await standInReplica(t, { codec, registry: { pool: db.pool, mode: 'stuck' } })
  const id = (await acme.post('/v1/agency/sub-accounts', { name: 'Acme West' })).item['id']!
  const key = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: id }, 'crm', 'test')
  await invalidator.close()
  const started = Date.now()
  const response = await acme.delete(`/v1/agency/sub-accounts/${id}`)
  t.equal(response.status, 503)
  t.equal(response.json.success, false)
  const message = String(response.json.message)
  t.match(message, /^The sub-account was deleted, but not every gateway replica confirmed dropping it \(/, 'says what was saved, then what was not confirmed')
  t.match(message, /Redis: /, 'naming Redis')
  t.match(message, stuck.id, 'and the replica that did not confirm')
  t.match(message, `every replica refuses it within ${STALE_AFTER_MS / 1000} s of the change all the same`)
  t.ok(Date.now() - started < DEADLINE_MS + 1_000, 'within the revoker’s deadline')
  t.same(await lookupKeyByHash(db.pool, hashKey(key.key)), { status: 'deleted' }, 'the deletion itself was committed')
})
