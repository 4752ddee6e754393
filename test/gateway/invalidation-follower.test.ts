/**
 * The invalidation log follower against the real Postgres: the backstop of
 * revocation that does not depend on Redis. A revoke or delete committed
 * through the key service is applied by every registered follower before the
 * revoke returns; the follower reports the snapshot it applied; a follower
 * started after a revoke still ends the key; one that cannot reach Postgres
 * stops believing cached active states staleAfterMs after its last successful
 * poll was sent; and it leaves the registry when it stops.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import type { Test } from 'tap'
import { createPool, inTransaction } from '@scoped/shared/db'
import type { Pool } from '@scoped/shared/db'
import { hashKey } from '@scoped/shared/keys'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { currentTransactionId, lookupKeyByHash, replicasBehind } from '@scoped/shared/key-store'
import { createLogger } from '@scoped/shared/logger'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { InvalidationFollower } from '@scoped/gateway/invalidation-follower'
import { KeyCache } from '@scoped/gateway/key-cache'
import { GatewayMetrics } from '@scoped/gateway/metrics'
import { parseRouteMap } from '@scoped/gateway/route-map'
import { createTestDatabase } from '../helpers/database.js'
import { createTestTenants } from '../helpers/tenants.js'
import { freePort } from '../helpers/processes.js'
import { cuttableProxy } from '../helpers/cuttable-proxy.js'
import { waitFor } from '../helpers/wait-for.js'

const log = createLogger('test', 'silent')
const metrics = new GatewayMetrics(parseRouteMap('routes:\n  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }\n', 'test'))
const db = await createTestDatabase(t)
const tenants = await createTestTenants(db.pool)
/** Revokes and deletes confirm through Postgres alone: every registered follower must have applied them. */
const keys = new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null))

async function newKey(): Promise<{ id: string; hash: string }> {
  const created = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }, 'k', 'test')
  return { id: created.id, hash: hashKey(created.key) }
}

/** The owner of a key newKey made. */
function owner(keyId: string): Tenant {
  return { scope: 'SUB-ACCOUNT', agencyId: tenants.agencyId, subAccountId: tenants.subAccountId, keyId }
}

interface Running {
  cache: KeyCache
  follower: InvalidationFollower
  replicaId: string
}

/** A follower with a cache of its own, started; stopped at teardown. */
async function startFollower(t: Test, options: { pool?: Pool; intervalMs?: number; staleAfterMs?: number } = {}): Promise<Running> {
  const cache = new KeyCache()
  const replicaId = `follower-${randomUUID()}`
  const follower = new InvalidationFollower({
    pool: options.pool ?? db.pool,
    cache,
    replicaId,
    log,
    metrics,
    intervalMs: options.intervalMs ?? 50,
    ...(options.staleAfterMs === undefined ? {} : { staleAfterMs: options.staleAfterMs }),
  })
  await follower.start()
  t.teardown(() => follower.stop())
  return { cache, follower, replicaId }
}

/** Caches the key's state as a lookup would; an active state is kept only while the cache is current. */
async function warm(cache: KeyCache, hash: string): Promise<boolean> {
  return cache.fill(hash, await lookupKeyByHash(db.pool, hash), cache.generation, performance.now())
}

async function registered(replicaId: string): Promise<boolean> {
  const { rows } = await db.pool.query('SELECT 1 FROM gateway_replicas WHERE replica_id = $1', [replicaId])
  return rows.length === 1
}

for (const action of ['revoke', 'delete'] as const) {
  t.test(`a ${action} through the key service is applied by every follower before it returns`, async (t) => {
    const replicas = [await startFollower(t), await startFollower(t)]
    // A third that never saw the key: what it learns of the owner comes from the log alone.
    const cold = await startFollower(t)
    const key = await newKey()
    for (const { cache } of replicas) {
      t.ok(await warm(cache, key.hash), 'cached as active while current')
      t.match(cache.get(key.hash, performance.now()), { status: 'active' })
    }
    const result = action === 'revoke' ? await keys.revoke(key.id, 'test') : await keys.delete(key.id, 'test')
    t.same(result.invalidation, { confirmed: true, acknowledged: 0, unconfirmed: [], problems: [] }, 'confirmed through Postgres, no Redis at all')
    // A revoked key keeps its owner, so its refusals are counted for it; a deleted one exists for no one.
    const ended = action === 'revoke' ? { status: 'revoked', tenant: owner(key.id) } : { status: 'deleted' }
    for (const { cache } of [...replicas, cold]) t.same(cache.get(key.hash, performance.now()), ended, `ended in the cache when the ${action} returned`)
  })
}

