/**
 * Key verification in process, against the real Postgres and Redis: the
 * order of the layers (memory, Redis, Postgres) and what a warm key costs
 * (nothing past memory); how Postgres is shielded (single flight, negative
 * caching in memory and in Redis, a bound on lookups in flight, and on those
 * of one client); that a store that cannot answer is `unavailable`, never
 * "unknown"; that a lookup racing a revoke never puts the key back; that a
 * Redis entry that fails its MAC is ignored; that a genuine Redis "active"
 * entry is believed only while this replica is current with the invalidation
 * log; compare-and-set on the state version (never over the revoker's
 * marker, never an older version over a newer); a lookup that raced a
 * change; and the Redis listener.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { randomUUID } from 'node:crypto'
import t from 'tap'
import type { Test } from 'tap'
import { createPool } from '@scoped/shared/db'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import type { KeyState } from '@scoped/shared/key-state'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { KeyStateCodec, redisNames, redisTtlSeconds } from '@scoped/shared/key-state'
import { lookupKeyByHash } from '@scoped/shared/key-store'
import { generateKey, hashKey } from '@scoped/shared/keys'
import { createLogger } from '@scoped/shared/logger'
import { connectRedis, createRedis } from '@scoped/shared/redis'
import type { Redis } from '@scoped/shared/redis'
import { InvalidationFollower } from '@scoped/gateway/invalidation-follower'
import { InvalidationListener } from '@scoped/gateway/invalidation-listener'
import { KeyCache } from '@scoped/gateway/key-cache'
import { KeyVerifier } from '@scoped/gateway/key-verifier'
import type { KeyStore, KeyVerifierDeps } from '@scoped/gateway/key-verifier'
import { GatewayMetrics } from '@scoped/gateway/metrics'
import { RedisKeyCache } from '@scoped/gateway/redis-key-cache'
import type { SharedKeyCache } from '@scoped/gateway/redis-key-cache'
import { parseRouteMap } from '@scoped/gateway/route-map'
import { createTestDatabase } from '../helpers/database.js'
import { createTestRedis } from '../helpers/redis.js'
import { createTestTenants } from '../helpers/tenants.js'
import { newKeyCacheSecret, testInvalidator } from '../helpers/invalidation.js'
import { freePort } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait-for.js'

const log = createLogger('test', 'silent')
const metrics = new GatewayMetrics(parseRouteMap('routes:\n  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }\n', 'test'))
const db = await createTestDatabase(t)
const redis = await createTestRedis(t)
const tenants = await createTestTenants(db.pool)
/** The key-cache secret of this "deployment": the gateways' and the revoker's. */
const secret = newKeyCacheSecret()
const codec = new KeyStateCodec(secret)
const names = redisNames(redis.prefix)
/** Revokes without Redis, confirmed through Postgres (only tests that start a follower register a replica). */
const keys = new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null))

async function newKey(): Promise<{ id: string; hash: string }> {
  const created = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }, 'k', 'test')
  return { id: created.id, hash: hashKey(created.key) }
}
const unknownHash = (): string => hashKey(generateKey())
const ownerOf = (keyId: string): Tenant => ({ scope: 'SUB-ACCOUNT', agencyId: tenants.agencyId, subAccountId: tenants.subAccountId, keyId })
const activeState = (keyId: string = randomUUID()): KeyState => ({ status: 'active', tenant: ownerOf(keyId) })
/** A revoked key as Postgres (or the log) says it: with its owner, for its usage. */
const revokedState = (keyId: string): KeyState => ({ status: 'revoked', tenant: ownerOf(keyId) })

/** Which layers a lookup reached, in order. */
type Layer = 'redis' | 'postgres'

interface CountingStore extends KeyStore {
  calls: number
  /** Lookups that have read Postgres (held ones included). */
  answered: number
  /** Holds every lookup (after it has read Postgres) until the returned function is called. */
  hold(): () => void
}

