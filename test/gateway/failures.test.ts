/**
 * When Postgres or Redis fail: a key check that cannot be made is 503 (never
 * a 401 that blames the key), and a replica that cannot reach Postgres serves
 * no key from memory for longer than STALE_AFTER_MS; Redis is only a cache
 * and a fast path, so without it keys are checked against Postgres and
 * revocation is confirmed through the invalidation log; and a replica that
 * never hears of a revoke on Redis still refuses the key as soon as the
 * revoke has returned.
 */
import t from 'tap'
import { errorCatalog } from '@scoped/shared/errors'
import { generateKey, hashKey } from '@scoped/shared/keys'
import { STALE_AFTER_MS } from '@scoped/shared/key-invalidation'
import { KeyStateCodec, redisNames } from '@scoped/shared/key-state'
import { readKeyCacheSecret } from '@scoped/shared/secrets'
import { freePort, runCtl } from '../helpers/processes.js'
import { cuttableProxy } from '../helpers/cuttable-proxy.js'
import { waitFor } from '../helpers/wait-for.js'
import { gatewayFixture } from './fixture.js'

const fixture = await gatewayFixture(t)
/** Replicas in this file run without Redis unless a test says otherwise, so every key check reaches Postgres. */
const noRedis = { REDIS_URL: '', REDIS_KEY_PREFIX: '' }

t.test(
  'Postgres unreachable: 503 in the envelope, never 401; a warm key is served from memory no longer than STALE_AFTER_MS; back to normal when it returns',
  async (t) => {
    const proxy = await cuttableProxy(t, fixture.db.url)
    const url = new URL(proxy.url)
    const key = await fixture.createKey('sub-account', 'pg down')
    const replica = await fixture.startReplica({ ...noRedis, DATABASE_URL: url.href }, { t })
    const get = (presented: string) => replica.client.request('/v1/agents', { headers: { 'x-api-key': presented } })
    t.equal((await get(key.key)).status, 200, 'works while Postgres is there')

    await proxy.cut()
    const cutAt = Date.now()
    const refused = async (name: string, presented: string) => {
      const response = await get(presented)
      t.equal(response.status, 503, `${name}: 503`)
      t.same(response.json, { success: false, message: errorCatalog.authUnavailable.message })
      t.notOk(response.headers['www-authenticate'], 'not a key problem')
    }
    // A key never issued: the issued-key filter answers it 401 while the replica is current, 503 once it is not.
    const unknown = generateKey()
    const early = (await get(unknown)).status
    t.ok(early === 401 || early === 503, `an unknown key within the bound: 401 from the filter, or 503 (${early})`)
    // The valid key is warm in memory: served from there no longer than STALE_AFTER_MS after the last poll of the log that succeeded.
    const seen = new Set<number>()
    while (Date.now() - cutAt < STALE_AFTER_MS + 300) seen.add((await get(key.key)).status)
    t.ok(
      [...seen].every((status) => status === 200 || status === 503),
      `meanwhile only 200 (from memory, within the bound) or 503, never 401: ${[...seen].join(', ')}`,
    )
    await refused('a valid key, past the bound', key.key)
    await refused('an unknown key, past the bound', unknown)
    const ready = await fetch(`http://127.0.0.1:${replica.ports.admin}/readyz`)
    t.equal(ready.status, 503, 'not ready')
    t.match(await ready.json(), {
      checks: { postgres: false, keyLookup: false, invalidationLog: false },
      reasons: { postgres: /Postgres/, keyLookup: /key lookup/ },
    })

    await proxy.restore()
    t.equal((await get(key.key)).status, 200, 'recovers by itself')
  },
)