t.test('the follower registers the snapshot it applied: behind until its polls have applied the change, never after', async (t) => {
  // Slow polls, so that the change is seen to be pending first.
  const { cache, replicaId } = await startFollower(t, { intervalMs: 300 })
  const key = await newKey()
  t.ok(await warm(cache, key.hash))
  const xid = await inTransaction(db.pool, async (client) => {
    await client.query(`UPDATE api_keys SET revoked_at = now(), revoked_by = 'test' WHERE id = $1`, [key.id])
    return currentTransactionId(client)
  })
  t.same(await replicasBehind(db.pool, xid, 60_000), [replicaId], 'just after the commit: live and behind')
  let endedWhenApplied: boolean | undefined
  const applied = await waitFor(async () => {
    const behind = await replicasBehind(db.pool, xid, 60_000)
    // Read the cache right after the registry says it applied: it must have ended the key by then.
    if (behind.length === 0) endedWhenApplied = cache.get(key.hash, performance.now())?.status === 'revoked'
    return behind.length === 0
  }, 'the follower to apply the revoke')
  t.ok(applied, 'then no longer behind for that transaction')
  t.equal(endedWhenApplied, true, 'and by the time it says so, the key is ended in its cache')
})

t.test('a change to a key (not an end) makes the follower forget it, so the next request reads it again', async (t) => {
  const { cache } = await startFollower(t)
  const key = await newKey()
  t.ok(await warm(cache, key.hash))
  const generation = cache.generation
  await db.pool.query(`INSERT INTO key_invalidations (key_hash, state) VALUES ($1, 'changed')`, [key.hash])
  t.ok(await waitFor(() => cache.get(key.hash, performance.now()) === undefined, 'the follower to forget the key'), 'forgotten')
  t.ok(cache.generation > generation, 'and lookups in flight are not cached')
})

t.test('a follower started after a revoke ends the key at start (recent invalidations)', async (t) => {
  const revoked = await newKey()
  const deleted = await newKey()
  const longAgo = await newKey()
  await keys.revoke(revoked.id, 'test')
  await keys.delete(deleted.id, 'test')
  await keys.revoke(longAgo.id, 'test')
  // Older than any entry a replica could still meet in Redis: not read at start.
  await db.pool.query(`UPDATE key_invalidations SET recorded_at = now() - interval '1 day' + interval '1 minute' WHERE key_hash = $1`, [longAgo.hash])

  const { cache } = await startFollower(t)
  const now = performance.now()
  t.same(
    cache.get(revoked.hash, now),
    { status: 'revoked', tenant: owner(revoked.id) },
    'a key revoked before it started is ended in its cache, with its owner',
  )
  t.same(cache.get(deleted.hash, now), { status: 'deleted' }, 'a deleted one too')
  t.equal(cache.get(longAgo.hash, now), undefined, 'one revoked long before is left to Postgres')
})

t.test('Postgres unreachable from the start: the follower starts, and its cache is never current', async (t) => {
  const pool = createPool(`postgres://postgres@127.0.0.1:${await freePort()}/nowhere`, { max: 2 })
  t.teardown(() => pool.end())
  const { cache, follower, replicaId } = await startFollower(t, { pool })
  t.notOk(follower.current, 'not current')
  t.equal(follower.lastSuccessAt, -Infinity, 'no poll succeeded')
  t.notOk(
    cache.fill('h', { status: 'active', tenant: { scope: 'AGENCY', agencyId: 'a', subAccountId: null, keyId: 'k' } }, cache.generation, performance.now()),
    'no active state is cached',
  )
  t.notOk(await registered(replicaId), 'and it is not in the registry, so no revoke waits for it')
})

t.test('Postgres lost: the cache stops being current staleAfterMs after the last successful poll was sent, and recovers', async (t) => {
  const proxy = await cuttableProxy(t, db.url)
  const url = new URL(proxy.url)
  const pool = createPool(url.href, { max: 2 })
  t.teardown(() => pool.end())
  const staleAfterMs = 400
  const { cache, follower } = await startFollower(t, { pool, staleAfterMs })
  t.ok(follower.current, 'current while Postgres answers')
  const key = await newKey()
  t.ok(await warm(cache, key.hash))

  await proxy.cut()
  const cutAt = performance.now()
  // Polled every 5 ms: the moment it lapses is measured below.
  t.ok(await waitFor(() => !follower.current, 'the cache to stop being current', 10_000, 5), 'no longer current')
  const lapsedAt = performance.now()
  t.ok(lapsedAt >= follower.lastSuccessAt + staleAfterMs, 'not before staleAfterMs after the last good poll was sent')
  t.ok(lapsedAt - cutAt <= staleAfterMs + 100, `and at most staleAfterMs after Postgres was lost (${Math.round(lapsedAt - cutAt)} ms)`)
  t.equal(cache.get(key.hash, performance.now()), undefined, 'the cached active state is dropped')
  t.same(cache.size().active, 0)

  await proxy.restore()
  t.ok(await waitFor(() => follower.current, 'the cache to be current again'), 'current again once Postgres answers')
})

t.test('a follower leaves the registry when it stops', async (t) => {
  const { follower, replicaId, cache } = await startFollower(t)
  t.ok(await registered(replicaId), 'registered while running')
  await follower.stop()
  t.notOk(await registered(replicaId), 'removed at stop, so no revoke waits for it')
  t.notOk(cache.isCurrent(performance.now()), 'and its cache is no longer current')
})
