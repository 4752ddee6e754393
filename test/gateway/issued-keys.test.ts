/**
 * The issued-key filter against the real Postgres: loaded after the
 * follower's first snapshot, it holds active, revoked and deleted keys alike
 * (a deleted key by its tombstone); a key created later reaches it through
 * the invalidation log (migration 010's `created` entry, written as the owner
 * whoever inserts the key), and the creation returns only once the follower
 * has applied it. It vouches that a key was never issued only while loaded
 * and current. The filter itself: no false negatives, few false positives,
 * and it grows by layers past its capacity.
 */
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { createPool } from '@scoped/shared/db'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { hashKey } from '@scoped/shared/keys'
import { createLogger } from '@scoped/shared/logger'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { DigestFilter, MIN_CAPACITY } from '@scoped/gateway/issued-keys/digest-filter'
import { IssuedKeys } from '@scoped/gateway/issued-keys/issued-keys'
import { InvalidationFollower } from '@scoped/gateway/invalidation-follower'
import { KeyCache } from '@scoped/gateway/key-cache'
import { GatewayMetrics } from '@scoped/gateway/metrics'
import { parseRouteMap } from '@scoped/gateway/route-map'
import { createServiceLogin } from '../helpers/database-roles.js'
import { createTestDatabase } from '../helpers/database.js'
import { createTestTenants } from '../helpers/tenants.js'

const log = createLogger('test', 'silent')
const metrics = new GatewayMetrics(parseRouteMap('routes:\n  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }\n', 'test'))
const randomHash = (): string => randomBytes(32).toString('hex')

t.test('the filter: every hash added is in it, few others are, and it grows by layers', async (t) => {
  const filter = new DigestFilter(1)
  const added = Array.from({ length: MIN_CAPACITY + 10 }, randomHash)
  for (const hash of added) filter.add(hash)
  t.ok(
    added.every((hash) => filter.has(hash)),
    'no false negative',
  )
  t.equal(filter.layerCount, 2, 'past its capacity, a second layer')
  t.equal(filter.count, added.length)
  let positives = 0
  for (let i = 0; i < 100_000; i++) if (filter.has(randomHash())) positives++
  t.ok(positives < 100, `false positives: ${positives} in 100 000`)
  t.throws(() => filter.add('not a hash'), TypeError, 'only key hashes')
  t.notOk(filter.has('zz'), 'anything else is not in it')
})

t.test('loaded from Postgres, kept current by the log, trusted only while loaded and current', async (t) => {
  const db = await createTestDatabase(t)
  const tenants = await createTestTenants(db.pool)
  const owner = { scope: 'SUB-ACCOUNT' as const, subAccountId: tenants.subAccountId }
  // Creations confirm through Postgres alone: every registered follower must have applied them.
  const keys = new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null))
  const active = await keys.create(owner, 'active', 'test')
  const revoked = await keys.create(owner, 'revoked', 'test')
  await keys.revoke(revoked.id, 'test')
  const deleted = await keys.create(owner, 'deleted', 'test')
  await keys.delete(deleted.id, 'test')

  const cache = new KeyCache()
  let current = true
  const issued: IssuedKeys = new IssuedKeys({ pool: db.pool, log, current: () => current, following: () => follower.following })
  const follower: InvalidationFollower = new InvalidationFollower({
    pool: db.pool,
    cache,
    replicaId: `test-${randomHash().slice(0, 8)}`,
    log,
    metrics,
    known: issued,
  })
  t.equal(issued.verdict(randomHash()), 'unsure', 'before the load: unsure, never "never issued"')
  await follower.start()
  t.teardown(() => follower.stop())
  await issued.start()
  t.teardown(() => issued.stop())
  t.ok(issued.loaded, 'loaded')
  t.equal(issued.report?.keys, 3, 'every key: active, revoked, and the deleted one by its tombstone')
  for (const [name, created] of [
    ['active', active],
    ['revoked', revoked],
    ['deleted', deleted],
  ] as const) {
    t.equal(issued.verdict(hashKey(created.key)), 'issued', `${name}: issued`)
  }
  t.equal(issued.verdict(randomHash()), 'never-issued', 'a key never issued, while loaded and current')
  current = false
  t.equal(issued.verdict(randomHash()), 'unsure', 'not current: unsure (a key may have been created meanwhile)')
  current = true

  // Created by agency-service's own role: the trigger writes the log as the owner, and the creation waits for the follower.
  const agencyLogin = await createServiceLogin(t, db, 'scoped_agency')
  const agencyPool = createPool(agencyLogin.url)
  t.teardown(() => agencyPool.end())
  const later = await new KeyService(agencyPool, new KeyRevocationNotifier(agencyPool, null)).create(owner, 'later', 'test')
  t.equal(issued.verdict(hashKey(later.key)), 'issued', 'a key created after the load is in the filter when its creation returns')
  const { rows } = await db.pool.query<{ state: string }>(`SELECT state FROM key_invalidations WHERE key_hash = $1`, [hashKey(later.key)])
  t.same(
    rows.map((row) => row.state),
    ['created'],
    'logged as created',
  )
  await t.rejects(
    db.pool.query(`INSERT INTO key_invalidations (key_hash, state) VALUES ($1, 'invented')`, [randomHash()]),
    { code: '23514' },
    'the log takes only the kinds it knows',
  )
})
