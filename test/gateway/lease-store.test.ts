/**
 * The lease store contract (rate-limit/lease-store.ts), one set of cases run
 * against both stores: Redis (the real server, its own clock) and memory (a
 * clock the test moves). Where time must pass, `elapse` moves the memory
 * store's clock and waits for the Redis one; the cases only assert what the
 * elapsed time guarantees at least (never an upper bound on time).
 */
import t from 'tap'
import type { Test } from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { createRedis } from '@scoped/shared/redis'
import type { LeaseStore } from '@scoped/gateway/rate-limit/lease-store'
import { MemoryLeaseStore } from '@scoped/gateway/rate-limit/memory-store'
import { RedisLeaseStore } from '@scoped/gateway/rate-limit/redis-store'
import type { Teardown } from '../helpers/teardown.js'
import { createTestRedis } from '../helpers/redis.js'

interface StoreUnderTest {
  store: LeaseStore
  /** Lets at least `ms` of the store's clock pass. */
  elapse(ms: number): Promise<void>
}

const stores: Record<string, (t: Teardown) => Promise<StoreUnderTest>> = {
  redis: async (t) => {
    const redis = await createTestRedis(t)
    const client = createRedis(redis.url, 'lease-store-test')
    t.teardown(() => client.disconnect())
    await client.connect()
    return { store: new RedisLeaseStore(client, redis.prefix), elapse: (ms) => sleep(ms + 2) }
  },
  memory: async () => {
    let now = 1_000
    return {
      store: new MemoryLeaseStore({ now: () => now }),
      elapse: async (ms) => void (now += ms),
    }
  },
}

/** Tokens left, to the precision a slow refill allows while a test runs (rate 0.001 per second: well under 0.01 in 10 s). */
function about(t: Test, left: number, expected: number, why: string): void {
  t.ok(left >= expected && left < expected + 0.01, `${why}: ${left} ≈ ${expected}`)
}

for (const [name, make] of Object.entries(stores)) {
  t.test(`${name}: a new bucket starts full and grants whole tokens, never more than it holds`, async (t) => {
    const { store } = await make(t)
    const first = await store.lease('b|new', 0.001, 10, 4)
    t.equal(first.granted, 4)
    about(t, first.left, 6, 'left after the grant')
    const second = await store.lease('b|new', 0.001, 10, 8)
    t.equal(second.granted, 6, 'what is left, not what was asked')
    about(t, second.left, 0, 'empty')
    t.equal((await store.lease('b|new', 0.001, 10, 1)).granted, 0, 'an empty bucket grants nothing')
    t.equal((await store.lease('b|other', 0.001, 10, 10)).granted, 10, 'another bucket has its own tokens')
  })

  t.test(`${name}: tokens given back return to the bucket, never past its burst`, async (t) => {
    const { store } = await make(t)
    await store.lease('b|back', 0.001, 10, 10)
    const returned = await store.lease('b|back', 0.001, 10, 0, 3)
    t.equal(returned.granted, 0, 'giving back asks for nothing')
    about(t, returned.left, 3, 'the three are back')
    about(t, (await store.lease('b|back', 0.001, 10, 0, 100)).left, 10, 'capped at the burst')
    const again = await store.lease('b|back', 0.001, 10, 2, 1)
    t.equal(again.granted, 2, 'given back before the grant, in one lease')
    about(t, again.left, 8, 'a full bucket given one more stays full, then two go')
  })

  t.test(`${name}: a bucket refills at its rate, up to its burst`, async (t) => {
    const { store, elapse } = await make(t)
    t.equal((await store.lease('b|refill', 100, 5, 5)).granted, 5)
    await elapse(30)
    const refilled = await store.lease('b|refill', 100, 5, 5)
    t.ok(refilled.granted >= 3 && refilled.granted <= 5, `30 ms at 100 per second: 3 tokens at least, 5 at most (${refilled.granted})`)
    await elapse(100)
    const full = await store.lease('b|refill', 100, 5, 10)
    t.equal(full.granted, 5, 'never more than the burst, however long it waited')
  })

  t.test(`${name}: a slow bucket grants fractions only once they make a whole token`, async (t) => {
    const { store, elapse } = await make(t)
    t.equal((await store.lease('b|slow', 0.05, 1, 1)).granted, 1)
    await elapse(100)
    const partial = await store.lease('b|slow', 0.05, 1, 1)
    t.equal(partial.granted, 0, 'a part of a token is not a token')
    t.ok(partial.left > 0 && partial.left < 1, `but it is counted (${partial.left})`)
  })
}

t.test('memory: at most maxBuckets are held; the one leased from longest ago goes first', async (t) => {
  const store = new MemoryLeaseStore({ now: () => 0, maxBuckets: 3 })
  for (const id of ['a', 'b', 'c']) await store.lease(id, 0.001, 10, 10)
  await store.lease('a', 0.001, 10, 0)
  await store.lease('d', 0.001, 10, 10)
  t.equal(store.size, 3)
  t.equal((await store.lease('a', 0.001, 10, 1)).granted, 0, '`a` was leased from again, so it was kept (still empty)')
  t.equal((await store.lease('b', 0.001, 10, 1)).granted, 1, '`b` was dropped: it starts full again')
})
