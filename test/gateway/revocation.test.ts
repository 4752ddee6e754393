/**
 * Immediate revocation (spec §3, contract): once `ctl key revoke` or
 * `ctl key delete` has returned, the very next request with that key gets 401
 * on every gateway replica, whatever they had cached. Each of those refusals
 * is counted in the revoked key's usage and request log, as `revoked`, by
 * every replica, whatever told it of the revoke; a deleted key's are counted
 * for no one.
 */
import t from 'tap'
import type { Test } from 'tap'
import { errorCatalog } from '@scoped/shared/errors'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import type { CreatedKey } from '@scoped/agency-service/keys/key-service'
import { createKeyInvalidator } from '@scoped/agency-service/invalidator'
import { readKeyCacheSecret } from '@scoped/shared/secrets'
import type { HttpsClient } from '../helpers/https.js'
import { runCtl } from '../helpers/processes.js'
import type { GatewayFixture, Replica } from './fixture.js'
import { gatewayFixture } from './fixture.js'

const KEYS_PER_ROUND = 15
const UNTHROTTLED = { GATEWAY_AUTH_FAILURE_LIMIT: '1000000' }
/** ctl runs at once (each is a Node process). */
const CONCURRENCY = 5

async function memoryHits(replica: Replica): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${replica.ports.admin}/metrics`)).text()
  return Number(/gateway_key_cache_lookups_total\{layer="memory",result="hit"\} (\d+)/.exec(text)?.[1] ?? 0)
}

async function inBatches<T>(items: readonly T[], size: number, work: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(work))
}

/** Usage rows of `keyIds` written so far, by key and outcome ("<key id> <outcome>": requests), and their request log rows' outcomes. */
async function written(fixture: GatewayFixture, keyIds: readonly string[]): Promise<{ usage: Record<string, number>; log: Record<string, number> }> {
  const usage = await fixture.db.pool.query<{ k: string; n: number }>(
    `SELECT key_id || ' ' || outcome AS k, sum(requests)::int AS n FROM usage_minutes WHERE key_id = ANY($1::uuid[]) GROUP BY 1`,
    [keyIds],
  )
  const log = await fixture.db.pool.query<{ k: string; n: number }>(
    `SELECT key_id || ' ' || outcome || ' ' || status AS k, count(*)::int AS n FROM request_log WHERE key_id = ANY($1::uuid[]) GROUP BY 1`,
    [keyIds],
  )
  return { usage: Object.fromEntries(usage.rows.map((row) => [row.k, row.n])), log: Object.fromEntries(log.rows.map((row) => [row.k, row.n])) }
}

const get = (client: HttpsClient, key: string) => client.request('/v1/agents', { headers: { authorization: `Bearer ${key}` } })

/** Ends a key's life as `ctl` does: through the CLI, or through the same key service in process (as the console does). */
type Ender = (key: CreatedKey) => Promise<void>

function viaCli(t: Test, fixture: GatewayFixture, action: 'revoke' | 'delete'): Ender {
  return async (key) => {
    const result = await runCtl(['key', action, key.id], fixture.ctlEnv)
    t.equal(result.status, 0, `ctl key ${action} returned`)
  }
}

async function revokeAndProbe(
  t: Test,
  replicas: Replica[],
  action: 'revoke' | 'delete',
  keys: CreatedKey[],
  end: (key: CreatedKey, index: number) => Promise<void>,
): Promise<void> {
  for (const key of keys) {
    for (const replica of replicas) {
      // Twice: the second answer comes from the warm in-process cache.
      t.equal((await get(replica.client, key.key)).status, 200)
      t.equal((await get(replica.client, key.key)).status, 200)
    }
  }
  await inBatches(keys, CONCURRENCY, async (key) => {
    await end(key, keys.indexOf(key))
    // The very next request on every replica, at once.
    const responses = await Promise.all(replicas.map((replica) => get(replica.client, key.key)))
    responses.forEach((response, index) => {
      t.equal(response.status, 401, `replica ${index + 1}: 401 right after ${action}`)
      t.equal(response.json?.message, errorCatalog.revokedKey.message)
    })
  })
}

t.test('two replicas, one database, one Redis prefix', async (t) => {
  const fixture = await gatewayFixture(t)
  // Every probe comes from one address and many present revoked keys: the failed-authentication throttle is not what this tests.
  const replicas = await Promise.all([fixture.startReplica(UNTHROTTLED), fixture.startReplica(UNTHROTTLED)])
  const create = (name: string): Promise<CreatedKey[]> =>
    Promise.all(Array.from({ length: KEYS_PER_ROUND }, (_, i) => fixture.createKey('sub-account', `${name} ${i}`)))
  const ended: Record<'revoked' | 'deleted' | 'cold', CreatedKey[]> = { revoked: [], deleted: [], cold: [] }

  await t.test(`revoke: ${KEYS_PER_ROUND} keys`, async (t) => {
    const before = await Promise.all(replicas.map(memoryHits))
    ended.revoked = await create('revoke')
    await revokeAndProbe(t, replicas, 'revoke', ended.revoked, viaCli(t, fixture, 'revoke'))
    const after = await Promise.all(replicas.map(memoryHits))
    replicas.forEach((_, i) => t.ok(after[i]! - before[i]! >= KEYS_PER_ROUND, `replica ${i + 1} served warm keys from memory`))
  })

  await t.test(`delete: ${KEYS_PER_ROUND} keys (one in three through the CLI, the others through the key service in process)`, async (t) => {
    const invalidator = createKeyInvalidator(
      fixture.db.pool,
      { redisUrl: fixture.redis!.url, redisKeyPrefix: fixture.redis!.prefix, keyCacheSecret: readKeyCacheSecret(fixture.env) },
      'test-console',
    )
    t.teardown(() => invalidator.close())
    const service = new KeyService(fixture.db.pool, invalidator)
    const cli = viaCli(t, fixture, 'delete')
    ended.deleted = await create('delete')
    await revokeAndProbe(t, replicas, 'delete', ended.deleted, async (key, index) => {
      if (index % 3 === 0) await cli(key)
      else
        t.same(
          await service.delete(key.id, 'test'),
          { id: key.id, invalidation: { confirmed: true, acknowledged: 2, unconfirmed: [], problems: [] } },
          'both replicas acknowledged through Redis',
        )
    })
  })

  await t.test('a key that was never warm is refused too, and other keys are unaffected', async (t) => {
    const [kept, cold] = await Promise.all([fixture.createKey('sub-account', 'kept'), fixture.createKey('sub-account', 'cold')])
    ended.cold = [cold]
    t.equal((await runCtl(['key', 'revoke', cold.id], fixture.ctlEnv)).status, 0)
    for (const replica of replicas) {
      t.equal((await get(replica.client, cold.key)).status, 401)
      t.equal((await get(replica.client, kept.key)).status, 200)
    }
  })

  await t.test("every refusal is counted in the revoked key's usage and request log; a deleted key's in no one's", async (t) => {
    // Each replica's counts so far, written now rather than at its next flush.
    await Promise.all(replicas.map((replica) => replica.gateway.usage.flush()))
    const all = [...ended.revoked, ...ended.deleted, ...ended.cold]
    const { usage, log } = await written(
      fixture,
      all.map((key) => key.id),
    )
    const expected: { usage: Record<string, number>; log: Record<string, number> } = { usage: {}, log: {} }
    for (const key of [...ended.revoked, ...ended.deleted]) expected.usage[`${key.id} served`] = 2 * replicas.length
    // Warm when revoked, or never used (its revoke told by a message that names no owner, then by the log): one refusal per replica.
    for (const key of [...ended.revoked, ...ended.cold]) {
      expected.usage[`${key.id} revoked`] = replicas.length
      expected.log[`${key.id} revoked 401`] = replicas.length
    }
    t.same(usage, expected.usage, 'usage: the served requests, and each revoked key’s refusals as `revoked`; none of the deleted keys’')
    t.same(log, expected.log, 'the request log: each refusal of a revoked key, nothing of a deleted one')
  })
})

t.test('one replica without Redis: revoke and delete take effect on the next request', async (t) => {
  const fixture = await gatewayFixture(t, { redis: false })
  const replica = await fixture.startReplica(UNTHROTTLED)
  for (const action of ['revoke', 'delete'] as const) {
    const key = await fixture.createKey('sub-account', action)
    t.equal((await get(replica.client, key.key)).status, 200)
    t.equal((await get(replica.client, key.key)).status, 200)
    const result = await runCtl(['key', action, key.id], fixture.ctlEnv)
    t.equal(result.status, 0)
    const next = await get(replica.client, key.key)
    t.equal(next.status, 401, `401 right after ${action}`)
    t.equal(next.json?.message, errorCatalog.revokedKey.message)
  }
})
