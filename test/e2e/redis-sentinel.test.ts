/**
 * Highly available Redis: the whole stack (gateway, agency-service and ctl;
 * resource-service keeps its nonces in its own memory) with REDIS_URL naming
 * a Sentinel deployment (redis+sentinel://…, test/helpers/redis-sentinel.ts). The primary fails
 * over twice while requests flow through the gateway to the backends, first
 * killed (a crash), then demoted by a planned failover (it stays up as a
 * replica). Each time every request keeps succeeding (Redis only speeds
 * things up; Postgres answers meanwhile), the gateway follows the Sentinel to
 * the new primary and subscribes again, and revocation is immediate again
 * through it: `ctl key revoke` returns, the very next request with the key
 * gets 401, and the gateway heard it through Redis (the fast path), as it
 * does for a sub-account deleted through agency-service.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import type { Test } from 'tap'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import type { CreatedKey } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { errorCatalog } from '@scoped/shared/errors'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { httpsClient } from '../helpers/https.js'
import { runCtl } from '../helpers/processes.js'
import { startSentinelDeployment } from '../helpers/redis-sentinel.js'
import { startStack } from '../helpers/stack.js'

t.test('failovers of the Redis primary under load', async (t) => {
  const sentinel = await startSentinelDeployment(t)
  // resource-service, which the traffic reaches during the failovers, keeps its nonces in its own memory: on the Sentinel
  // deployment it would refuse signed requests (503) until it reaches the new primary. agency-service stays on it.
  const stack = await startStack(t, { redis: { url: sentinel.url }, backendEnv: { resource: { REDIS_URL: '' } } })
  const replica = stack.replicas[0]!
  const client = httpsClient(t, replica.port, stack.cert, { openapi: true })
  const tenants = new TenantStore(stack.db.pool)
  const keys = new KeyService(stack.db.pool, new KeyRevocationNotifier(stack.db.pool, null))
  const agency = await tenants.createAgency('Acme')
  const sub = await tenants.createSubAccount(agency.id, 'Acme West')
  const doomed = await tenants.createSubAccount(agency.id, 'Acme East')
  const owner = { scope: 'SUB-ACCOUNT' as const, subAccountId: sub.id }
  const busy = await keys.create(owner, 'busy', 'test')
  const fresh = [await keys.create(owner, 'first used during the crash', 'test'), await keys.create(owner, 'first used during the demotion', 'test')]
  const revoked = [await keys.create(owner, 'revoked after the crash', 'test'), await keys.create(owner, 'revoked after the demotion', 'test')]
  const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: agency.id }, 'agency', 'test')
  const doomedKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: doomed.id }, 'of a deleted sub-account', 'test')
  const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })

  async function metric(pattern: RegExp): Promise<number> {
    const text = await (await fetch(`http://127.0.0.1:${replica.adminPort}/metrics`)).text()
    return Number(pattern.exec(text)?.[1] ?? Number.NaN)
  }
  const subscribed = (): Promise<number> => metric(/^gateway_invalidation_channel_subscribed (\d+)$/m)
  const heardThroughRedis = async (): Promise<number> => (await metric(/^gateway_key_invalidations_total\{source="redis"\} (\d+)$/m)) || 0
  // Generous: a loaded machine slows every process down; a failure says what the gateway logged.
  async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (!(await check())) {
      if (Date.now() > deadline) {
        const logged = replica.process
          .output()
          .split('\n')
          .filter((line) => !line.includes('"msg":"request"'))
        throw new Error(`${what}: not within ${timeoutMs} ms; the gateway logged:\n${logged.slice(-40).join('\n')}`)
      }
      await sleep(100)
    }
  }

  /** Requests flow, one after another, through the gateway to resource-service, while `failOver` runs and the gateway follows. */
  async function underLoad(t: Test, failOver: () => Promise<number>, freshKey: CreatedKey): Promise<void> {
    const statuses = new Map<number, number>()
    let flowing = true
    let sent = 0
    const traffic = (async () => {
      while (flowing) {
        // A transport error counts as status 0: it fails the test below instead of escaping the loop.
        const response = await (
          sent % 2 === 0
            ? client.request('/v1/agents', { headers: bearer(busy.key) })
            : client.request('/v1/agents', {
                method: 'POST',
                headers: { ...bearer(busy.key), 'content-type': 'application/json' },
                body: JSON.stringify({ name: `agent ${sent}` }),
              })
        ).catch(() => ({ status: 0 }))
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1)
        sent++
        await sleep(20)
      }
    })()
    // Whatever happens below, the traffic stops, so the test ends and its teardown kills the Redis processes.
    t.teardown(() => {
      flowing = false
    })
    try {
      await eventually('traffic flowing before the failover', async () => sent >= 5)
      const oldPrimary = await failOver()
      // A key never seen before, while the primary changes: Redis fails fast and Postgres answers.
      t.equal((await client.request('/v1/contacts', { headers: bearer(freshKey.key) })).status, 200, 'a key first used during the failover')
      const newPrimary = await sentinel.waitForFailover(oldPrimary, 60_000)
      t.not(newPrimary, oldPrimary, `the Sentinel promoted a replica (${oldPrimary} -> ${newPrimary})`)
      // Connected there: its subscription, and its commands (cache, acknowledgements).
      await eventually('the gateway on the new primary', async () => {
        const names = await sentinel.clientNames(newPrimary)
        return names.some((name) => name.startsWith('gateway-subscriber-')) && names.some((name) => name.startsWith('gateway-commands-'))
      })
      await eventually('the gateway subscribed again', async () => (await subscribed()) === 1)
      // However slow the machine, the traffic runs on until it has sent enough to judge it by.
      const before = sent
      await eventually('10 more requests after the failover', async () => sent >= Math.max(20, before + 10))
    } finally {
      flowing = false
      await traffic
    }
    const succeeded = (statuses.get(200) ?? 0) + (statuses.get(201) ?? 0)
    t.ok(sent >= 20, `${sent} requests during the failover`)
    t.equal(succeeded, sent, `every request succeeded: ${JSON.stringify(Object.fromEntries(statuses))}`)
  }

  async function revokedAtOnce(t: Test, key: CreatedKey): Promise<void> {
    const before = await heardThroughRedis()
    const result = await runCtl(['key', 'revoke', key.id], stack.ctlEnv)
    t.equal(result.status, 0, `ctl key revoke: ${result.stderr}`)
    t.match(result.json, { id: key.id, status: 'revoked' })
    const next = await client.request('/v1/agents', { headers: bearer(key.key) })
    t.equal(next.status, 401, 'the very next request')
    t.equal(next.json?.message, errorCatalog.revokedKey.message)
    t.ok((await heardThroughRedis()) > before, 'the gateway heard it through Redis, the fast path')
    t.equal((await client.request('/v1/agents', { headers: bearer(busy.key) })).status, 200, 'the other keys keep working')
  }

  await eventually('the gateway subscribed through the Sentinel', async () => (await subscribed()) === 1)
  for (const key of [...revoked, doomedKey]) t.equal((await client.request('/v1/agents', { headers: bearer(key.key) })).status, 200, 'works, and is cached')

  await t.test('the primary crashes', async (t) => {
    await underLoad(t, () => sentinel.killPrimary(), fresh[0]!)
    await t.test('ctl revokes through the new primary, and the very next request gets 401', (t) => revokedAtOnce(t, revoked[0]!))
    await t.test('agency-service follows too: deleting a sub-account ends its keys at once', async (t) => {
      const primary = await sentinel.primaryPort()
      // Each of its connections: its nonces', and its invalidator's (the fast path is skipped while they reconnect).
      await eventually('agency-service on the new primary', async () => {
        const names = await sentinel.clientNames(primary)
        return ['agency-service-nonces', 'agency-service-commands', 'agency-service-blocking'].every((name) => names.includes(name))
      })
      const before = await heardThroughRedis()
      const deleted = await client.request(`/v1/agency/sub-accounts/${doomed.id}`, { method: 'DELETE', headers: bearer(agencyKey.key) })
      t.equal(deleted.status, 204)
      t.equal((await client.request('/v1/agents', { headers: bearer(doomedKey.key) })).status, 401, 'its key: 401 on the very next request')
      t.ok((await heardThroughRedis()) > before, 'through Redis')
    })
  })

  await t.test('the primary is demoted by a planned failover and stays up', async (t) => {
    await underLoad(t, () => sentinel.demotePrimary(), fresh[1]!)
    await t.test('ctl revokes through the new primary, and the very next request gets 401', (t) => revokedAtOnce(t, revoked[1]!))
  })
})
