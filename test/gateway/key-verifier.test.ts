/**
 * Key verification in process, against the real Postgres and Redis: what a
 * warm key costs (nothing past memory), how Postgres is shielded, how a
 * lookup that races an invalidation is kept out of the cache, when the
 * in-process cache is trusted, and SET NX against the revoker's marker.
 */
import t from 'tap'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { createAgency, createSubAccount } from '@scoped/agency-service/tenants'
import { createKeyInvalidator } from '@scoped/agency-service/invalidator'
import type { CachedKeyState } from '@scoped/shared/key-invalidation'
import { localOnlyInvalidator, redisNames } from '@scoped/shared/key-invalidation'
import type { KeyLookup } from '@scoped/shared/key-lookup'
import { lookupKeyByHash } from '@scoped/shared/key-lookup'
import { generateKey, hashKey } from '@scoped/shared/keys'
import { createLogger } from '@scoped/shared/logger'
import { createRedis } from '@scoped/shared/redis'
import { InvalidationListener } from '@scoped/gateway/invalidation-listener'
import { KeyCache, defaultKeyCacheOptions } from '@scoped/gateway/key-cache'
import { KeyVerifier } from '@scoped/gateway/key-verifier'
import type { KeyStore } from '@scoped/gateway/key-verifier'
import { GatewayMetrics } from '@scoped/gateway/metrics'
import { parseCachedKeyState, RedisKeyCache } from '@scoped/gateway/redis-key-cache'
import type { SharedKeyCache } from '@scoped/gateway/redis-key-cache'
import { parseRouteMap } from '@scoped/gateway/route-map'
import { createTestDatabase } from '../helpers/database.js'
import { createTestRedis } from '../helpers/redis.js'

const log = createLogger('test', 'silent')
const metrics = new GatewayMetrics(parseRouteMap('routes:\n  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }\n', 'test'))
const active: CachedKeyState = { status: 'active', tenant: { scope: 'SUB-ACCOUNT', agencyId: 'a', subAccountId: 's', keyId: 'k' } }

t.test('KeyCache: what is served, when', async (t) => {
  const cache = new KeyCache()
  t.notOk(cache.fill('h', active, cache.generation, 0), 'untrusted: no active entry is kept')
  t.ok(cache.fill('u', { status: 'unknown' }, cache.generation, 0), 'an unknown key is kept untrusted')
  t.same(cache.get('u', 1), { status: 'unknown' })
  t.equal(cache.get('u', defaultKeyCacheOptions.unknownTtlMs + 1), undefined, 'until its TTL')

  cache.trust(1_000)
  const generation = cache.generation
  t.ok(cache.fill('h', active, generation, 1_000))
  t.same(cache.get('h', 2_000), active, 'trusted: served')
  cache.heartbeat(2_000)
  t.same(cache.get('h', 2_000 + defaultKeyCacheOptions.staleAfterMs), active, 'within the heartbeat window')
  t.equal(cache.get('h', 2_001 + defaultKeyCacheOptions.staleAfterMs), undefined, 'a missed heartbeat: not served')
  t.notOk(cache.isTrusted(2_001 + defaultKeyCacheOptions.staleAfterMs), 'and no longer trusted')
  t.equal(cache.size().active, 0, 'and emptied')

  cache.trust(10_000)
  const before = cache.generation
  cache.drop(['other'])
  t.notOk(cache.fill('h', active, before, 10_000), 'a fill whose lookup raced an invalidation is skipped')
  t.ok(cache.fill('h', active, cache.generation, 10_000))
  cache.drop(['h'])
  t.equal(cache.get('h', 10_001), undefined, 'dropped by an invalidation')
  t.ok(cache.fill('h', active, cache.generation, 10_000))
  cache.distrust()
  t.equal(cache.get('h', 10_001), undefined, 'distrusted: gone')
  t.ok(cache.fill('r', { status: 'revoked' }, cache.generation, 10_000))
  t.same(cache.get('r', 10_001), { status: 'revoked' }, 'terminal states stay while untrusted')

  const small = new KeyCache({ ...defaultKeyCacheOptions, maxEntries: 2 })
  for (const hash of ['a', 'b', 'c']) small.fill(hash, { status: 'unknown' }, small.generation, 0)
  t.same(small.size(), { active: 0, settled: 2 }, 'bounded; the oldest goes')
  t.equal(small.get('a', 1), undefined)
})

t.test('parseCachedKeyState refuses anything malformed', async (t) => {
  t.same(parseCachedKeyState(JSON.stringify(active)), active)
  t.same(parseCachedKeyState('{"status":"revoked"}'), { status: 'revoked' })
  const agency = { status: 'active', tenant: { scope: 'AGENCY', agencyId: 'a', subAccountId: null, keyId: 'k' } }
  t.same(parseCachedKeyState(JSON.stringify(agency)), agency)
  for (const bad of ['', 'nope', 'null', '{}', '{"status":"active"}', '{"status":"valid"}', JSON.stringify({ status: 'active', tenant: { ...active.tenant, scope: 'ROOT' } }), JSON.stringify({ status: 'active', tenant: { scope: 'AGENCY', agencyId: 'a', subAccountId: 's', keyId: 'k' } }), JSON.stringify({ status: 'active', tenant: { scope: 'SUB-ACCOUNT', agencyId: 'a', subAccountId: null, keyId: 'k' } })]) {
    t.equal(parseCachedKeyState(bad), undefined, bad)
  }
})

