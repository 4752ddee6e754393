/**
 * A Redis key space of its own for one test file: a unique REDIS_KEY_PREFIX
 * on the local server (TEST_REDIS_URL, default redis://127.0.0.1:6379), whose
 * keys are removed at teardown.
 */
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import type { Teardown } from './teardown.js'

export const redisUrl = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379'

export interface TestRedis {
  url: string
  prefix: string
  client: Redis
}

/** Removes every Redis key under the prefix (cache entries, counters, buckets), in batches: a test's or the benchmark's. */
export async function clearPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0'
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 5_000)
    if (keys.length > 0) await redis.unlink(...keys)
    cursor = next
  } while (cursor !== '0')
}

export async function createTestRedis(t: Teardown): Promise<TestRedis> {
  const prefix = `sak-test-${randomBytes(6).toString('hex')}:`
  const client = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 })
  await client.connect()
  t.teardown(async () => {
    await clearPrefix(client, prefix)
    client.disconnect()
  })
  return { url: redisUrl, prefix, client }
}
