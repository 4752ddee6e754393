/**
 * Redis down: a revoke or delete never depends on Redis. Two gateway
 * replicas on a private redis-server have a key warm in memory; Redis is
 * killed; `ctl key revoke|delete` (a process whose REDIS_URL points at the
 * dead server) returns promptly, confirmed through Postgres (exit 0), and
 * the very next request on both replicas gets 401. When Redis comes back,
 * empty, the ended keys stay refused and new keys work.
 */
import t from 'tap'
import type { Test } from 'tap'
import { httpsClient } from '../helpers/https.js'
import { startRedisServer } from '../helpers/redis-server.js'
import { startStack } from '../helpers/stack.js'
import { COMMAND_LIMIT_MS, createTenancy, get, REVOKED, sleep, timedCtl } from './support.js'

t.test('Redis down: revoke and delete confirm through Postgres, and take effect on the next request', async (t) => {
  const redis = await startRedisServer(t)
  // The backends keep their nonces in their own memory: with this Redis they would refuse every signed request while it is down.
  const stack = await startStack(t, { replicas: 2, redis: { url: redis.url }, backendEnv: { agency: { REDIS_URL: '' }, resource: { REDIS_URL: '' } } })
  const clients = stack.gatewayPorts.map((port) => httpsClient(t, port, stack.cert))
  const tenancy = await createTenancy(stack.db.pool, 'Downtown')
  const [toRevoke, toDelete, bystander] = [await tenancy.subKey('revoke'), await tenancy.subKey('delete'), await tenancy.subKey('bystander')]

  const all = (key: string) => Promise.all(clients.map((client) => get(client, '/v1/agents', key)))
  const expectOk = async (t: Test, key: string, what: string) => {
    for (const [i, response] of (await all(key)).entries()) t.equal(response.status, 200, `replica ${i + 1}: ${what}`)
  }
  const expectRevoked = async (t: Test, key: string, what: string) => {
    for (const [i, response] of (await all(key)).entries()) {
      t.equal(response.status, 401, `replica ${i + 1}: ${what}`)
      t.equal(response.json?.message, REVOKED)
    }
  }

  // Warm on both replicas: the second request of each is served from memory.
  for (const key of [toRevoke, toDelete, bystander]) {
    await expectOk(t, key.key, 'warm')
    await expectOk(t, key.key, 'warm, from memory')
  }
  await redis.stop()
  t.notOk(redis.running, 'Redis is down')
  await expectOk(t, bystander.key, 'still served with Redis down')

  await t.test('key revoke', async (t) => {
    const result = await timedCtl(['key', 'revoke', toRevoke.id], stack.ctlEnv, stack.db)
    t.comment(`ctl key revoke with Redis down: ${result.workMs} ms (${result.ms} ms with the process start), exit ${result.status}`)
    t.ok(
      result.workMs < COMMAND_LIMIT_MS,
      `returned within ${COMMAND_LIMIT_MS} ms of starting on it (${result.workMs} ms; ${result.ms} ms with the process start)`,
    )
    t.equal(result.status, 0, `confirmed through Postgres: ${result.stderr.trim()}`)
    t.same(result.json, { id: toRevoke.id, status: 'revoked' })
    const { rows } = await stack.db.pool.query<{ revoked_at: Date | null }>(`SELECT revoked_at FROM api_keys WHERE id = $1`, [toRevoke.id])
    t.ok(rows[0]?.revoked_at instanceof Date, 'revoked_at is set')
    await expectRevoked(t, toRevoke.key, 'the very next request after revoke')
  })

  await t.test('key delete', async (t) => {
    const result = await timedCtl(['key', 'delete', toDelete.id], stack.ctlEnv, stack.db)
    t.comment(`ctl key delete with Redis down: ${result.workMs} ms (${result.ms} ms with the process start), exit ${result.status}`)
    t.ok(
      result.workMs < COMMAND_LIMIT_MS,
      `returned within ${COMMAND_LIMIT_MS} ms of starting on it (${result.workMs} ms; ${result.ms} ms with the process start)`,
    )
    t.equal(result.status, 0, `confirmed through Postgres: ${result.stderr.trim()}`)
    t.same(result.json, { id: toDelete.id, deleted: true })
    const { rowCount } = await stack.db.pool.query(`SELECT 1 FROM api_keys WHERE id = $1`, [toDelete.id])
    t.equal(rowCount, 0, 'the key row is gone')
    await expectRevoked(t, toDelete.key, 'the very next request after delete')
  })

  await expectOk(t, bystander.key, 'another key is unaffected')

  await t.test('Redis comes back, empty: ended keys stay refused, new keys work', async (t) => {
    await redis.start()
    // Both replicas subscribed again (ioredis reconnects on its own, within 2 s).
    const probe = redis.client()
    const channel = `${stack.redis.prefix}key-invalidation`
    const until = Date.now() + 10_000
    let subscribers = 0
    while (Date.now() < until) {
      const reply = (await probe.pubsub('NUMSUB', channel)) as [string, number]
      subscribers = Number(reply[1])
      if (subscribers >= 2) break
      await sleep(100)
    }
    t.equal(subscribers, 2, 'both replicas listen on the invalidation channel again')
    await expectRevoked(t, toRevoke.key, 'revoked key, Redis back')
    await expectRevoked(t, toDelete.key, 'deleted key, Redis back')
    await expectOk(t, bystander.key, 'the bystander key, Redis back')

    const created = await timedCtl(['key', 'create', '--sub-account', tenancy.sub.id, '--name', 'after the outage'], stack.ctlEnv, stack.db)
    t.equal(created.status, 0, created.stderr)
    const fresh = (created.json as { id: string; key: string }).key
    await expectOk(t, fresh, 'a new key works')
    await expectOk(t, fresh, 'a new key works, from memory')
    // And the fast path works again: the revoke is confirmed (acknowledged through Redis or Postgres) and refused at once.
    const revoked = await timedCtl(['key', 'revoke', (created.json as { id: string }).id], stack.ctlEnv, stack.db)
    t.equal(revoked.status, 0, revoked.stderr)
    t.ok(revoked.workMs < COMMAND_LIMIT_MS, `returned within ${COMMAND_LIMIT_MS} ms of starting on it (${revoked.workMs} ms)`)
    await expectRevoked(t, fresh, 'a new key revoked with Redis up')
  })
})