const db = await createTestDatabase(t)
const redis = await createTestRedis(t)
const agency = await createAgency(db.pool, 'Acme')
const sub = await createSubAccount(db.pool, agency.id, 'West')
const keys = new KeyService(db.pool, localOnlyInvalidator)
const newKey = () => keys.create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'k', 'test')

/** The real Postgres lookup, counted, and optionally held until released. */
function countingStore(): KeyStore & { calls: number; hold(): () => void } {
  let gate: Promise<void> | undefined
  const store = {
    calls: 0,
    async lookup(hash: string): Promise<KeyLookup> {
      store.calls++
      const result = await lookupKeyByHash(db.pool, hash)
      if (gate !== undefined) await gate
      return result
    },
    hold() {
      let release = (): void => undefined
      gate = new Promise<void>((resolve) => (release = resolve))
      return () => {
        gate = undefined
        release()
      }
    },
  }
  return store
}

function countingShared(shared: SharedKeyCache): SharedKeyCache & { reads: number; writes: number } {
  const counted = {
    reads: 0,
    writes: 0,
    read: (hash: string) => {
      counted.reads++
      return shared.read(hash)
    },
    write: (hash: string, state: CachedKeyState) => {
      counted.writes++
      shared.write(hash, state)
    },
  }
  return counted
}

/** A verifier with a real listener on the test's Redis prefix (so its cache is trusted). */
async function withRedis(t: { teardown(fn: () => unknown): void }) {
  const commands = createRedis(redis.url, 'test-commands')
  const subscriber = createRedis(redis.url, 'test-subscriber')
  await commands.connect()
  const cache = new KeyCache()
  const listener = new InvalidationListener({ subscriber, commands, prefix: redis.prefix, cache, replicaId: 'test', log, metrics, heartbeatIntervalMs: 200 })
  await listener.start()
  t.teardown(async () => {
    await listener.stop()
    commands.disconnect()
  })
  const store = countingStore()
  const shared = countingShared(new RedisKeyCache(commands, redis.prefix))
  const verifier = new KeyVerifier({ store, shared, cache, metrics, log })
  return { store, shared, cache, verifier, listener, commands, subscriber }
}

/** What a request does: memory first, then the rest. */
async function check(verifier: KeyVerifier, hash: string) {
  return verifier.cached(hash, performance.now()) ?? (await verifier.verify(hash))
}

t.test('with Redis: a warm key costs no Postgres and no Redis round trip', async (t) => {
  const { store, shared, verifier, listener } = await withRedis(t)
  t.ok(listener.healthy, 'subscribed')
  const key = await newKey()
  const hash = hashKey(key.key)
  t.match(await check(verifier, hash), { status: 'active', tenant: { keyId: key.id } })
  t.same([store.calls, shared.reads, shared.writes], [1, 1, 1], 'the first check goes all the way')
  for (let i = 0; i < 50; i++) t.match(await check(verifier, hash), { status: 'active' })
  t.same([store.calls, shared.reads], [1, 1], 'fifty more cost nothing past memory')

  const second = createRedis(redis.url, 'test-second')
  await second.connect()
  t.teardown(() => second.disconnect())
  const other = new KeyVerifier({ store: countingStore(), shared: new RedisKeyCache(second, redis.prefix), cache: new KeyCache(), metrics, log })
  t.match(await other.verify(hash), { status: 'active' }, 'another replica finds it in Redis')
})

t.test('without Redis: every check of a valid key reads Postgres; unknown keys are remembered', async (t) => {
  const store = countingStore()
  const verifier = new KeyVerifier({ store, shared: null, cache: new KeyCache(), metrics, log })
  const key = await newKey()
  for (let i = 0; i < 3; i++) t.match(await check(verifier, hashKey(key.key)), { status: 'active' })
  t.equal(store.calls, 3)
  const unknown = hashKey(generateKey())
  for (let i = 0; i < 3; i++) t.same(await check(verifier, unknown), { status: 'unknown' })
  t.equal(store.calls, 4, 'an unknown key is looked up once')
})

t.test('a flood of one unknown key is one lookup (single flight, then negative cache, also in Redis)', async (t) => {
  const { store, shared, verifier } = await withRedis(t)
  const unknown = hashKey(generateKey())
  const results = await Promise.all(Array.from({ length: 50 }, () => check(verifier, unknown)))
  t.ok(results.every((result) => result.status === 'unknown'))
  t.equal(store.calls, 1, 'one Postgres lookup for fifty concurrent requests')
  t.equal(shared.reads, 1, 'one Redis read')
  await check(verifier, unknown)
  t.equal(store.calls, 1, 'then remembered')
  t.same(parseCachedKeyState((await redis.client.get(redisNames(redis.prefix).cacheEntry(unknown)))!), { status: 'unknown' }, 'and shared with the other replicas')
})

