import t from 'tap'
import { hashKey } from '@scoped/shared/keys'
import { RedisKeyInvalidator, redisNames } from '@scoped/shared/key-invalidation'
import { createRedis } from '@scoped/shared/redis'
import { createTestRedis } from '../helpers/redis.js'
import { standInReplica, testInvalidator } from '../helpers/invalidation.js'
import { freePort } from '../helpers/processes.js'
import { createKeyThroughConsole, createWorld, csrfToken, signedIn, startConsole } from './console-harness.js'

t.test('revoke and delete from the console invalidate every gateway replica before the page answers', async (t) => {
  const redis = await createTestRedis(t)
  const dropped = await standInReplica(t, redis.url, redis.prefix)
  const { app, pool } = await startConsole(t, await testInvalidator(t, redis.url, redis.prefix))
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`

  const first = await createKeyThroughConsole(owner, keysPath, 'to revoke')
  const second = await createKeyThroughConsole(owner, keysPath, 'to delete')
  const ids = new Map((await pool.query<{ id: string; name: string }>('SELECT id, name FROM api_keys')).rows.map((row) => [row.name, row.id]))
  const token = csrfToken((await owner.get(keysPath)).body)

  const revoked = await owner.post(`${keysPath}/${ids.get('to revoke')}/revoke`, { csrf: token })
  t.equal(revoked.headers.location, `${keysPath}?notice=revoked`, 'every replica confirmed')
  t.same(dropped, [hashKey(first.plaintext)], 'the replica had dropped the key when the answer came')
  t.same(JSON.parse((await redis.client.get(redisNames(redis.prefix).cacheEntry(hashKey(first.plaintext))))!), { status: 'revoked' })

  const deleted = await owner.post(`${keysPath}/${ids.get('to delete')}/delete`, { csrf: token })
  t.equal(deleted.headers.location, `${keysPath}?notice=deleted`)
  t.same(dropped, [hashKey(first.plaintext), hashKey(second.plaintext)])
  t.same(JSON.parse((await redis.client.get(redisNames(redis.prefix).cacheEntry(hashKey(second.plaintext))))!), { status: 'deleted' })
})

t.test('a replica that does not confirm in time is reported on the page', async (t) => {
  const redis = await createTestRedis(t)
  await standInReplica(t, redis.url, redis.prefix, false)
  const { app, pool } = await startConsole(t, await testInvalidator(t, redis.url, redis.prefix, 200))
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/sub-accounts/${world.subAccountId}/keys`
  await createKeyThroughConsole(owner, keysPath, 'k')
  const { rows } = await pool.query<{ id: string }>('SELECT id FROM api_keys')
  const revoked = await owner.post(`${keysPath}/${rows[0]!.id}/revoke`, { csrf: csrfToken((await owner.get(keysPath)).body) })
  t.equal(revoked.headers.location, `${keysPath}?notice=revoked&unconfirmed=1`)
  const page = await owner.get(String(revoked.headers.location))
  t.match(page.body, 'Not every gateway replica confirmed the change in time')
})

t.test('when Redis cannot be reached the page says the change was saved but not yet effective everywhere (503)', async (t) => {
  const redis = await createTestRedis(t)
  // An invalidator whose Redis is not there: nothing listens on this port.
  const deadUrl = `redis://127.0.0.1:${await freePort()}`
  const dead = new RedisKeyInvalidator(createRedis(deadUrl, 'dead-commands'), createRedis(deadUrl, 'dead-blocking', { blocking: true }), redis.prefix)
  t.teardown(() => dead.close())
  const { app, pool, keys } = await startConsole(t, dead)
  const world = await createWorld(pool)
  const key = await keys.create({ scope: 'AGENCY', agencyId: world.agencyId }, 'k', 'test')
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`

  const response = await owner.post(`${keysPath}/${key.id}/revoke`, { csrf: csrfToken((await owner.get(keysPath)).body) })
  t.equal(response.statusCode, 503)
  t.match(response.headers['content-type'], /text\/html/)
  t.match(response.body, 'The change was saved, but the gateways could not all be told about it')
  t.equal((await keys.find(key.id))?.status, 'revoked', 'the revocation itself is committed')
})
