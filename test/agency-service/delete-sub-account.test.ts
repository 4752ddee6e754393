/**
 * Deleting a sub-account deletes its resources and its keys in one
 * transaction, and its keys with the same immediate effect as deleting a
 * key: every gateway replica has dropped them before the DELETE answers.
 */
import t from 'tap'
import type { Pool } from '@scoped/shared/db'
import { hashKey } from '@scoped/shared/keys'
import { lookupKeyByHash } from '@scoped/shared/key-lookup'
import { redisNames } from '@scoped/shared/key-invalidation'
import { standInReplica } from '../helpers/invalidation.js'
import { startAgencyService } from './fixture.js'
import { INVALIDATION_FAILED_MESSAGE } from '@scoped/agency-service/routes/sub-accounts'

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
  const { db, redis, keys, acme } = await startAgencyService(t)
  const dropped = await standInReplica(t, redis.url, redis.prefix)
  const doomed = (await acme.post('/v1/agency/sub-accounts', { name: 'Doomed' })).item['id']!
  const kept = (await acme.post('/v1/agency/sub-accounts', { name: 'Kept' })).item['id']!
  for (const id of [doomed, kept]) await seedResources(db.pool, id)
  const doomedKeys = [
    await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: doomed }, 'crm import', 'test'),
    await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: doomed }, 'billing', 'test'),
  ]
  await keys.revoke(doomedKeys[1]!.id, 'test')
  dropped.length = 0
  const keptKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: kept }, 'kept', 'test')
  const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: acme.tenant.agencyId }, 'agency', 'test')

  const response = await acme.delete(`/v1/agency/sub-accounts/${doomed}`)
  t.equal(response.status, 204)

  const doomedHashes = doomedKeys.map((key) => hashKey(key.key))
  t.same([...dropped].sort(), [...doomedHashes].sort(), 'the gateway replica dropped both keys (active and revoked) before the DELETE answered')
  for (const hash of doomedHashes) {
    t.same(await lookupKeyByHash(db.pool, hash), { status: 'deleted' }, "the sub-account's keys now look up as deleted")
    t.same(JSON.parse((await redis.client.get(redisNames(redis.prefix).cacheEntry(hash)))!), { status: 'deleted' }, 'and are marked deleted in the shared cache')
  }
  t.same(await resourceCounts(db.pool, doomed), [0, 0, 0], 'its agents, contacts and calls are gone')
  t.equal((await db.pool.query(`SELECT 1 FROM api_keys WHERE sub_account_id = $1`, [doomed])).rowCount, 0, 'its key records are gone')
  const events = await db.pool.query<{ key_id: string; actor: string }>(`SELECT key_id, actor FROM api_key_events WHERE event = 'deleted'`)
  t.same(
    events.rows.map((row) => row.key_id).sort(),
    doomedKeys.map((key) => key.id).sort(),
    'each key deletion is in the audit trail',
  )
  t.ok(
    events.rows.every((row) => row.actor === `api-key:${acme.tenant.keyId}`),
    'naming the agency key that asked for it',
  )
  t.equal((await acme.get(`/v1/agency/sub-accounts/${doomed}`)).status, 404)

  t.same(await resourceCounts(db.pool, kept), [1, 1, 1], "the other sub-account's resources are untouched")
  t.match(await lookupKeyByHash(db.pool, hashKey(keptKey.key)), { status: 'active' }, "the other sub-account's key still works")
  t.match(await lookupKeyByHash(db.pool, hashKey(agencyKey.key)), { status: 'active' }, "the agency's own key still works")
})

t.test("another agency cannot delete a sub-account: 404, and nothing is removed", async (t) => {
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
  const id = (await acme.post('/v1/agency/sub-accounts', { name: 'Acme West' })).item['id']!
  const key = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: id }, 'crm', 'test')
  await invalidator.close()
  const response = await acme.delete(`/v1/agency/sub-accounts/${id}`)
  t.equal(response.status, 503)
  t.same(response.json, { success: false, message: INVALIDATION_FAILED_MESSAGE })
  t.same(await lookupKeyByHash(db.pool, hashKey(key.key)), { status: 'deleted' }, 'the deletion itself was committed')
})
