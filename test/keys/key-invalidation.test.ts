/**
 * The revoker (KeyRevocationNotifier) against the real Postgres and Redis,
 * with stand-in gateway replicas: what confirms a revoke (every live replica
 * acknowledged through Redis with a MAC'd acknowledgement, or applied the
 * transaction from the invalidation log), what does not (forged
 * acknowledgements, a live replica that is behind, Postgres out of reach),
 * and that it always answers within its deadline.
 */
import { randomUUID } from 'node:crypto'
import { createServer } from 'node:net'
import type { Socket } from 'node:net'
import t from 'tap'
import type { Test } from 'tap'
import { Redis } from 'ioredis'
import { createPool, inTransaction } from '@scoped/shared/db'
import type { Pool } from '@scoped/shared/db'
import { hashKey } from '@scoped/shared/keys'
import { LIVE_WINDOW_MS } from '@scoped/shared/key-invalidation'
import type { KeyInvalidation } from '@scoped/shared/key-state'
import { KeyStateCodec, redisNames, redisTtlSeconds } from '@scoped/shared/key-state'
import { currentTransactionId, replicasBehind } from '@scoped/shared/key-store'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import type { CreatedKey } from '@scoped/agency-service/keys/key-service'
import { createTestDatabase } from '../helpers/database.js'
import { createTestRedis } from '../helpers/redis.js'
import { createTestTenants } from '../helpers/tenants.js'
import { newKeyCacheSecret, standInReplica, testInvalidator } from '../helpers/invalidation.js'
import { freePort } from '../helpers/processes.js'

const active = { status: 'active', tenant: { scope: 'AGENCY', agencyId: randomUUID(), subAccountId: null, keyId: randomUUID() } } as const

/**
 * Keys ended in one committed transaction, as the key service ends them:
 * each `state` is a new key revoked or deleted. The trigger has logged them.
 */
async function committedChange(pool: Pool, states: ReadonlyArray<'revoked' | 'deleted'>): Promise<{ keys: KeyInvalidation[]; xid: string }> {
  const tenants = await createTestTenants(pool, `Tenant ${randomUUID().slice(0, 8)}`)
  const service = new KeyService(pool, new KeyRevocationNotifier(pool, null))
  const created: CreatedKey[] = []
  while (created.length < states.length) created.push(await service.create({ scope: 'AGENCY', agencyId: tenants.agencyId }, 'k', 'test'))
  const xid = await inTransaction(pool, async (client) => {
    for (const [index, state] of states.entries()) {
      if (state === 'revoked') await client.query(`UPDATE api_keys SET revoked_at = now(), revoked_by = 'test' WHERE id = $1`, [created[index]!.id])
      else await client.query(`DELETE FROM api_keys WHERE id = $1`, [created[index]!.id])
    }
    return currentTransactionId(client)
  })
  return { keys: states.map((state, index) => ({ hash: hashKey(created[index]!.key), state })), xid }
}

/** A TCP server that accepts connections and never answers: a Redis or Postgres that hangs. */
async function blackHole(t: Test): Promise<{ port: number; close(): void }> {
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => undefined)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const close = (): void => {
    for (const socket of sockets) socket.destroy()
    server.close()
  }
  t.teardown(close)
  return { port: (server.address() as { port: number }).port, close }
}

/** A pool whose Postgres is not there (nothing listens), or hangs (a black hole); ended at teardown. */
function poolOn(t: Test, port: number): Pool {
  const pool = createPool(`postgres://postgres@127.0.0.1:${port}/nowhere`, { max: 2 })
  t.teardown(() => pool.end().catch(() => undefined))
  return pool
}

/** One database for the file; every test starts with an empty replica registry (stand-ins leave it at their teardown). */
const db = await createTestDatabase(t)

async function noReplicasRegistered(t: Test): Promise<void> {
  const { rows } = await db.pool.query<{ replica_id: string }>('SELECT replica_id FROM gateway_replicas')
  t.same(rows, [], 'no replica is registered yet')
}

