/**
 * A permission change with Redis down (issue 30): two gateway replicas on a
 * private redis-server have a restricted key warm in memory; Redis is
 * killed; `ctl key update K --permission …` (its REDIS_URL pointing at the
 * dead server) returns, confirmed through Postgres (exit 0), and the very
 * next request on both replicas is judged by the new permissions, as a
 * revoke is. Then `--unrestricted`, the same way.
 */
import t from 'tap'
import type { Test } from 'tap'
import { errorCatalog } from '@scoped/shared/errors'
import { httpsClient } from '../helpers/https.js'
import { startRedisServer } from '../helpers/redis-server.js'
import { startStack } from '../helpers/stack.js'
import { COMMAND_LIMIT_MS, createTenancy, get, timedCtl } from './support.js'

t.test('Redis down: a permission change confirms through Postgres and holds on the next request on both replicas', async (t) => {
  const redis = await startRedisServer(t)
  // The backends keep their nonces in their own memory: with this Redis they would refuse every signed request while it is down.
  const stack = await startStack(t, { replicas: 2, redis: { url: redis.url }, backendEnv: { agency: { REDIS_URL: '' }, resource: { REDIS_URL: '' } } })
  const clients = stack.gatewayPorts.map((port) => httpsClient(t, port, stack.cert))
  const tenancy = await createTenancy(stack.db.pool, 'Restricted')
  const key = await tenancy.keys.create({ scope: 'SUB-ACCOUNT', subAccountId: tenancy.sub.id }, 'reader', 'test', { permissions: ['calls:read'] })

  const expect = async (t: Test, path: string, status: number, what: string) => {
    for (const [i, response] of (await Promise.all(clients.map((client) => get(client, path, key.key)))).entries()) {
      t.equal(response.status, status, `replica ${i + 1}: ${path} ${what}`)
      if (status === 403) t.equal(response.json?.message, errorCatalog.permissionRefused.message)
    }
  }
  const update = async (t: Test, args: string[]) => {
    const result = await timedCtl(['key', 'update', key.id, ...args], stack.ctlEnv, stack.db)
    t.equal(result.status, 0, `confirmed through Postgres: ${result.stderr.trim()}`)
    t.ok(result.workMs < COMMAND_LIMIT_MS, `returned within ${COMMAND_LIMIT_MS} ms of starting on it (${result.workMs} ms)`)
    return result.json
  }

  // Warm on both replicas: the second request of each is served from memory.
  for (let round = 0; round < 2; round++) {
    await expect(t, '/v1/calls', 200, 'warm')
    await expect(t, '/v1/agents', 403, 'warm, refused')
  }
  await redis.stop()
  t.notOk(redis.running, 'Redis is down')

  t.same(await update(t, ['--permission', 'agents:read']), { id: key.id, permissions: ['agents:read'] })
  await expect(t, '/v1/agents', 200, 'the very next request after the change')
  await expect(t, '/v1/calls', 403, 'the very next request after the change')

  t.same(await update(t, ['--unrestricted']), { id: key.id, permissions: null })
  await expect(t, '/v1/calls', 200, 'unrestricted again')
  await expect(t, '/v1/contacts', 200, 'unrestricted again')
})
