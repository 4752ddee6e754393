/**
 * Failed-authentication throttling per client address: the limit per window,
 * replicas sharing the count through the real Redis within the stated
 * overshoot (limit + N - 1), the local fallback when Redis cannot be reached,
 * and the bound on local state. Its refusal's headers: rate-limit-headers.test.ts.
 */
import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { createRedis } from '@scoped/shared/redis'
import { AuthFailureThrottle, DEFAULT_LIMIT, DEFAULT_MAX_TRACKED, DEFAULT_WINDOW_MS } from '@scoped/gateway/rate-limit/auth-failure-throttle'
import { createTestRedis } from '../helpers/redis.js'
import { freePort } from '../helpers/processes.js'

/** A clock the test moves by hand. */
function fakeClock(start = 1_000_000): { now: () => number; advance: (ms: number) => void } {
  let time = start
  return { now: () => time, advance: (ms) => void (time += ms) }
}

t.test('defaults: 20 failures per 60 s, 100 000 addresses', async (t) => {
  const throttle = new AuthFailureThrottle()
  t.equal(DEFAULT_LIMIT, 20)
  t.equal(DEFAULT_WINDOW_MS, 60_000)
  t.equal(DEFAULT_MAX_TRACKED, 100_000)
  t.equal(throttle.limit, 20)
  t.equal(throttle.windowMs, 60_000)
  t.equal(throttle.maxTracked, 100_000)
  t.throws(() => new AuthFailureThrottle({ limit: 0 }), RangeError)
  t.throws(() => new AuthFailureThrottle({ windowMs: 1.5 }), RangeError)
})

t.test('one replica: blocked after limit failures until the window ends; other addresses are not', async (t) => {
  const clock = fakeClock()
  const throttle = new AuthFailureThrottle({ limit: 3, windowMs: 60_000, now: clock.now })
  t.same(throttle.check('198.51.100.7'), { blocked: false }, 'never seen')
  for (let i = 0; i < 3; i++) {
    t.same(throttle.check('198.51.100.7'), { blocked: false }, `failure ${i + 1} is admitted`)
    throttle.recordFailure('198.51.100.7')
  }
  t.same(throttle.check('198.51.100.7'), { blocked: true, retryAfterSeconds: 60 }, 'the next attempt is refused for the rest of the window')
  t.same(throttle.check('198.51.100.8'), { blocked: false }, 'another address is not')
  t.same(throttle.check('2001:db8::7'), { blocked: false }, 'nor an IPv6 one')
  clock.advance(20_500)
  t.same(throttle.check('198.51.100.7'), { blocked: true, retryAfterSeconds: 40 }, 'Retry-After counts down, rounded up')
  t.same(throttle.check('198.51.100.7', clock.now() + 39_499), { blocked: true, retryAfterSeconds: 1 }, 'never 0 while blocked')
  clock.advance(39_500)
  t.same(throttle.check('198.51.100.7'), { blocked: false }, 'admitted again when the window ends')
  t.equal(throttle.tracked, 0, 'and the expired entry is dropped')
  throttle.recordFailure('198.51.100.7')
  t.same(throttle.check('198.51.100.7'), { blocked: false }, 'a new window starts from 1')
})

