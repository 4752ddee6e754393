import t from 'tap'
import type { Test } from 'tap'
import { Redis } from 'ioredis'
import {
  acknowledgeInvalidation,
  parseInvalidationMessage,
  RedisKeyInvalidator,
  redisNames,
} from '@scoped/shared/key-invalidation'
import type { InvalidationMessage } from '@scoped/shared/key-invalidation'
import { createRedis } from '@scoped/shared/redis'
import { createTestRedis } from '../helpers/redis.js'
import { testInvalidator } from '../helpers/invalidation.js'

const hashA = 'a'.repeat(64)
const hashB = 'b'.repeat(64)

/** A stand-in for one gateway replica's listener: records what it dropped, acknowledges unless told not to. */
async function replica(t: Test, url: string, prefix: string, acknowledge: boolean): Promise<InvalidationMessage[]> {
  const subscriber = new Redis(url)
  const commands = new Redis(url)
  t.teardown(() => {
    subscriber.disconnect()
    commands.disconnect()
  })
  const seen: InvalidationMessage[] = []
  subscriber.on('message', (_channel: string, text: string) => {
    const message = parseInvalidationMessage(text)
    if (message === undefined) return
    seen.push(message)
    if (acknowledge) void acknowledgeInvalidation(commands, prefix, message, 'replica')
  })
  await subscriber.subscribe(redisNames(prefix).channel)
  return seen
}

t.test('the revoker writes terminal markers, publishes, and waits for every replica', async (t) => {
  const redis = await createTestRedis(t)
  const names = redisNames(redis.prefix)
  const one = await replica(t, redis.url, redis.prefix, true)
  const two = await replica(t, redis.url, redis.prefix, true)
  const invalidator = await testInvalidator(t, redis.url, redis.prefix)

  // A gateway had cached the key as active; the marker must replace it.
  await redis.client.set(names.cacheEntry(hashA), JSON.stringify({ status: 'active' }))
  const report = await invalidator.invalidate([
    { hash: hashA, state: 'revoked' },
    { hash: hashB, state: 'deleted' },
  ])
  t.same(report, { subscribers: 2, acknowledged: 2 })
  t.same(one.map((m) => m.hashes), [[hashA, hashB]], 'replica one dropped both keys before the call returned')
  t.same(two.map((m) => m.hashes), [[hashA, hashB]], 'replica two too')
  t.same(JSON.parse((await redis.client.get(names.cacheEntry(hashA)))!), { status: 'revoked' })
  t.same(JSON.parse((await redis.client.get(names.cacheEntry(hashB)))!), { status: 'deleted' })
  t.ok((await redis.client.ttl(names.cacheEntry(hashA))) > 0, 'markers expire')
  t.equal(await redis.client.set(names.cacheEntry(hashA), '{"status":"active"}', 'EX', 60, 'NX'), null, 'a racing gateway fill (SET NX) cannot overwrite the marker')
  t.equal(await redis.client.exists(names.acknowledgements(one[0]!.id)), 0, 'acknowledgements are cleaned up')
})

t.test('a replica that does not acknowledge is reported, not waited on forever', async (t) => {
  const redis = await createTestRedis(t)
  await replica(t, redis.url, redis.prefix, true)
  await replica(t, redis.url, redis.prefix, false)
  const invalidator = await testInvalidator(t, redis.url, redis.prefix, 300)
  t.same(await invalidator.invalidate([{ hash: hashA, state: 'revoked' }]), { subscribers: 2, acknowledged: 1 })
})

t.test('without Redis reachable the revoker says so instead of pretending', async (t) => {
  const commands = createRedis('redis://127.0.0.1:1', 'unreachable')
  const blocking = createRedis('redis://127.0.0.1:1', 'unreachable-blocking', { blocking: true })
  const invalidator = new RedisKeyInvalidator(commands, blocking, 'x:')
  t.teardown(() => invalidator.close())
  await t.rejects(invalidator.invalidate([{ hash: hashA, state: 'revoked' }]), { name: 'InvalidationError' })
})

t.test('malformed channel messages are ignored', async (t) => {
  for (const text of ['', 'null', '{}', '{"id":1,"hashes":[]}', '{"id":"x","hashes":[1]}', 'not json']) {
    t.equal(parseInvalidationMessage(text), undefined, text)
  }
  t.same(parseInvalidationMessage('{"id":"x","hashes":["h"]}'), { id: 'x', hashes: ['h'] })
})
