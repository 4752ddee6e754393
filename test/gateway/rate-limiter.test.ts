/**
 * The rate limiter against a real Redis: tokens come in leases from a shared
 * bucket, so replicas together never admit more than the limit while Redis
 * answers; with Redis down each replica keeps its share; unspent leases go
 * back. The clock is real here (Redis refills by its own), so rates are kept
 * low enough that a run's length does not change the counts that matter;
 * over the store in memory, the clock is the test's.
 */
import t from 'tap'
import { Redis } from 'ioredis'
import { createRedis } from '@scoped/shared/redis'
import { parseLimits, parseScopeDefaults, effectiveLimits } from '@scoped/shared/route-limits'
import type { BucketRef } from '@scoped/gateway/rate-limit/buckets'
import { leaseSize, RateLimiter } from '@scoped/gateway/rate-limit/limiter'
import { MemoryLeaseStore } from '@scoped/gateway/rate-limit/memory-store'
import { RedisLeaseStore } from '@scoped/gateway/rate-limit/redis-store'
import { createTestRedis } from '../helpers/redis.js'
import { freePort } from '../helpers/processes.js'

t.test('routes file: rate limits are checked at start, and a route replaces its scope defaults kind by kind', async (t) => {
  t.same(parseLimits({ key: { rate: 50, burst: 100 }, tenant: { rate: 200, burst: 400 } }, 'r'), {
    key: { rate: 50, burst: 100 },
    tenant: { rate: 200, burst: 400 },
  })
  const bad: Array<[unknown, RegExp]> = [
    ['x', /must be a mapping/],
    [{ user: { rate: 1, burst: 1 } }, /unknown limit "user"/],
    [{ key: { rate: 0, burst: 1 } }, /rate must be a number/],
    [{ key: { rate: 1, burst: 0.5 } }, /burst must be a whole number/],
    [{ key: { rate: 1 } }, /burst must be a whole number/],
    [{ key: { rate: 1, burst: 1, window: 2 } }, /unknown field "window"/],
  ]
  for (const [value, message] of bad) t.throws(() => parseLimits(value, 'r'), message)
  t.throws(() => parseScopeDefaults({ ADMIN: {} }), /unknown scope "ADMIN"/)
  const defaults = parseScopeDefaults({ 'SUB-ACCOUNT': { key: { rate: 1, burst: 2 }, tenant: { rate: 3, burst: 4 } } })
  t.same(effectiveLimits({ key: { rate: 9, burst: 9 } }, defaults['SUB-ACCOUNT']), { key: { rate: 9, burst: 9 }, tenant: { rate: 3, burst: 4 } })
  t.same(leaseSize({ rate: 50, burst: 100 }), 12)
  t.same(leaseSize({ rate: 1, burst: 1 }), 1)
})

async function drain(limiter: RateLimiter, refs: BucketRef[], attempts: number): Promise<number> {
  let allowed = 0
  for (let i = 0; i < attempts; i++) if ((await limiter.take(refs)).allowed) allowed++
  return allowed
}

t.test('two replicas sharing a bucket admit at most the limit together (no overshoot while Redis answers)', async (t) => {
  const redis = await createTestRedis(t)
  const clients = [createRedis(redis.url, 'rl-a'), createRedis(redis.url, 'rl-b')]
  t.teardown(() => clients.forEach((client) => client.disconnect()))
  await Promise.all(clients.map((client) => client.connect()))
  const limiters = clients.map((client) => new RateLimiter({ store: new RedisLeaseStore(client, redis.prefix), replicas: () => 2 }))
  t.teardown(() => Promise.all(limiters.map((limiter) => limiter.close())))
  const refs: BucketRef[] = [{ id: 'route|key|k1', kind: 'key', limit: { rate: 2, burst: 40 } }]
  const started = performance.now()
  const counts = await Promise.all(limiters.map((limiter) => drain(limiter, refs, 60)))
  const seconds = (performance.now() - started) / 1000
  const total = counts[0]! + counts[1]!
  const ceiling = 40 + Math.ceil(2 * seconds)
  t.ok(total <= ceiling, `admitted ${total} (${counts.join(' + ')}) within burst + rate × ${seconds.toFixed(2)} s = ${ceiling}`)
  t.ok(total >= 40, 'and the whole burst was usable across the two')
  const other: BucketRef[] = [{ id: 'route|key|k2', kind: 'key', limit: { rate: 2, burst: 40 } }]
  t.ok((await limiters[0]!.take(other)).allowed, 'another key has its own bucket')
})