t.test('a lookup that raced an invalidation is not cached, and is not shared with later requests', async (t) => {
  const { store, cache, verifier, commands } = await withRedis(t)
  const key = await newKey()
  const hash = hashKey(key.key)
  const release = store.hold()
  const first = verifier.verify(hash)
  await new Promise((resolve) => setTimeout(resolve, 50))
  // The revoke: committed, marker written, published, acknowledged.
  const invalidator = await createKeyInvalidator(redis.url, redis.prefix, 'test-revoker')
  t.teardown(() => invalidator.close())
  await new KeyService(db.pool, invalidator).revoke(key.id, 'test')
  // A request after the revoke returned joins nothing stale.
  const later = verifier.verify(hash)
  release()
  t.match(await first, { status: 'active' }, 'the request already in flight completes as it started')
  t.same(await later, { status: 'revoked' }, 'the request after the revoke is refused')
  t.same(cache.get(hash, performance.now()), { status: 'revoked' }, 'the raced result never entered the cache')
  t.equal(await commands.get(redisNames(redis.prefix).cacheEntry(hash)), JSON.stringify({ status: 'revoked' }), 'nor replaced the revoker’s marker')
})

t.test('SET NX: a fill never overwrites the revoker’s marker', async (t) => {
  const commands = createRedis(redis.url, 'test-nx')
  await commands.connect()
  t.teardown(() => commands.disconnect())
  const shared = new RedisKeyCache(commands, redis.prefix)
  const hash = hashKey(generateKey())
  const entry = redisNames(redis.prefix).cacheEntry(hash)
  await redis.client.set(entry, JSON.stringify({ status: 'revoked' }))
  shared.write(hash, active)
  await commands.ping()
  t.equal(await redis.client.get(entry), JSON.stringify({ status: 'revoked' }))
  const fresh = hashKey(generateKey())
  shared.write(fresh, active)
  await commands.ping()
  t.same(await shared.read(fresh), active)
  const ttl = await redis.client.ttl(redisNames(redis.prefix).cacheEntry(fresh))
  t.ok(ttl > 0 && ttl <= 300, 'with an expiry')
})

t.test('the listener: an invalidation drops the key and is acknowledged; a lost connection distrusts the cache', async (t) => {
  const { cache, verifier, listener, subscriber } = await withRedis(t)
  const key = await newKey()
  const hash = hashKey(key.key)
  await check(verifier, hash)
  t.match(cache.get(hash, performance.now()), { status: 'active' }, 'cached')
  const invalidator = await createKeyInvalidator(redis.url, redis.prefix, 'test-revoker')
  t.teardown(() => invalidator.close())
  const report = await invalidator.invalidate([{ hash, state: 'revoked' }])
  t.same(report, { subscribers: 1, acknowledged: 1 })
  t.equal(cache.get(hash, performance.now()), undefined, 'dropped before the acknowledgement')

  await check(verifier, hashKey((await newKey()).key))
  t.equal(cache.size().active, 1)
  const lost = new Promise((resolve) => subscriber.once('close', resolve))
  subscriber.disconnect(true)
  await lost
  t.notOk(listener.healthy, 'unhealthy')
  t.equal(cache.size().active, 0, 'emptied')
  const deadline = Date.now() + 5_000
  while (!listener.healthy && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  t.ok(listener.healthy, 'healthy again after it resubscribed')
})

t.test('failures: Redis errors fall back to Postgres; Postgres errors, slowness and overload are unavailable', async (t) => {
  const key = await newKey()
  const hash = hashKey(key.key)
  const broken: SharedKeyCache = { read: () => Promise.reject(new Error('redis down')), write: () => undefined }
  t.match(await new KeyVerifier({ store: countingStore(), shared: broken, cache: new KeyCache(), metrics, log }).verify(hash), { status: 'active' })

  const failing: KeyStore = { lookup: () => Promise.reject(new Error('connection refused')) }
  t.same(await new KeyVerifier({ store: failing, shared: broken, cache: new KeyCache(), metrics, log }).verify(hash), { status: 'unavailable' })

  const slow: KeyStore = { lookup: () => new Promise((resolve) => setTimeout(() => resolve({ status: 'unknown' }), 500)) }
  t.same(await new KeyVerifier({ store: slow, shared: null, cache: new KeyCache(), metrics, log, lookupTimeoutMs: 50 }).verify(hash), { status: 'unavailable' })

  const store = countingStore()
  const release = store.hold()
  const bounded = new KeyVerifier({ store, shared: null, cache: new KeyCache(), metrics, log, maxPendingLookups: 2 })
  const pending = [bounded.verify(hashKey(generateKey())), bounded.verify(hashKey(generateKey()))]
  t.same(await bounded.verify(hashKey(generateKey())), { status: 'unavailable' }, 'a third distinct lookup is refused')
  release()
  t.same(await Promise.all(pending), [{ status: 'unknown' }, { status: 'unknown' }])
})
