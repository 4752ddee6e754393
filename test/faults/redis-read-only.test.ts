/**
 * Redis refusing writes (out of memory under `noeviction`): reads, publish
 * and subscribe still work, but no terminal marker and no acknowledgement
 * can be written, so the genuine "active" entry of a revoked key stays in
 * Redis for its full TTL. Revoke and delete through the CLI, and the deletion
 * of a sub-account through the gateway with an agency key, must still return
 * promptly, and every replica must refuse the keys on the very next request
 * and never believe the entry left behind, not even a replica started later.
 */
import t from 'tap'
import type { Test } from 'tap'
import { KeyStateCodec } from '@scoped/shared/key-state'
import { hashKey } from '@scoped/shared/keys'
import { readKeyCacheSecret } from '@scoped/shared/secrets'
import type { CreatedKey } from '@scoped/agency-service/keys/key-service'
import type { HttpsClient } from '../helpers/https.js'
import { httpsClient } from '../helpers/https.js'
import { startRedisServer } from '../helpers/redis-server.js'
import { startStack } from '../helpers/stack.js'
import { waitFor } from '../helpers/wait-for.js'
import { bearer, COMMAND_LIMIT_MS, createTenancy, get, REVOKED, sleep, timedCtl } from './support.js'

/** How long after the commands the left-behind entry is tried again ("many seconds": many times the 1 s bound). */
const LATER_MS = 6_000