t.test('every live replica acknowledges: confirmed at once; markers replace the entries; acknowledgements are cleaned up', async (t) => {
  await noReplicasRegistered(t)
  const redis = await createTestRedis(t)
  const secret = newKeyCacheSecret()
  const codec = new KeyStateCodec(secret)
  const names = redisNames(redis.prefix)
  // Registered, then quiet: Postgres says both are behind, so only their acknowledgements can confirm.
  const one = await standInReplica(t, { secret, redis, registry: { pool: db.pool } })
  const two = await standInReplica(t, { secret, redis, registry: { pool: db.pool } })
  await one.pause()
  await two.pause()
  const { keys, xid } = await committedChange(db.pool, ['revoked', 'deleted'])
  const [revoked, deleted] = keys.map((key) => key.hash) as [string, string]
  t.same((await replicasBehind(db.pool, xid, 60_000)).sort(), [one.id, two.id].sort(), 'both replicas are live and have not applied the change')

  // A gateway had cached the revoked key as active; the marker must replace it.
  await redis.client.set(names.cacheEntry(revoked), codec.encodeEntry(revoked, active, Date.now() + 300_000), 'EX', 300)
  const invalidator = testInvalidator(t, db.pool, { redis, secret, liveWindowMs: 60_000, ackWaitMs: 8_000 })
  const started = Date.now()
  const report = await invalidator.invalidate(keys, xid)
  t.same(report, { confirmed: true, acknowledged: 2, unconfirmed: [], problems: [] })
  // Waiting it out would take 5 s (half the deadline caps the fast path).
  t.ok(Date.now() - started < 4_000, 'without waiting out the acknowledgement window')
  t.same(one.droppedByMessage, [revoked, deleted], 'replica one dropped both keys before the call returned')
  t.same(two.droppedByMessage, [revoked, deleted], 'replica two too')
  t.same([one.rejected, two.rejected], [[], []], 'the message passed their check')

  const read = async (hash: string) => codec.decodeEntry(hash, (await redis.client.get(names.cacheEntry(hash))) ?? '', Date.now())
  t.same(await read(revoked), { status: 'revoked' }, 'the active entry is replaced by a sealed terminal marker')
  t.same(await read(deleted), { status: 'deleted' })
  const ttl = await redis.client.ttl(names.cacheEntry(revoked))
  t.ok(ttl > redisTtlSeconds.active && ttl <= redisTtlSeconds.terminal, 'markers expire, long after any active entry')
  const fill = codec.encodeEntry(revoked, active, Date.now() + 300_000)
  t.equal(await redis.client.set(names.cacheEntry(revoked), fill, 'EX', 300, 'NX'), null, 'a racing gateway fill (SET NX) cannot overwrite the marker')
  t.equal(await redis.client.exists(names.acknowledgements(one.messages[0]!.id)), 0, 'the acknowledgement list is deleted')
})

t.test('a replica that acknowledges nothing but follows the log: confirmed through Postgres', async (t) => {
  await noReplicasRegistered(t)
  const redis = await createTestRedis(t)
  const secret = newKeyCacheSecret()
  const replica = await standInReplica(t, { secret, redis, acknowledge: false, registry: { pool: db.pool } })
  const { keys, xid } = await committedChange(db.pool, ['revoked'])
  const invalidator = testInvalidator(t, db.pool, { redis, secret, ackWaitMs: 300 })
  const report = await invalidator.invalidate(keys, xid)
  t.same(report, { confirmed: true, acknowledged: 0, unconfirmed: [], problems: [] })
  t.same(replica.droppedByLog, [keys[0]!.hash], 'it dropped the key from the log before the call returned')
  t.same(replica.droppedByMessage, [keys[0]!.hash], 'it heard the message too, without acknowledging')
  t.same(await replicasBehind(db.pool, xid, LIVE_WINDOW_MS), [], 'and the registry says it applied the transaction')
})

t.test('a registered replica that stops polling is waited for until it is no longer live', async (t) => {
  await noReplicasRegistered(t)
  const secret = newKeyCacheSecret()
  const replica = await standInReplica(t, { secret, registry: { pool: db.pool } })
  await replica.pause()
  const { keys, xid } = await committedChange(db.pool, ['revoked'])

  const early = await testInvalidator(t, db.pool, { redis: null, secret, liveWindowMs: 60_000, deadlineMs: 300 }).invalidate(keys, xid)
  t.same(
    early,
    { confirmed: false, acknowledged: 0, unconfirmed: [replica.id], problems: [] },
    'still live and behind when the deadline comes: not confirmed, and named',
  )

  const liveWindowMs = 700
  const report = await testInvalidator(t, db.pool, { redis: null, secret, liveWindowMs, deadlineMs: 5_000 }).invalidate(keys, xid)
  const quietFor = Date.now() - replica.polls.lastSentAt
  t.same(report, { confirmed: true, acknowledged: 0, unconfirmed: [], problems: [] }, 'confirmed once it stopped being live')
  t.ok(quietFor >= liveWindowMs - 20, `not before it had been quiet for the live window (${quietFor} ms)`)
  t.same(replica.droppedByLog, [], 'it never applied the change: confirmation came from its silence alone')
})

