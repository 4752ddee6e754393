/**
 * Confirmation through Postgres alone. The gateways use Redis, but `ctl key
 * revoke|delete` runs without REDIS_URL and without any secret (so it cannot
 * take the Redis fast path at all): it exits 0 only once every live replica
 * has applied the revoking transaction from the invalidation log, and the
 * next request on every replica is 401.
 *
 * And a replica that stopped polling (SIGSTOP, for at least 3 s, across a
 * revoke): the revoke still returns within 10 s, because a replica not seen
 * for LIVE_WINDOW_MS is no longer waited for (it stopped trusting its caches
 * STALE_AFTER_MS after its last poll); and when it resumes, its very first
 * request with the key (sent while it was stopped) is refused.
 */
import t from 'tap'
import type { Test } from 'tap'
import { LIVE_WINDOW_MS } from '@scoped/shared/key-invalidation'
import { hashKey } from '@scoped/shared/keys'
import type { HttpsClient } from '../helpers/https.js'
import { httpsClient } from '../helpers/https.js'
import { startRedisServer } from '../helpers/redis-server.js'
import type { StackReplica } from '../helpers/stack.js'
import { startStack } from '../helpers/stack.js'
import { appliedBy, COMMAND_LIMIT_MS, createTenancy, ctlConnected, get, registry, replicaIdOf, REVOKED, signal, sleep, timedCtl } from './support.js'

/** How long the replica stays stopped at least. */
const STOPPED_MS = 3_000

t.test('ctl without Redis, and a replica that stopped polling', async (t) => {
  const redis = await startRedisServer(t)
  const stack = await startStack(t, { replicas: 2, redis: { url: redis.url } })
  const clients = stack.gatewayPorts.map((port) => httpsClient(t, port, stack.cert))
  const tenancy = await createTenancy(stack.db.pool, 'Postgres Only')
  // No REDIS_URL, no TENANT_SIGNING_SECRET, no KEY_CACHE_SECRET: this ctl cannot even speak the Redis protocol.
  const postgresOnly = { DATABASE_URL: stack.db.url, KEY_CACHE_SECRET: undefined }

  const all = (key: string) => Promise.all(clients.map((client) => get(client, '/v1/agents', key)))
  const warm = async (t: Test, key: string) => {
    for (let round = 0; round < 2; round++) for (const [i, response] of (await all(key)).entries()) t.equal(response.status, 200, `replica ${i + 1}: warm`)
  }

  for (const action of ['revoke', 'delete'] as const) {
    await t.test(`ctl key ${action} without REDIS_URL or any secret`, async (t) => {
      const key = await tenancy.subKey(action)
      await warm(t, key.key)
      const result = await timedCtl(['key', action, key.id], postgresOnly, stack.db)
      t.comment(`ctl key ${action} through Postgres only: ${result.workMs} ms (${result.ms} ms with the process start), exit ${result.status}`)
      t.equal(result.status, 0, `confirmed by every replica through Postgres: ${result.stderr.trim()}`)
      t.ok(
        result.workMs < COMMAND_LIMIT_MS,
        `returned within ${COMMAND_LIMIT_MS} ms of starting on it (${result.workMs} ms; ${result.ms} ms with the process start)`,
      )
      for (const [i, response] of (await all(key.key)).entries()) {
        t.equal(response.status, 401, `replica ${i + 1}: the very next request`)
        t.equal(response.json?.message, REVOKED)
      }
    })
  }

  await t.test(`a replica stopped (SIGSTOP) for at least ${STOPPED_MS / 1000} s across a revoke`, async (t) => {
    const key = await tenancy.subKey('stopped replica')
    await warm(t, key.key)
    const [running, stopped] = stack.replicas as [StackReplica, StackReplica]
    const [runningClient, stoppedClient] = clients as [HttpsClient, HttpsClient]
    const stoppedId = await replicaIdOf(stack.db.pool, stopped.pid)

    // Stopped just as ctl starts its transaction, so the replica is still live (seen within LIVE_WINDOW_MS) when it commits.
    const revoke = timedCtl(['key', 'revoke', key.id], stack.ctlEnv, stack.db)
    await ctlConnected(stack.db.pool, stack.db.name)
    signal(stopped.pid, 'SIGSTOP')
    const stoppedAt = performance.now()
    t.teardown(() => signal(stopped.pid, 'SIGCONT'))
    // A poll sent just before the signal may still land; after that it is silent.
    await sleep(300)
    const lastSeen = (await registry(stack.db.pool)).find((row) => row.id === stoppedId)!.seenAt

    const result = await revoke
    const returnedAt = Date.now()
    const heldFor = Math.round(performance.now() - stoppedAt)
    t.comment(
      `ctl key revoke with one replica stopped: ${result.workMs} ms (${result.ms} ms with the process start), exit ${result.status}; returned ${heldFor} ms after the stop, ${returnedAt - lastSeen} ms after the stopped replica was last seen`,
    )
    t.ok(
      result.workMs < COMMAND_LIMIT_MS,
      `returned within ${COMMAND_LIMIT_MS} ms of starting on it (${result.workMs} ms; ${result.ms} ms with the process start)`,
    )
    t.equal(result.status, 0, `confirmed: the stopped replica is no longer live, so it trusts no cache: ${result.stderr.trim()}`)
    t.equal((await registry(stack.db.pool)).find((row) => row.id === stoppedId)?.seenAt, lastSeen, 'the stopped replica has not polled meanwhile')
    if (await appliedBy(stack.db.pool, stoppedId, hashKey(key.key))) {
      t.comment('the stopped replica had applied the revoke just before it stopped (the race this test tries to avoid); nothing to wait for')
    } else {
      t.ok(
        returnedAt >= lastSeen + LIVE_WINDOW_MS,
        `it waited until the stopped replica was no longer live (returned ${returnedAt - lastSeen} ms after it was last seen)`,
      )
    }

    const onRunning = await get(runningClient, '/v1/agents', key.key)
    t.equal(onRunning.status, 401, 'the running replica refuses the key at once')
    t.ok(running.pid !== stopped.pid)

    // The request to the stopped replica is sent while it is still stopped: the first thing it answers when it resumes.
    const pending = get(stoppedClient, '/v1/agents', key.key)
    const remaining = STOPPED_MS - (performance.now() - stoppedAt)
    if (remaining > 0) await sleep(remaining)
    signal(stopped.pid, 'SIGCONT')
    const first = await pending
    t.equal(first.status, 401, 'the resumed replica refuses the key on its first request: it is no longer current')
    t.equal(first.json?.message, REVOKED)
    const again = await get(stoppedClient, '/v1/agents', key.key)
    t.equal(again.status, 401, 'and on the next')
    const other = await tenancy.subKey('after resume')
    t.equal((await get(stoppedClient, '/v1/agents', other.key)).status, 200, 'the resumed replica serves other keys')
  })
})
