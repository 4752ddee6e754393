/**
 * Revoke and delete from the console take effect on every gateway replica
 * before the page answers: each replica has dropped the key, whether it heard
 * through Redis (a MAC'd acknowledgement) or through the invalidation log in
 * Postgres. When that cannot be confirmed, the page says the change was saved
 * and what was not confirmed (503), rather than claim immediate effect.
 */
import t from 'tap'
import type { Test } from 'tap'
import type { Pool } from '@scoped/shared/db'
import type { KeyInvalidator } from '@scoped/shared/key-invalidation'
import { STALE_AFTER_MS } from '@scoped/shared/key-invalidation'
import { hashKey } from '@scoped/shared/keys'
import { KeyStateCodec, redisNames } from '@scoped/shared/key-state'
import { createTestDatabase } from '../helpers/database.js'
import { createTestRedis } from '../helpers/redis.js'
import { newKeyCacheSecret, standInReplica, testInvalidator } from '../helpers/invalidation.js'
import { freePort } from '../helpers/processes.js'
import type { ConsoleApp } from './console-harness.js'
import { buildConsoleApp, createKeyThroughConsole, createWorld, csrfToken, signedIn } from './console-harness.js'

/** The console over a database of its own, with the revoker `invalidator(pool)` makes. */
async function consoleWith(t: Test, invalidator: (pool: Pool) => KeyInvalidator): Promise<ConsoleApp> {
  const db = await createTestDatabase(t)
  const built = await buildConsoleApp(db.pool, invalidator(db.pool))
  t.teardown(() => built.app.close())
  return built
}

async function keyIds(pool: Pool): Promise<Map<string, string>> {
  return new Map((await pool.query<{ id: string; name: string }>('SELECT id, name FROM api_keys')).rows.map((row) => [row.name, row.id]))
}

/** What an unconfirmed change's page says first: what was saved, then that it was not confirmed everywhere. */
const unconfirmed = (what: string) => `${what}, but not every gateway replica confirmed dropping it`