t.test('Redis unreachable: confirmed through Postgres, and the report names Redis', async (t) => {
  await noReplicasRegistered(t)
  const secret = newKeyCacheSecret()
  const replica = await standInReplica(t, { secret, registry: { pool: db.pool } })
  const { keys, xid } = await committedChange(db.pool, ['deleted'])
  // Nothing listens on this port.
  const invalidator = testInvalidator(t, db.pool, {
    redis: { url: `redis://127.0.0.1:${await freePort()}`, prefix: 'sak-test-nowhere:' },
    secret,
    deadlineMs: 5_000,
  })
  const started = Date.now()
  const report = await invalidator.invalidate(keys, xid)
  t.equal(report.confirmed, true, 'confirmed')
  t.same([report.acknowledged, report.unconfirmed], [0, []])
  t.ok(report.problems.length > 0, 'with problems')
  t.ok(
    report.problems.every((problem) => /^Redis/.test(problem)),
    `each naming Redis: ${JSON.stringify(report.problems)}`,
  )
  t.same(replica.droppedByLog, [keys[0]!.hash], 'the replica dropped the key from the log')
  // Slack for a busy machine: what is tested is that it returns, not how fast.
  t.ok(Date.now() - started < 5_000 + 2_000, 'within the deadline')
})

t.test('forged acknowledgements confirm nothing', async (t) => {
  await noReplicasRegistered(t)
  const redis = await createTestRedis(t)
  const secret = newKeyCacheSecret()
  const codec = new KeyStateCodec(secret)
  const names = redisNames(redis.prefix)
  // Live and behind, and silent on Redis: only a valid acknowledgement naming it could confirm.
  const replica = await standInReplica(t, { secret, redis, acknowledge: false, registry: { pool: db.pool } })
  await replica.pause()

  /** What an attacker with Redis access but without the secret pushes onto a message's acknowledgement list. */
  const forgeries: Array<[string, (messageId: string, published: string) => string, boolean]> = [
    ['the replica id alone, without a MAC', () => replica.id, false],
    ['the replica id with a made-up MAC', () => `${replica.id}.${'A'.repeat(43)}`, false],
    ['sealed under another secret', (id) => new KeyStateCodec(newKeyCacheSecret()).encodeAck(id, replica.id), false],
    ['a genuine acknowledgement of another message, replayed', () => codec.encodeAck(randomUUID(), replica.id), false],
    ['the published message itself, pushed back', (_id, published) => published, false],
    ['a genuine cache entry', () => codec.encodeEntry('a'.repeat(64), { status: 'revoked' }, Date.now() + 60_000), false],
    // The control: what the replica itself would push. This one must confirm, or the rows above prove nothing.
    ['(control) a genuine acknowledgement of this message', (id) => codec.encodeAck(id, replica.id), true],
  ]
  let forge: (messageId: string, published: string) => string = () => ''
  const attacker = new Redis(redis.url)
  const pusher = new Redis(redis.url)
  t.teardown(() => {
    attacker.disconnect()
    pusher.disconnect()
  })
  attacker.on('message', (_channel: string, published: string) => {
    // The message is sealed, not secret: its id can be read from the payload.
    const { id } = JSON.parse(published.slice(0, published.lastIndexOf('.'))) as { id: string }
    void pusher.rpush(names.acknowledgements(id), forge(id, published))
  })
  await attacker.subscribe(names.channel)

  for (const [name, make, confirms] of forgeries) {
    const { keys, xid } = await committedChange(db.pool, ['revoked'])
    forge = make
    const invalidator = testInvalidator(t, db.pool, { redis, secret, ackWaitMs: 300, deadlineMs: 1_200, liveWindowMs: 60_000 })
    const { confirmed, acknowledged, unconfirmed } = await invalidator.invalidate(keys, xid)
    if (confirms) t.same({ confirmed, acknowledged, unconfirmed }, { confirmed: true, acknowledged: 1, unconfirmed: [] }, name)
    else t.same({ confirmed, acknowledged, unconfirmed }, { confirmed: false, acknowledged: 0, unconfirmed: [replica.id] }, name)
  }
  t.equal(replica.messages.length, forgeries.length, 'the replica heard every message')
})