t.test('Postgres unreachable from the start: the gateway starts, and answers 503', async (t) => {
  const replica = await fixture.startReplica({ ...noRedis, DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/nowhere` }, { t })
  const response = await replica.client.request('/v1/agents', { headers: { 'x-api-key': generateKey() } })
  t.equal(response.status, 503)
  t.equal(response.json?.message, errorCatalog.authUnavailable.message)
})

t.test('Redis unreachable: keys are checked against Postgres, and revocation still holds through the invalidation log', async (t) => {
  const replica = await fixture.startReplica({ REDIS_URL: `redis://127.0.0.1:${await freePort()}`, REDIS_KEY_PREFIX: 'sak-test-nowhere:' }, { t })
  const key = await fixture.createKey('agency', 'redis down')
  const get = () => replica.client.request('/v1/agency', { headers: { authorization: `Bearer ${key.key}` } })
  t.equal((await get()).status, 200)
  t.equal((await get()).status, 200)
  const ready = await fetch(`http://127.0.0.1:${replica.ports.admin}/readyz`)
  t.equal(ready.status, 200, 'ready: Redis only speeds revocation up')
  t.match(await ready.json(), { checks: { postgres: true, invalidationLog: true } })
  // The replica's Redis is not there: it can only learn of the revoke from the log, and ctl waits until it has.
  const revoked = await runCtl(['key', 'revoke', key.id], fixture.ctlEnv)
  t.equal(revoked.status, 0, 'the revoke is confirmed')
  const after = await get()
  t.equal(after.status, 401, 'the very next request is refused')
  t.equal(after.json?.message, errorCatalog.revokedKey.message)
})

t.test('a revoke a replica never hears of on Redis: confirmed through the log, and the very next request is 401', async (t) => {
  const redis = fixture.redis!
  // Subscriber connections are named gateway-subscriber-<host>-<pid>-<random>; this file's replicas run in this
  // process, so this replica's is the one of this process that was not there before it started.
  const subscribers = async (): Promise<Array<{ id: string; name: string }>> =>
    ((await redis.client.client('LIST')) as string)
      .split('\n')
      .map((line) => ({ id: /\bid=(\d+)/.exec(line)?.[1] ?? '', name: /\bname=(\S*)/.exec(line)?.[1] ?? '' }))
      .filter(({ name }) => name.startsWith('gateway-subscriber-') && name.includes(`-${process.pid}-`))
  const before = new Set((await subscribers()).map(({ name }) => name))
  const replica = await fixture.startReplica({}, { t })
  const key = await fixture.createKey('sub-account', 'missed message')
  const hash = hashKey(key.key)
  const get = () => replica.client.request('/v1/agents', { headers: { 'x-api-key': key.key } })
  t.equal((await get()).status, 200)
  t.equal((await get()).status, 200, 'warm in memory')
  // What the replica shared in Redis, sealed under the key-cache secret derived from TENANT_SIGNING_SECRET.
  const codec = new KeyStateCodec(readKeyCacheSecret({ TENANT_SIGNING_SECRET: fixture.secret })!)
  const entry = async () => codec.decodeEntry(hash, (await redis.client.get(redisNames(redis.prefix).cacheEntry(hash))) ?? '', Date.now())
  t.match(await entry(), { status: 'active' }, 'an active entry in Redis')

  // Its subscriber connection is cut…
  const subscriber = (await subscribers()).filter(({ name }) => !before.has(name))
  t.equal(subscriber.length, 1, 'found the replica’s subscriber connection')
  await redis.client.client('KILL', 'ID', subscriber[0]!.id)
  await waitFor(() => replica.output().includes('key invalidation channel lost'), 'the replica to notice that its channel is lost')
  t.match(replica.output(), /key invalidation channel lost/)
  // …and the revoker has no key-cache secret: no message, no marker. Only the log tells.
  const revoked = await runCtl(['key', 'revoke', key.id], { ...fixture.ctlEnv, TENANT_SIGNING_SECRET: undefined, KEY_CACHE_SECRET: undefined })
  t.equal(revoked.status, 0, 'the revoke is confirmed')
  const after = await get()
  t.equal(after.status, 401, 'not served from memory, nor from the Redis entry')
  t.equal(after.json?.message, errorCatalog.revokedKey.message)
  t.match(await entry(), { status: 'active' }, 'although the Redis entry still says active')
})