t.test('a refusal names the limit and when to retry; a request takes from every bucket or none', async (t) => {
  const redis = await createTestRedis(t)
  const client = createRedis(redis.url, 'rl-c')
  t.teardown(() => client.disconnect())
  await client.connect()
  const limiter = new RateLimiter({ store: new RedisLeaseStore(client, redis.prefix), replicas: () => 1 })
  t.teardown(() => limiter.close())
  const key: BucketRef = { id: 'r|key|a', kind: 'key', limit: { rate: 0.5, burst: 10 } }
  const tenant: BucketRef = { id: 'r|tenant|s', kind: 'tenant', limit: { rate: 0.5, burst: 3 } }
  const results = []
  for (let i = 0; i < 4; i++) results.push(await limiter.take([key, tenant]))
  t.same(results.slice(0, 3), [{ allowed: true }, { allowed: true }, { allowed: true }])
  t.match(results[3], { allowed: false, kind: 'tenant' })
  t.ok((results[3] as { retryAfterSeconds: number }).retryAfterSeconds >= 1, 'Retry-After in whole seconds')
  t.equal(limiter.remaining(key), 7, 'the refused request took nothing from the key bucket')
})

t.test('two limiters over one store in memory, on a clock moved by hand: never more than burst + rate × time', async (t) => {
  let now = 0
  const clock = (): number => now
  const store = new MemoryLeaseStore({ now: clock })
  const limiters = [0, 1].map(() => new RateLimiter({ store, replicas: () => 2, now: clock }))
  t.teardown(() => Promise.all(limiters.map((limiter) => limiter.close())))
  const refs: BucketRef[] = [{ id: 'r|key|memory', kind: 'key', limit: { rate: 10, burst: 20 } }]
  const round = async (): Promise<number> => {
    let allowed = 0
    for (let i = 0; i < 30; i++) if ((await limiters[i % 2]!.take(refs)).allowed) allowed++
    return allowed
  }
  const first = await round()
  // Each limiter may still hold the unspent part of its last lease: the burst less those, at least.
  t.ok(first <= 20 && first >= 20 - 2 * leaseSize(refs[0]!.limit), `the burst, shared: ${first}`)
  now += 1_000
  const second = await round()
  t.ok(first + second <= 30, `one second of the rate more, no overshoot: ${first} + ${second}`)
  t.ok(second >= 10 - 2 * leaseSize(refs[0]!.limit), 'and the refill was usable')
  const last = []
  for (let i = 0; i < 2 * leaseSize(refs[0]!.limit) + 1; i++) last.push(await limiters[0]!.take(refs))
  t.match(last.at(-1), { allowed: false, kind: 'key' }, 'then refused, naming the limit')
})

t.test('Redis down: each replica falls back to its share of the limit, fail-soft and bounded', async (t) => {
  const port = await freePort()
  const dead = createRedis(`redis://127.0.0.1:${port}`, 'rl-dead')
  t.teardown(() => dead.disconnect())
  const errors: unknown[] = []
  const limiter = new RateLimiter({ store: new RedisLeaseStore(dead, 'x:'), replicas: () => 4, onStoreError: (error) => errors.push(error) })
  t.teardown(() => limiter.close())
  const refs: BucketRef[] = [{ id: 'r|key|dead', kind: 'key', limit: { rate: 0.1, burst: 40 } }]
  const allowed = await drain(limiter, refs, 30)
  t.equal(allowed, 10, 'a quarter of the burst (4 replicas seen)')
  t.ok(errors.length > 0, 'the store error was reported')
})

t.test('without Redis at all, every replica keeps its share locally', async (t) => {
  const limiter = new RateLimiter({ store: null, replicas: () => 2 })
  t.teardown(() => limiter.close())
  t.equal(await drain(limiter, [{ id: 'r|tenant|x', kind: 'tenant', limit: { rate: 0.1, burst: 8 } }], 20), 4)
})

t.test('an idle replica gives its unspent lease back', async (t) => {
  const redis = await createTestRedis(t)
  const client = createRedis(redis.url, 'rl-d')
  t.teardown(() => client.disconnect())
  await client.connect()
  const limiter = new RateLimiter({ store: new RedisLeaseStore(client, redis.prefix), replicas: () => 1 })
  const refs: BucketRef[] = [{ id: 'r|key|idle', kind: 'key', limit: { rate: 0.01, burst: 100 } }]
  t.ok((await limiter.take(refs)).allowed)
  const observer = new Redis(redis.url)
  t.teardown(() => observer.disconnect())
  const held = Number(await observer.hget(`${redis.prefix}rl:r|key|idle`, 't'))
  t.ok(held <= 100 - leaseSize(refs[0]!.limit), `the lease left the shared bucket (${held})`)
  await limiter.close()
  const back = Number(await observer.hget(`${redis.prefix}rl:r|key|idle`, 't'))
  t.ok(back >= 99, `unspent tokens returned at close (${back})`)
})