t.test('Postgres unreachable after the commit: not confirmed by the deadline, and the report names Postgres', async (t) => {
  await noReplicasRegistered(t)
  const redis = await createTestRedis(t)
  const secret = newKeyCacheSecret()
  const replica = await standInReplica(t, { secret, redis })
  const { keys, xid } = await committedChange(db.pool, ['revoked'])
  const deadlineMs = 800
  const invalidator = testInvalidator(t, poolOn(t, await freePort()), { redis, secret, deadlineMs })
  const started = Date.now()
  const report = await invalidator.invalidate(keys, xid)
  const elapsed = Date.now() - started
  t.equal(report.confirmed, false, 'an acknowledgement from every replica Redis knows of is not enough: the registry could not be read')
  t.equal(report.acknowledged, 1)
  t.same(replica.droppedByMessage, [keys[0]!.hash])
  t.match(report.problems, [/^Postgres: /], `names Postgres: ${JSON.stringify(report.problems)}`)
  t.ok(elapsed < deadlineMs + 2_000, `answered by the deadline (${elapsed} ms)`)
})

t.test('invalidate returns within its deadline, whatever hangs', async (t) => {
  await noReplicasRegistered(t)
  const redis = await createTestRedis(t)
  const secret = newKeyCacheSecret()
  // A replica that keeps polling but never applies anything: live and behind for as long as the test runs.
  const stuck = await standInReplica(t, { secret, registry: { pool: db.pool, mode: 'stuck' } })
  const deadlineMs = 1_000
  const rows: Array<[string, 'ok' | 'hangs', 'ok' | 'hangs', RegExp]> = [
    ['Redis hangs', 'hangs', 'ok', /^Redis/],
    ['Postgres hangs', 'ok', 'hangs', /^Postgres/],
    ['both hang', 'hangs', 'hangs', /^Redis|^Postgres/],
    ['nothing hangs, a live replica is behind', 'ok', 'ok', /^$/],
  ]
  for (const [name, redisState, postgresState, problem] of rows) {
    const { keys, xid } = await committedChange(db.pool, ['revoked'])
    const redisPlace = redisState === 'ok' ? redis : { url: `redis://127.0.0.1:${(await blackHole(t)).port}`, prefix: redis.prefix }
    const pool = postgresState === 'ok' ? db.pool : poolOn(t, (await blackHole(t)).port)
    const invalidator = testInvalidator(t, pool, { redis: redisPlace, secret, deadlineMs })
    const started = Date.now()
    const report = await invalidator.invalidate(keys, xid)
    const elapsed = Date.now() - started
    t.equal(report.confirmed, false, `${name}: not confirmed`)
    t.ok(elapsed <= deadlineMs + 2_000, `${name}: answered within the deadline (${elapsed} ms)`)
    if (postgresState === 'ok') t.same(report.unconfirmed, [stuck.id], `${name}: names the replica that is behind`)
    for (const text of report.problems) t.match(text, problem, `${name}: ${text}`)
    if (redisState === 'hangs' || postgresState === 'hangs') t.ok(report.problems.length > 0, `${name}: says what went wrong`)
  }
})

t.test('a change goes out with the state version it made, so a replica pins it before it acknowledges', async (t) => {
  await noReplicasRegistered(t)
  const redis = await createTestRedis(t)
  const secret = newKeyCacheSecret()
  const replica = await standInReplica(t, { secret, redis, registry: { pool: db.pool } })
  await replica.pause()
  const tenants = await createTestTenants(db.pool, `Versions ${randomUUID().slice(0, 8)}`)
  const service = new KeyService(db.pool, testInvalidator(t, db.pool, { redis, secret, liveWindowMs: 60_000, ackWaitMs: 8_000 }))
  const created = await service.create({ scope: 'AGENCY', agencyId: tenants.agencyId }, 'versioned', 'test')
  await service.update(created.id, { actor: 'user:u1', allowedCidrs: ['10.9.9.9/32'] })
  await service.update(created.id, { actor: 'user:u1', rateLimit: { rate: 1, burst: 2 } })
  t.same(
    replica.messages.map((message) => message.keys),
    [
      // The creation first (for the issued-key filters), then each change with the version it made.
      [{ hash: hashKey(created.key), state: 'created' }],
      [{ hash: hashKey(created.key), state: 'changed', version: 2 }],
      [{ hash: hashKey(created.key), state: 'changed', version: 3 }],
    ],
    'confirmed by the acknowledgement of a replica that heard each version',
  )
})