t.test('Redis refusing writes: revoke, delete and sub-account deletion still take effect at once, everywhere', async (t) => {
  const redis = await startRedisServer(t)
  // The backends keep their nonces in their own memory: with this Redis they would refuse every signed request once it
  // refuses writes (agency-service's invalidator then confirms through Postgres alone; ctl's meets the refusing Redis).
  const stack = await startStack(t, { replicas: 2, redis: { url: redis.url }, backendEnv: { agency: { REDIS_URL: '' }, resource: { REDIS_URL: '' } } })
  const clients: HttpsClient[] = stack.gatewayPorts.map((port) => httpsClient(t, port, stack.cert))
  const codec = new KeyStateCodec(readKeyCacheSecret({ TENANT_SIGNING_SECRET: stack.secret })!)
  const entryName = (key: CreatedKey) => `${stack.redis.prefix}key:${hashKey(key.key)}`
  const control = redis.client()
  /** What the Redis cache entry of `key` says, read as the gateways read it (sealed, bound to its hash). */
  const redisState = async (key: CreatedKey) => {
    const text = await control.get(entryName(key))
    return text === null ? 'absent' : (codec.decodeEntry(hashKey(key.key), text, Date.now())?.status ?? 'forged')
  }

  const tenancy = await createTenancy(stack.db.pool, 'Readonly')
  const doomed = await stack.db.pool.query<{ id: string }>(`INSERT INTO sub_accounts (agency_id, name) VALUES ($1, 'Readonly East') RETURNING id`, [
    tenancy.agency.id,
  ])
  const doomedSub = doomed.rows[0]!.id
  const agencyKey = await tenancy.agencyKey('agency')
  const toRevoke = await tenancy.subKey('revoke')
  const toDelete = await tenancy.subKey('delete')
  const ofDoomed = await Promise.all(['one', 'two'].map((name) => tenancy.keys.create({ scope: 'SUB-ACCOUNT', subAccountId: doomedSub }, name, 'test')))
  const ended = [toRevoke, toDelete, ...ofDoomed]

  const all = (key: string, on = clients) => Promise.all(on.map((client) => get(client, '/v1/agents', key)))
  const expectRevoked = async (t: Test, key: CreatedKey, what: string, on = clients) => {
    for (const [i, response] of (await all(key.key, on)).entries()) {
      t.equal(response.status, 401, `replica ${i + 1}: ${what}`)
      t.equal(response.json?.message, REVOKED)
    }
  }

  // Warm on both replicas; the first lookup also wrote a genuine "active" entry to Redis.
  for (const key of ended) {
    for (let round = 0; round < 2; round++) for (const response of await all(key.key)) t.equal(response.status, 200, 'warm')
  }
  t.equal((await get(clients[0]!, '/v1/agency', agencyKey.key)).status, 200)
  // The gateways write those entries after answering: wait until every key used so far has its entry there.
  await waitFor(
    async () => (await Promise.all([...ended, agencyKey].map(redisState))).every((state) => state === 'active'),
    'the genuine active entries of the keys used so far to be in Redis',
  )
  for (const key of ended) t.equal(await redisState(key), 'active', 'a genuine active entry is in Redis')

  // Out of memory, no eviction: every write is refused from now on (reads, PUBLISH and SUBSCRIBE still work).
  await redis.configSet('maxmemory-policy', 'noeviction')
  const used = Number((await redis.info('memory'))['used_memory'])
  await redis.configSet('maxmemory', String(used + 256 * 1024))
  // Filled past the limit in small steps (a single large value would be refused for its own query buffer).
  const chunk = 'x'.repeat(16 * 1024)
  let refusal: unknown
  for (let i = 0; i < 1_000 && refusal === undefined; i++) {
    await control.append(`${stack.redis.prefix}filler`, chunk).catch((error: unknown) => (refusal = error))
  }
  t.match(String(refusal), /OOM/, 'filled past maxmemory')
  await t.rejects(control.set(`${stack.redis.prefix}probe`, '1'), /OOM/, 'Redis refuses writes')

  await t.test('ctl key revoke', async (t) => {
    const result = await timedCtl(['key', 'revoke', toRevoke.id], stack.ctlEnv, stack.db)
    t.comment(`ctl key revoke, Redis refusing writes: ${result.workMs} ms (${result.ms} ms with the process start), exit ${result.status}`)
    t.ok(
      result.workMs < COMMAND_LIMIT_MS,
      `returned within ${COMMAND_LIMIT_MS} ms of starting on it (${result.workMs} ms; ${result.ms} ms with the process start)`,
    )
    t.equal(result.status, 0, `confirmed through Postgres: ${result.stderr.trim()}`)
    await expectRevoked(t, toRevoke, 'the very next request after revoke')
  })

  await t.test('ctl key delete', async (t) => {
    const result = await timedCtl(['key', 'delete', toDelete.id], stack.ctlEnv, stack.db)
    t.comment(`ctl key delete, Redis refusing writes: ${result.workMs} ms (${result.ms} ms with the process start), exit ${result.status}`)
    t.ok(
      result.workMs < COMMAND_LIMIT_MS,
      `returned within ${COMMAND_LIMIT_MS} ms of starting on it (${result.workMs} ms; ${result.ms} ms with the process start)`,
    )
    t.equal(result.status, 0, `confirmed through Postgres: ${result.stderr.trim()}`)
    await expectRevoked(t, toDelete, 'the very next request after delete')
  })

  await t.test('DELETE /v1/agency/sub-accounts/:id through the gateway, with an agency key', async (t) => {
    const started = performance.now()
    const response = await clients[1]!.request(`/v1/agency/sub-accounts/${doomedSub}`, { method: 'DELETE', headers: bearer(agencyKey.key) })
    const ms = Math.round(performance.now() - started)
    t.comment(`sub-account DELETE, Redis refusing writes: ${ms} ms, status ${response.status}`)
    t.ok(ms < COMMAND_LIMIT_MS, `answered within ${COMMAND_LIMIT_MS} ms (${ms} ms)`)
    t.equal(response.status, 204, `confirmed through Postgres: ${response.text}`)
    for (const key of ofDoomed) await expectRevoked(t, key, "the very next request with the deleted sub-account's key")
  })

  await t.test('the active entry left behind in Redis is never believed', async (t) => {
    const commandsDone = performance.now()
    for (const key of ended) t.equal(await redisState(key), 'active', 'no marker could be written: the genuine active entry is still there')
    // A replica started after the revoke has never seen these keys: it must not believe Redis either.
    const late = await stack.startReplica()
    const lateClient = httpsClient(t, late.port, stack.cert)
    const wait = LATER_MS - (performance.now() - commandsDone)
    if (wait > 0) await sleep(wait)
    const everyone = [...clients, lateClient]
    for (const key of ended) await expectRevoked(t, key, `${LATER_MS / 1000} s later (three replicas, one started after the revoke)`, everyone)
    for (const key of ended) t.equal(await redisState(key), 'active', 'and the entry is still there')
    t.equal((await get(lateClient, '/v1/agency', agencyKey.key)).status, 200, 'other keys keep working')
  })
})