/** The real Postgres lookup, counted, optionally held after reading until released. */
function countingStore(events: Layer[] = [], lookup: (hash: string) => Promise<KeyState> = (hash) => lookupKeyByHash(db.pool, hash)): CountingStore {
  let gate: Promise<void> | undefined
  const store: CountingStore = {
    calls: 0,
    answered: 0,
    async lookup(hash) {
      store.calls++
      events.push('postgres')
      const result = await lookup(hash)
      store.answered++
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

function countingShared(shared: SharedKeyCache, events: Layer[]): SharedKeyCache & { reads: number; writes: number } {
  const counted = {
    reads: 0,
    writes: 0,
    read: (hash: string) => {
      counted.reads++
      events.push('redis')
      return shared.read(hash)
    },
    write: (hash: string, state: KeyState) => {
      counted.writes++
      shared.write(hash, state)
    },
  }
  return counted
}

async function redisCommands(t: Test, name: string): Promise<Redis> {
  const commands = createRedis(redis.url, name)
  await connectRedis(commands)
  t.teardown(() => commands.disconnect())
  return commands
}

interface ReplicaOptions {
  /** Share the test Redis (default) or run without one. */
  redis?: boolean
  /**
   * `follower`: a real invalidation log follower (registered: revokes wait for it);
   * `forced`: current for the whole test without a follower (only where nothing is revoked);
   * `never`: never current.
   */
  currency: 'follower' | 'forced' | 'never'
  verifier?: Partial<KeyVerifierDeps>
}

/** One gateway replica's key layer: cache, counted store and Redis layer, verifier. */
async function replica(t: Test, options: ReplicaOptions) {
  const events: Layer[] = []
  const cache = new KeyCache()
  const store = countingStore(events)
  const commands = options.redis === false ? null : await redisCommands(t, 'test-verifier')
  const shared = commands === null ? null : countingShared(new RedisKeyCache(commands, redis.prefix, codec), events)
  if (options.currency === 'forced') cache.currentUntilTime(Number.MAX_SAFE_INTEGER)
  if (options.currency === 'follower') {
    const follower = new InvalidationFollower({ pool: db.pool, cache, replicaId: `verifier-${randomUUID()}`, log, metrics, intervalMs: 50 })
    await follower.start()
    t.teardown(() => follower.stop())
  }
  const verifier = new KeyVerifier({ store, shared, cache, metrics, log, ...options.verifier })
  return { events, cache, store, shared, commands, verifier }
}

/** What a request does: memory first, then the rest. */
async function check(verifier: KeyVerifier, hash: string, client = '') {
  return verifier.cached(hash, performance.now()) ?? (await verifier.verify(hash, client))
}

async function redisEntry(hash: string): Promise<KeyState | undefined> {
  const text = await redis.client.get(names.cacheEntry(hash))
  return text === null ? undefined : codec.decodeEntry(hash, text, Date.now())
}

/** Waits for a fire-and-forget Redis write to land. */
async function settled(commands: Redis | null): Promise<void> {
  await commands?.ping()
}

async function forgedEntries(): Promise<number> {
  const match = /gateway_key_cache_forged_total\{kind="entry"\} (\d+)/.exec(await metrics.text())
  return match === null ? 0 : Number(match[1])
}

t.test('memory, then Redis, then Postgres: a warm key costs nothing past memory', async (t) => {
  const one = await replica(t, { currency: 'forced' })
  const key = await newKey()
  t.match(await check(one.verifier, key.hash), { status: 'active', tenant: { keyId: key.id } })
  t.same(one.events, ['redis', 'postgres'], 'the first check reads Redis, then Postgres')
  await settled(one.commands)
  t.match(await redisEntry(key.hash), { status: 'active', tenant: { keyId: key.id } }, 'and shares what it found in Redis, sealed')
  let warm = 0
  for (let i = 0; i < 50; i++) if ((await check(one.verifier, key.hash)).status === 'active') warm++
  t.equal(warm, 50, 'fifty more checks: active')
  t.same(one.events, ['redis', 'postgres'], 'fifty more cost nothing past memory')

  const two = await replica(t, { currency: 'forced' })
  t.match(await check(two.verifier, key.hash), { status: 'active', tenant: { keyId: key.id } }, 'another replica')
  t.same(two.events, ['redis'], 'finds it in Redis, without Postgres')
  await check(two.verifier, key.hash)
  t.same(two.events, ['redis'], 'then in its memory')
})

t.test('not current: a valid key is read from Postgres on every request; unknown keys are still remembered', async (t) => {
  const { store, verifier } = await replica(t, { redis: false, currency: 'never' })
  const key = await newKey()
  for (let i = 0; i < 3; i++) t.match(await check(verifier, key.hash), { status: 'active' })
  t.equal(store.calls, 3, 'no active state is cached while the cache is not current')
  const unknown = unknownHash()
  for (let i = 0; i < 3; i++) t.same(await check(verifier, unknown), { status: 'unknown' })
  t.equal(store.calls, 4, 'an unknown key is looked up once')

  const current = await replica(t, { redis: false, currency: 'follower' })
  for (let i = 0; i < 3; i++) t.match(await check(current.verifier, key.hash), { status: 'active' })
  t.equal(current.store.calls, 1, 'current (without Redis): cached after the first lookup')
})

t.test('a flood of one unknown key is one lookup: single flight, then negative caching, also in Redis', async (t) => {
  const { store, shared, commands, verifier } = await replica(t, { currency: 'forced' })
  const unknown = unknownHash()
  // From one client: requests that join a lookup in flight do not count against its bound.
  const results = await Promise.all(Array.from({ length: 50 }, () => check(verifier, unknown, '192.0.2.1')))
  t.same(new Set(results.map((result) => result.status)), new Set(['unknown']), 'all unknown')
  t.equal(store.calls, 1, 'one Postgres lookup for fifty concurrent requests')
  t.equal(shared!.reads, 1, 'one Redis read')
  await check(verifier, unknown)
  t.equal(store.calls, 1, 'then remembered')
  await settled(commands)
  t.same(await redisEntry(unknown), { status: 'unknown' }, 'and shared with the other replicas')
  const ttl = await redis.client.ttl(names.cacheEntry(unknown))
  t.ok(ttl > 0 && ttl <= redisTtlSeconds.unknown, 'for a short while')

  const other = await replica(t, { currency: 'never' })
  t.same(await check(other.verifier, unknown), { status: 'unknown' })
  t.same(other.events, ['redis'], 'another replica takes it from Redis')

  const key = await newKey()
  const active = await Promise.all(Array.from({ length: 20 }, (_, i) => verifier.verify(key.hash, `192.0.2.${i}`)))
  t.same(new Set(active.map((result) => result.status)), new Set(['active']), 'a valid key too')
  t.equal(store.calls, 2, 'one lookup for twenty concurrent requests')
})

t.test('the bound on lookups in flight, and on those of one client', async (t) => {
  const { store, verifier } = await replica(t, { redis: false, currency: 'forced', verifier: { maxPendingLookups: 2, maxPendingPerClient: 100 } })
  const release = store.hold()
  const pending = [verifier.verify(unknownHash(), 'a'), verifier.verify(unknownHash(), 'b')]
  t.same(await verifier.verify(unknownHash(), 'c'), { status: 'unavailable' }, 'a third distinct lookup is refused, whoever asks')
  t.equal(store.calls, 2, 'without reaching Postgres')
  release()
  t.same(await Promise.all(pending), [{ status: 'unknown' }, { status: 'unknown' }])
  t.same(await verifier.verify(unknownHash(), 'c'), { status: 'unknown' }, 'once they drained, lookups go through again')

  const perClient = await replica(t, { redis: false, currency: 'forced', verifier: { maxPendingLookups: 100, maxPendingPerClient: 2 } })
  const hold = perClient.store.hold()
  const shared = unknownHash()
  const flood = [perClient.verifier.verify(shared, '198.51.100.7'), perClient.verifier.verify(unknownHash(), '198.51.100.7')]
  t.same(await perClient.verifier.verify(unknownHash(), '198.51.100.7'), { status: 'unavailable' }, 'one client: a third lookup is refused')
  const joined = perClient.verifier.verify(shared, '198.51.100.7')
  t.equal(perClient.store.calls, 2, 'but one that joins a lookup in flight is let through: it costs the store nothing')
  const other = perClient.verifier.verify(unknownHash(), '203.0.113.9')
  await waitFor(() => perClient.store.calls === 3, 'the other client’s lookup to reach the store')
  t.equal(perClient.store.calls, 3, 'another client still gets its lookup')
  hold()
  t.same(await Promise.all([...flood, joined, other]), [{ status: 'unknown' }, { status: 'unknown' }, { status: 'unknown' }, { status: 'unknown' }])
  t.same(await perClient.verifier.verify(unknownHash(), '198.51.100.7'), { status: 'unknown' }, 'the client’s lookups are counted down when they settle')
})

t.test('a store that cannot answer is unavailable, never "unknown", and nothing of it is cached', async (t) => {
  const deadPool = createPool(`postgres://postgres@127.0.0.1:${await freePort()}/nowhere`, { max: 2 })
  t.teardown(() => deadPool.end())
  const key = await newKey()
  const brokenRedis: SharedKeyCache = { read: () => Promise.reject(new Error('redis down')), write: () => undefined }
  const postgresDown = (hash: string) => lookupKeyByHash(deadPool, hash)
  const postgresSlow = (hash: string) => sleep(300).then(() => lookupKeyByHash(db.pool, hash))
  const rows: Array<[string, SharedKeyCache | 'redis' | null, (hash: string) => Promise<KeyState>, string, Partial<KeyVerifierDeps>]> = [
    ['Postgres unreachable, no Redis', null, postgresDown, 'unavailable', {}],
    ['Postgres unreachable, Redis has nothing', 'redis', postgresDown, 'unavailable', {}],
    ['Postgres unreachable, Redis failing', brokenRedis, postgresDown, 'unavailable', {}],
    ['Postgres slower than the lookup timeout', null, postgresSlow, 'unavailable', { lookupTimeoutMs: 50 }],
    ['(control) Redis failing, Postgres answers', brokenRedis, (hash) => lookupKeyByHash(db.pool, hash), 'active', {}],
  ]
  for (const [name, sharedOption, lookup, expected, options] of rows) {
    for (const [which, hash] of [
      ['a valid key', key.hash],
      ['an unknown key', unknownHash()],
    ] as const) {
      const cache = new KeyCache()
      cache.currentUntilTime(Number.MAX_SAFE_INTEGER)
      const shared = sharedOption === 'redis' ? new RedisKeyCache(await redisCommands(t, 'test-down'), redis.prefix, codec) : sharedOption
      const verifier = new KeyVerifier({ store: countingStore([], lookup), shared, cache, metrics, log, ...options })
      const result = await verifier.verify(hash)
      if (expected === 'unavailable') {
        t.same(result, { status: 'unavailable' }, `${name}, ${which}: unavailable`)
        t.equal(cache.get(hash, performance.now()), undefined, `${name}, ${which}: nothing cached`)
        if (sharedOption === 'redis') t.equal(await redisEntry(hash), undefined, `${name}, ${which}: nothing written to Redis`)
      } else {
        t.equal(result.status, which === 'a valid key' ? 'active' : 'unknown', `${name}, ${which}`)
      }
    }
  }
  const cache = new KeyCache()
  const failing = new KeyVerifier({ store: countingStore([], postgresDown), shared: null, cache, metrics, log })
  const hash = unknownHash()
  t.same(await failing.verify(hash), { status: 'unavailable' })
  const working = new KeyVerifier({ store: countingStore(), shared: null, cache, metrics, log })
  t.same(await working.verify(hash), { status: 'unknown' }, 'the next lookup, once Postgres answers, gets the real answer')
})

t.test('a lookup that raced a revoke never puts the key back', async (t) => {
  const { store, cache, commands, verifier } = await replica(t, { currency: 'follower' })
  const subscriber = createRedis(redis.url, 'test-verifier-subscriber')
  const listener = new InvalidationListener({
    subscriber,
    commands: commands!,
    prefix: redis.prefix,
    codec,
    cache,
    replicaId: `listener-${randomUUID()}`,
    log,
    metrics,
  })
  await listener.start()
  t.teardown(() => listener.stop())
  const key = await newKey()
  const release = store.hold()
  const first = verifier.verify(key.hash)
  // Postgres has answered "active" to the first lookup, which is held before it can fill.
  await waitFor(() => store.answered > 0, 'Postgres to answer the first lookup', 10_000, 5)
  const revoked = await new KeyService(db.pool, testInvalidator(t, db.pool, { redis, secret })).revoke(key.id, 'test')
  t.same(revoked.invalidation, { confirmed: true, acknowledged: 1, unconfirmed: [], problems: [] }, 'the revoke returned, confirmed by this replica')
  // A request after the revoke returned: it must not take the stale lookup's answer.
  const later = verifier.verify(key.hash)
  release()
  t.match(await first, { status: 'active' }, 'the request already in flight completes as it started')
  t.same(await later, revokedState(key.id), 'the request after the revoke is refused')
  t.same(cache.get(key.hash, performance.now()), revokedState(key.id), 'the key is refused from memory')
  t.same(cache.size().active, 0, 'and the raced "active" never entered the cache, even beside the ended entry')
  await settled(commands)
  t.same(await redisEntry(key.hash), revokedState(key.id), 'nor replaced the revoker’s marker in Redis (which names the owner)')
  t.same(await check(verifier, key.hash), revokedState(key.id), 'and every later request is refused')
})

t.test('a Redis entry that fails its check is ignored, and Postgres answers', async (t) => {
  const active = await newKey()
  const revoked = await newKey()
  await keys.revoke(revoked.id, 'test')
  const other = new KeyStateCodec(newKeyCacheSecret())
  const later = Date.now() + 300_000
  const rows: Array<[string, string, (hash: string) => string, KeyState['status']]> = [
    ['sealed with another secret, claiming an unknown key is active', unknownHash(), (hash) => other.encodeEntry(hash, activeState(), later), 'unknown'],
    [
      'sealed with another secret, claiming a revoked key is active',
      revoked.hash,
      (hash) => other.encodeEntry(hash, activeState(revoked.id), later),
      'revoked',
    ],
    ['sealed with another secret, claiming a valid key is revoked', active.hash, (hash) => other.encodeEntry(hash, { status: 'revoked' }, later), 'active'],
    ['a genuine active entry of another key, moved here', revoked.hash, () => codec.encodeEntry(active.hash, activeState(active.id), later), 'revoked'],
    [
      'a genuine revoked entry naming its owner, moved to another key',
      active.hash,
      () => codec.encodeEntry(revoked.hash, revokedState(revoked.id), later),
      'active',
    ],
    [
      'sealed with another secret, naming another tenant as a revoked key’s owner',
      revoked.hash,
      (hash) => other.encodeEntry(hash, revokedState(randomUUID()), later),
      'revoked',
    ],
    ['a genuine active entry past its own expiry', revoked.hash, (hash) => codec.encodeEntry(hash, activeState(revoked.id), Date.now() - 1), 'revoked'],
    ['a bare JSON state, as entries were before', revoked.hash, () => JSON.stringify(activeState(revoked.id)), 'revoked'],
  ]
  for (const [name, hash, entry, expected] of rows) {
    await redis.client.set(names.cacheEntry(hash), entry(hash), 'EX', 60)
    const { store, verifier } = await replica(t, { currency: 'forced' })
    const before = await forgedEntries()
    t.equal((await verifier.verify(hash)).status, expected, `${name}: Postgres answers`)
    t.equal(store.calls, 1, `${name}: Postgres was asked`)
    t.equal(await forgedEntries(), before + 1, `${name}: counted`)
    await redis.client.del(names.cacheEntry(hash))
  }
})

t.test('a genuine Redis "active" entry is believed only while this replica is current', async (t) => {
  // A key revoked while Redis could not be written to: a genuine active entry from before the revoke is still there.
  const revoked = await newKey()
  await keys.revoke(revoked.id, 'test')
  await redis.client.set(names.cacheEntry(revoked.hash), codec.encodeEntry(revoked.hash, activeState(revoked.id), Date.now() + 300_000), 'EX', 300)

  const notCurrent = await replica(t, { currency: 'never' })
  t.same(await check(notCurrent.verifier, revoked.hash), revokedState(revoked.id), 'not current: the Redis entry is not believed; Postgres says revoked')
  t.same(notCurrent.events, ['redis', 'postgres'])

  const following = await replica(t, { currency: 'follower' })
  t.same(
    await check(following.verifier, revoked.hash),
    revokedState(revoked.id),
    'current through the log: the key was ended at start (with its owner), Redis is not even read',
  )
  t.same(following.events, [])

  const valid = await newKey()
  await redis.client.set(names.cacheEntry(valid.hash), codec.encodeEntry(valid.hash, activeState(valid.id), Date.now() + 300_000), 'EX', 300)
  const current = await replica(t, { currency: 'follower' })
  t.match(await check(current.verifier, valid.hash), { status: 'active', tenant: { keyId: valid.id } }, 'current: the genuine entry is believed')
  t.same(current.events, ['redis'], 'without asking Postgres')
  const stale = await replica(t, { currency: 'never' })
  t.match(await check(stale.verifier, valid.hash), { status: 'active' })
  t.match(await check(stale.verifier, valid.hash), { status: 'active' })
  t.same(stale.events, ['redis', 'postgres', 'redis', 'postgres'], 'not current: Postgres is asked every time')

  const marked = await newKey()
  await redis.client.set(names.cacheEntry(marked.hash), codec.encodeEntry(marked.hash, { status: 'revoked' }, Date.now() + 60_000), 'EX', 60)
  const anyone = await replica(t, { currency: 'never' })
  t.same(await check(anyone.verifier, marked.hash), { status: 'revoked' }, 'a genuine terminal marker is believed current or not')
  t.same(anyone.events, ['redis', 'postgres'], 'Postgres is asked whose key it is (the marker does not say)…')
  t.same(await check(anyone.verifier, marked.hash), { status: 'revoked' }, '…and its "active" never un-ends the key: owned by no one')
  t.same(anyone.events, ['redis', 'postgres'], 'and then refused from memory')
})

t.test("a revoked key's owner: from Postgres when what is held does not say, never anything but ended", async (t) => {
  // A marker that names no owner (written before revokers named it): the miss that reads it asks Postgres, whose answer names it.
  const marked = await newKey()
  await keys.revoke(marked.id, 'test')
  await redis.client.set(names.cacheEntry(marked.hash), codec.encodeEntry(marked.hash, { status: 'revoked' }, Date.now() + 60_000), 'EX', 60)
  const one = await replica(t, { currency: 'never' })
  t.same(await check(one.verifier, marked.hash), revokedState(marked.id), 'a marker without an owner: Postgres names it')
  t.same(one.events, ['redis', 'postgres'])
  t.same(await check(one.verifier, marked.hash), revokedState(marked.id), 'held with it from then on')
  t.same(one.events, ['redis', 'postgres'], 'from memory')

  // A revoker's marker names the owner: a miss that reads it needs nothing more.
  const revokedHere = await newKey()
  await new KeyService(db.pool, testInvalidator(t, db.pool, { redis, secret })).revoke(revokedHere.id, 'test')
  t.same(await redisEntry(revokedHere.hash), revokedState(revokedHere.id), 'the revoker’s sealed marker names the owner')
  const reader = await replica(t, { currency: 'never' })
  t.same(await check(reader.verifier, revokedHere.hash), revokedState(revokedHere.id))
  t.same(reader.events, ['redis'], 'without asking Postgres')

  // Held without an owner (a message ended it before the log named it): ownerOf asks Postgres once for all who ask together.
  const told = await newKey()
  await keys.revoke(told.id, 'test')
  const two = await replica(t, { currency: 'forced' })
  two.cache.end(told.hash, 'revoked', performance.now())
  const held = { status: 'revoked' } as const
  const answers = await Promise.all([two.verifier.ownerOf(told.hash, held), two.verifier.ownerOf(told.hash, held)])
  t.same(answers, [revokedState(told.id), revokedState(told.id)], 'both refused for its owner')
  t.equal(two.store.calls, 1, 'one lookup')
  t.same(two.cache.get(told.hash, performance.now()), revokedState(told.id), 'and the owner is held from then on')

  // Postgres says active (a key a message ended, say): never believed over the ended state held.
  const active = await newKey()
  const three = await replica(t, { currency: 'forced' })
  three.cache.end(active.hash, 'revoked', performance.now())
  t.same(await three.verifier.ownerOf(active.hash, held), held, 'an active answer does not un-end the key')
  t.same(three.cache.get(active.hash, performance.now()), held, 'nor is it cached')
  // Deleted since: that is what it is, owned by no one.
  const gone = await newKey()
  await keys.revoke(gone.id, 'test')
  await keys.delete(gone.id, 'test')
  three.cache.end(gone.hash, 'revoked', performance.now())
  t.same(await three.verifier.ownerOf(gone.hash, held), { status: 'deleted' }, 'a key deleted since: deleted')

  // Postgres unreachable: refused at once as held, and for a while not asked again (each refusal would wait for it).
  const deadPool = createPool(`postgres://postgres@127.0.0.1:${await freePort()}/nowhere`, { max: 2 })
  t.teardown(() => deadPool.end())
  let clock = 0
  const cut = new KeyCache()
  const deadStore = countingStore([], (hash) => lookupKeyByHash(deadPool, hash))
  const down = new KeyVerifier({ store: deadStore, shared: null, cache: cut, metrics, log, now: () => clock })
  t.same(await down.ownerOf(told.hash, held), held, 'Postgres down: as held')
  t.equal(deadStore.calls, 1)
  clock = 500
  t.same(await down.ownerOf(told.hash, held), held, 'shortly after: as held…')
  t.equal(deadStore.calls, 1, '…without waiting for Postgres again')
  clock = 1_500
  t.same(await down.ownerOf(told.hash, held), held)
  t.equal(deadStore.calls, 2, 'a while later, Postgres is asked again')
})

t.test('a fill never overwrites the revoker’s marker', async (t) => {
  const commands = await redisCommands(t, 'test-nx')
  const shared = new RedisKeyCache(commands, redis.prefix, codec)
  const hash = unknownHash()
  const marker = codec.encodeEntry(hash, { status: 'revoked' }, Date.now() + 60_000)
  await redis.client.set(names.cacheEntry(hash), marker, 'EX', 60)
  shared.write(hash, activeState())
  await commands.ping()
  t.equal(await redis.client.get(names.cacheEntry(hash)), marker, 'the marker stays')
  const fresh = unknownHash()
  shared.write(fresh, activeState('k1'))
  await commands.ping()
  t.same(await shared.read(fresh), activeState('k1'), 'a fresh entry is written, and read back')
  const ttl = await redis.client.ttl(names.cacheEntry(fresh))
  t.ok(ttl > 0 && ttl <= redisTtlSeconds.active, 'with an expiry')
  await redis.client.set(names.cacheEntry(fresh), `${(await redis.client.get(names.cacheEntry(fresh)))!}x`)
  t.equal(await shared.read(fresh), 'forged', 'an entry that fails its check is reported as forged, not as a state')
})

t.test('the listener: a sealed message ends the key and is acknowledged; a forged one is ignored', async (t) => {
  const { cache, commands, verifier } = await replica(t, { currency: 'forced' })
  const replicaId = `listener-${randomUUID()}`
  const listener = new InvalidationListener({
    subscriber: createRedis(redis.url, 'test-listener'),
    commands: commands!,
    prefix: redis.prefix,
    codec,
    cache,
    replicaId,
    log,
    metrics,
  })
  await listener.start()
  t.teardown(() => listener.stop())
  t.ok(listener.subscribed)

  const target = await newKey()
  t.match(await check(verifier, target.hash), { status: 'active' })
  const forger = new KeyStateCodec(newKeyCacheSecret())
  const forgedId = randomUUID()
  await redis.client.publish(names.channel, forger.encodeMessage({ id: forgedId, keys: [{ hash: target.hash, state: 'revoked' }] }))
  await redis.client.publish(names.channel, JSON.stringify({ id: forgedId, hashes: [target.hash] }))
  // The channel's messages are handled in order: once a sealed one published after them has been, so have they.
  const fence = unknownHash()
  await redis.client.publish(names.channel, codec.encodeMessage({ id: randomUUID(), keys: [{ hash: fence, state: 'revoked' }] }))
  await waitFor(() => cache.get(fence, performance.now())?.status === 'revoked', 'a sealed message published after them to be handled')
  t.match(cache.get(target.hash, performance.now()), { status: 'active' }, 'a forged message ends nothing')
  t.equal(await redis.client.llen(names.acknowledgements(forgedId)), 0, 'and is not acknowledged')

  const deleted = await new KeyService(db.pool, testInvalidator(t, db.pool, { redis, secret })).delete(target.id, 'test')
  t.same(deleted.invalidation, { confirmed: true, acknowledged: 1, unconfirmed: [], problems: [] }, 'a sealed message is acknowledged')
  t.same(cache.get(target.hash, performance.now()), { status: 'deleted' }, 'after the key was ended in the cache')
})

t.test('compare-and-set on the state version: Redis never takes an older state over a newer one', async (t) => {
  const commands = await redisCommands(t, 'test-cas')
  const shared = new RedisKeyCache(commands, redis.prefix, codec)
  const hash = unknownHash()
  const version = (v: number): KeyState => ({ ...activeState('k'), version: v }) as KeyState
  const writes: Array<[string, KeyState, KeyState]> = [
    ['over nothing: written', version(2), version(2)],
    ['an older version: refused', version(1), version(2)],
    ['the same version: nothing to do', version(2), version(2)],
    ['a newer version: written', version(3), version(3)],
    ['unknown over a state: refused (only over nothing)', { status: 'unknown' }, version(3)],
    ['an ended state over an active one: written', { status: 'revoked' }, { status: 'revoked' }],
    ['an active state over an ended one: refused', version(9), { status: 'revoked' }],
  ]
  for (const [name, state, expected] of writes) {
    shared.write(hash, state)
    await commands.ping()
    t.same(await shared.read(hash), expected, name)
  }
  const unreadable = unknownHash()
  await redis.client.set(names.cacheEntry(unreadable), 'not an entry', 'EX', 60)
  shared.write(unreadable, version(5))
  await commands.ping()
  t.equal(await redis.client.get(names.cacheEntry(unreadable)), 'not an entry', 'what the script cannot read is left alone (and refused when read)')
})

t.test('a lookup that raced a change is neither stored nor written back; an older entry in Redis is refused', async (t) => {
  const { store, cache, commands, verifier, events } = await replica(t, { currency: 'forced' })
  const key = await newKey()
  const release = store.hold()
  const first = verifier.verify(key.hash)
  await waitFor(() => store.answered > 0, 'Postgres to answer the first lookup', 10_000, 5)
  // The change commits, and this replica hears of it with the version it made (as from the log or a message).
  await keys.update(key.id, { actor: 'user:u1', allowedCidrs: ['10.9.9.9/32'] })
  cache.changed(key.hash, 2, performance.now())
  release()
  t.match(await first, { status: 'active', version: 1 }, 'the request already in flight completes as it started')
  await settled(commands)
  t.equal(await redisEntry(key.hash), undefined, 'its state was not written back to Redis')
  t.equal(cache.get(key.hash, performance.now()), undefined, 'nor stored in memory')
  // The state from before the change is in Redis all the same (written back by someone, or by a replica that had not heard).
  await redis.client.set(
    names.cacheEntry(key.hash),
    codec.encodeEntry(key.hash, { ...activeState(key.id), version: 1 } as KeyState, Date.now() + 300_000),
    'EX',
    300,
  )
  events.length = 0
  t.match(await check(verifier, key.hash), { status: 'active', version: 2, allowedCidrs: ['10.9.9.9/32'] }, 'the older entry is refused: Postgres answers')
  t.same(events, ['redis', 'postgres'])
  await settled(commands)
  t.match(await redisEntry(key.hash), { status: 'active', version: 2 }, 'and the changed state replaced it in Redis')
})