t.test('local state is bounded: the oldest addresses are evicted, expired ones dropped', async (t) => {
  const clock = fakeClock()
  const throttle = new AuthFailureThrottle({ limit: 2, maxTracked: 1_000, now: clock.now })
  throttle.recordFailure('198.51.100.1')
  throttle.recordFailure('198.51.100.1')
  t.ok(throttle.check('198.51.100.1').blocked)
  for (let i = 0; i < 10_000; i++) throttle.recordFailure(`10.0.${i >> 8}.${i & 255}`)
  t.equal(throttle.tracked, 1_000, 'a flood of distinct addresses keeps 1 000')
  t.notOk(throttle.check('198.51.100.1').blocked, 'the oldest went first')
  throttle.recordFailure('10.0.39.15') // the last of the flood
  t.ok(throttle.check('10.0.39.15').blocked, 'the newest are still counted')

  clock.advance(60_001)
  for (let i = 0; i < 200; i++) throttle.recordFailure('203.0.113.9')
  t.equal(throttle.tracked, 1, 'expired entries are dropped as new failures come in')

  const big = new AuthFailureThrottle()
  for (let i = 0; i < 150_000; i++) big.recordFailure(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`)
  t.equal(big.tracked, 100_000, 'the default bound: 100 000 addresses')
})

t.test('with Redis: blocked after limit failures, per address, under a hashed key', async (t) => {
  const redis = await createTestRedis(t)
  const throttle = new AuthFailureThrottle({ redis: redis.client, prefix: redis.prefix, limit: 4, windowMs: 10_000 })
  for (let i = 0; i < 4; i++) {
    t.notOk(throttle.check('198.51.100.7').blocked, `failure ${i + 1} is admitted`)
    throttle.recordFailure('198.51.100.7')
  }
  throttle.recordFailure('198.51.100.8')
  await throttle.settled()
  const refused = throttle.check('198.51.100.7')
  t.ok(refused.blocked, 'blocked after limit failures')
  if (refused.blocked) t.ok(refused.retryAfterSeconds >= 9 && refused.retryAfterSeconds <= 10, `Retry-After ${refused.retryAfterSeconds}`)
  t.notOk(throttle.check('198.51.100.8').blocked, 'another address is not')

  const keys = (await redis.client.keys(`${redis.prefix}*`)).sort()
  t.equal(keys.length, 2, 'one key per address')
  for (const key of keys) {
    t.match(key, new RegExp(`^${redis.prefix}auth-fail:[0-9a-f]{64}$`), 'prefix, auth-fail: and a SHA-256')
    t.notMatch(key, /198\.51\.100/, 'never the address itself')
  }
  const key = throttle.redisKey('198.51.100.7')
  t.equal(await redis.client.get(key), '4', 'the shared count')
  const ttl = await redis.client.pttl(key)
  t.ok(ttl > 0 && ttl <= 10_000, `the key expires with the window (${ttl} ms)`)
})

t.test('with Redis: the window ends, locally and in Redis', async (t) => {
  const redis = await createTestRedis(t)
  const throttle = new AuthFailureThrottle({ redis: redis.client, prefix: redis.prefix, limit: 2, windowMs: 300 })
  throttle.recordFailure('198.51.100.7')
  throttle.recordFailure('198.51.100.7')
  await throttle.settled()
  t.ok(throttle.check('198.51.100.7').blocked)
  await sleep(400)
  t.notOk(throttle.check('198.51.100.7').blocked, 'admitted when the window ends')
  throttle.recordFailure('198.51.100.7')
  await throttle.settled()
  t.equal(await redis.client.get(throttle.redisKey('198.51.100.7')), '1', 'the shared count started over')
  t.notOk(throttle.check('198.51.100.7').blocked)
})

/** An attacker spreading attempts over replicas in the given order; answers how many failures were admitted. */
async function attack(replicas: AuthFailureThrottle[], order: (attempt: number) => number, attempts: number, client = '203.0.113.66'): Promise<number> {
  let admitted = 0
  for (let attempt = 0; attempt < attempts; attempt++) {
    const replica = replicas[order(attempt)] as AuthFailureThrottle
    if (replica.check(client).blocked) continue
    admitted++
    replica.recordFailure(client)
    await replica.settled()
  }
  return admitted
}

t.test('replicas sharing Redis hold the limit within limit + N - 1', async (t) => {
  const limit = 5
  const cases: Array<[string, number, (attempt: number) => number]> = [
    ['2 replicas, alternating', 2, (i) => i % 2],
    ['3 replicas, round robin', 3, (i) => i % 3],
    ['3 replicas, one at a time', 3, (i) => Math.min(2, Math.floor(i / 4))],
    ['4 replicas, scattered', 4, (i) => (i * 7 + 3) % 4],
  ]
  for (const [name, n, order] of cases) {
    const redis = await createTestRedis(t)
    const replicas = Array.from({ length: n }, () => new AuthFailureThrottle({ redis: redis.client, prefix: redis.prefix, limit, windowMs: 10_000 }))
    const admitted = await attack(replicas, order, 100)
    t.ok(admitted >= limit && admitted <= limit + n - 1, `${name}: ${admitted} admitted, at most ${limit + n - 1}`)
    for (const [i, replica] of replicas.entries()) {
      replica.recordFailure('203.0.113.66') // a replica that saw fewer learns it on its next failure
      await replica.settled()
      t.ok(replica.check('203.0.113.66').blocked, `${name}: replica ${i + 1} refuses the client`)
      t.notOk(replica.check('203.0.113.67').blocked, `${name}: replica ${i + 1} admits another address`)
    }
  }

  // Without the shared count, each replica would admit its own limit.
  const alone = [new AuthFailureThrottle({ limit }), new AuthFailureThrottle({ limit })]
  t.equal(await attack(alone, (i) => i % 2, 100), 2 * limit, 'without Redis, 2 replicas admit 2 × limit')
})

t.test('Redis unreachable: the throttle goes on locally and reports the errors', async (t) => {
  const port = await freePort() // nothing listens there
  const client = createRedis(`redis://127.0.0.1:${port}`, 'auth-failure-throttle-test')
  t.teardown(() => client.disconnect())
  const errors: unknown[] = []
  const throttle = new AuthFailureThrottle({ redis: client, prefix: 'unused:', limit: 3, onError: (error) => errors.push(error) })
  for (let i = 0; i < 3; i++) {
    t.notOk(throttle.check('198.51.100.7').blocked, `failure ${i + 1} is admitted`)
    throttle.recordFailure('198.51.100.7')
  }
  const started = Date.now()
  await throttle.settled()
  t.ok(Date.now() - started < 3_000, 'updates fail fast (no offline queue)')
  t.ok(throttle.check('198.51.100.7').blocked, 'blocked on the local count alone')
  t.notOk(throttle.check('198.51.100.8').blocked, 'another address is not')
  t.equal(errors.length, 3, 'each failed update is reported')
  t.ok(errors.every((error) => error instanceof Error))
})

t.test('Redis lost mid-way: the local count carries on', async (t) => {
  const redis = await createTestRedis(t)
  const client = createRedis(redis.url, 'auth-failure-throttle-test')
  await client.connect()
  const errors: unknown[] = []
  const throttle = new AuthFailureThrottle({ redis: client, prefix: redis.prefix, limit: 4, onError: (error) => errors.push(error) })
  throttle.recordFailure('198.51.100.7')
  throttle.recordFailure('198.51.100.7')
  await throttle.settled()
  t.equal(errors.length, 0)
  client.disconnect()
  throttle.recordFailure('198.51.100.7')
  t.notOk(throttle.check('198.51.100.7').blocked)
  throttle.recordFailure('198.51.100.7')
  await throttle.settled()
  t.ok(errors.length > 0, 'the updates failed')
  t.ok(throttle.check('198.51.100.7').blocked, 'blocked on the local count')
})