t.test('revoke and delete from the console: every gateway replica has dropped the key before the page answers', async (t) => {
  const redis = await createTestRedis(t)
  const secret = newKeyCacheSecret()
  const codec = new KeyStateCodec(secret)
  let pool: Pool | undefined
  const { app } = await consoleWith(t, (p) => {
    pool = p
    return testInvalidator(t, p, { redis, secret })
  })
  // One replica hears through Redis and acknowledges; another only follows the log in Postgres.
  const listening = await standInReplica(t, { secret, redis })
  const following = await standInReplica(t, { secret, registry: { pool: pool! } })
  const world = await createWorld(pool!)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`

  const first = await createKeyThroughConsole(owner, keysPath, 'to revoke')
  const second = await createKeyThroughConsole(owner, keysPath, 'to delete')
  const [revokedHash, deletedHash] = [hashKey(first.plaintext), hashKey(second.plaintext)]
  const ids = await keyIds(pool!)
  const token = csrfToken((await owner.get(keysPath)).body)
  const marker = async (hash: string) => codec.decodeEntry(hash, (await redis.client.get(redisNames(redis.prefix).cacheEntry(hash))) ?? '', Date.now())

  const revoked = await owner.post(`${keysPath}/${ids.get('to revoke')}/revoke`, { csrf: token })
  t.equal(revoked.statusCode, 303)
  t.equal(revoked.headers.location, keysPath, 'every replica confirmed')
  t.same(listening.droppedByMessage, [revokedHash], 'the listening replica had dropped the key when the answer came')
  t.same(following.droppedByLog, [revokedHash], 'and so had the one following the log')
  t.same(
    await marker(revokedHash),
    { status: 'revoked', tenant: { scope: 'AGENCY', agencyId: world.agencyId, subAccountId: null, keyId: ids.get('to revoke') } },
    'the shared cache holds a sealed terminal marker, naming the key’s owner (for its usage)',
  )

  const deleted = await owner.post(`${keysPath}/${ids.get('to delete')}/delete`, { csrf: token })
  t.equal(deleted.headers.location, keysPath)
  t.same(listening.droppedByMessage, [revokedHash, deletedHash])
  t.same(following.droppedByLog, [revokedHash, deletedHash])
  t.same(await marker(deletedHash), { status: 'deleted' })
  const page = await owner.get(String(deleted.headers.location))
  t.notMatch(page.body, 'Not every gateway replica confirmed', 'a confirmed change claims nothing else')
})

t.test('a replica that does not confirm in time: the page says what was saved and what was not confirmed (503)', async (t) => {
  const redis = await createTestRedis(t)
  const secret = newKeyCacheSecret()
  let pool: Pool | undefined
  // Short windows: a live replica that neither acknowledges nor applies the log keeps the revoke unconfirmed until its deadline.
  const { app, keys } = await consoleWith(t, (p) => {
    pool = p
    return testInvalidator(t, p, { redis, secret, deadlineMs: 800, ackWaitMs: 200, liveWindowMs: 60_000 })
  })
  const behind = await standInReplica(t, { secret, redis, acknowledge: false, registry: { pool: pool! } })
  await behind.pause()
  const world = await createWorld(pool!)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/sub-accounts/${world.subAccountId}/keys`
  await createKeyThroughConsole(owner, keysPath, 'to revoke')
  await createKeyThroughConsole(owner, keysPath, 'to delete')
  const ids = await keyIds(pool!)
  const token = csrfToken((await owner.get(keysPath)).body)

  for (const [action, what] of [
    ['revoke', 'The key was revoked'],
    ['delete', 'The key was deleted'],
  ] as const) {
    const id = ids.get(`to ${action}`)!
    const response = await owner.post(`${keysPath}/${id}/${action}`, { csrf: token })
    t.equal(response.statusCode, 503, `${action}: 503`)
    t.match(response.headers['content-type'], /text\/html/)
    t.match(response.body, unconfirmed(what), `${action}: says what was saved, and that it was not confirmed`)
    t.match(response.body, behind.id, `${action}: names the replica`)
    t.match(response.body, `within ${STALE_AFTER_MS / 1000} s`, `${action}: and the bound within which it is refused all the same`)
  }
  t.equal((await keys.find(ids.get('to revoke')!))?.status, 'revoked', 'the revocation itself is committed')
  t.equal(await keys.find(ids.get('to delete')!), undefined, 'and so is the deletion')
})

t.test('Redis unreachable: confirmed through Postgres; unconfirmed only while a live replica is behind, and the page names Redis', async (t) => {
  const secret = newKeyCacheSecret()
  // Nothing listens on this port.
  const deadRedis = { url: `redis://127.0.0.1:${await freePort()}`, prefix: 'sak-test-nowhere:' }
  let pool: Pool | undefined
  const { app, keys } = await consoleWith(t, (p) => {
    pool = p
    return testInvalidator(t, p, { redis: deadRedis, secret, deadlineMs: 1_500, liveWindowMs: 60_000 })
  })
  const replica = await standInReplica(t, { secret, registry: { pool: pool! } })
  const world = await createWorld(pool!)
  const first = await keys.create({ scope: 'AGENCY', agencyId: world.agencyId }, 'first', 'test')
  const second = await keys.create({ scope: 'AGENCY', agencyId: world.agencyId }, 'second', 'test')
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`
  const token = csrfToken((await owner.get(keysPath)).body)

  const confirmed = await owner.post(`${keysPath}/${first.id}/revoke`, { csrf: token })
  t.equal(confirmed.headers.location, keysPath, 'the replica following the log confirmed without Redis')
  t.same(replica.droppedByLog, [hashKey(first.key)])

  await replica.pause()
  const response = await owner.post(`${keysPath}/${second.id}/revoke`, { csrf: token })
  t.equal(response.statusCode, 503, 'a live replica behind, and no Redis: 503')
  t.match(response.body, unconfirmed('The key was revoked'))
  t.match(response.body, 'Redis', 'naming Redis')
  t.match(response.body, replica.id, 'and the replica')
  t.equal((await keys.find(second.id))?.status, 'revoked', 'the revocation itself is committed')
})
