import t from 'tap'
import type { Test } from 'tap'
import { Redis } from 'ioredis'
import { hashKey } from '@scoped/shared/keys'
import { acknowledgeInvalidation, parseInvalidationMessage, RedisKeyInvalidator, redisNames } from '@scoped/shared/key-invalidation'
import { connectRedis, createRedis } from '@scoped/shared/redis'
import { createTestRedis } from '../helpers/redis.js'
import { freePort } from '../helpers/processes.js'
import { createKeyThroughConsole, createWorld, csrfToken, signedIn, startConsole } from './console-harness.js'

/** A stand-in for one gateway replica: records the hashes it was told to drop, and acknowledges unless told not to. */
async function replica(t: Test, url: string, prefix: string, acknowledge: boolean): Promise<string[]> {
  const subscriber = new Redis(url)
  const commands = new Redis(url)
  t.teardown(() => {
    subscriber.disconnect()
    commands.disconnect()
  })
  const dropped: string[] = []
  subscriber.on('message', (_channel: string, text: string) => {
    const message = parseInvalidationMessage(text)
    if (message === undefined) return
    dropped.push(...message.hashes)
    if (acknowledge) void acknowledgeInvalidation(commands, prefix, message, 'replica')
  })
  await subscriber.subscribe(redisNames(prefix).channel)
  return dropped
}

async function invalidator(t: Test, url: string, prefix: string, ackTimeoutMs?: number): Promise<RedisKeyInvalidator> {
  const commands = createRedis(url, 'console-test-commands')
  const blocking = createRedis(url, 'console-test-blocking', { blocking: true })
  await Promise.all([connectRedis(commands), connectRedis(blocking)])
  const result = new RedisKeyInvalidator(commands, blocking, prefix, ackTimeoutMs)
  t.teardown(() => result.close())
  return result
}

t.test('revoke and delete from the console invalidate every gateway replica before the page answers', async (t) => {
  const redis = await createTestRedis(t)
  const dropped = await replica(t, redis.url, redis.prefix, true)
  const { app, pool } = await startConsole(t, await invalidator(t, redis.url, redis.prefix))
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
  await replica(t, redis.url, redis.prefix, false)
  const { app, pool } = await startConsole(t, await invalidator(t, redis.url, redis.prefix, 200))
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
