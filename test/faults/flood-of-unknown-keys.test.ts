/**
 * A flood of keys never issued, at full speed from many addresses, through a
 * real gateway process: each is answered 401 from the replica's issued-key
 * filter (or 429 once its address is over its allowance), with no store
 * lookup, counted by the replica's own metrics (Postgres round trips less its
 * invalidation log polls, Redis key-cache reads). While the replica is not
 * current with the log (a starved machine can delay its polls past 2 s), keys
 * outside the filter are looked up under the unknown-key budget instead: those
 * lookups are counted apart and must stay within it. A key created meanwhile
 * works at once from a flooding address; an IPv6 client is one client per /64
 * (addresses given through a trusted proxy's X-Forwarded-For, since the test
 * machine has one IPv6 address).
 */
import t from 'tap'
import { createKeyInvalidator } from '@scoped/agency-service/invalidator'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { DEFAULT_UNKNOWN_KEY_BUDGET } from '@scoped/gateway/issued-keys/unknown-key-budget'
import { generateKey } from '@scoped/shared/keys'
import { startStack } from '../helpers/stack.js'
import { connect, lookups, metric, subAccounts } from './innocent.js'

const ADDRESSES = 20
const KEYS_PER_ADDRESS = 40
const BUDGET = DEFAULT_UNKNOWN_KEY_BUDGET

t.test('keys never issued cost the stores nothing, and IPv6 clients are throttled by /64', async (t) => {
  const stack = await startStack(t, { replicas: 1, gatewayEnv: { GATEWAY_TRUSTED_PROXIES: '127.0.0.1' } })
  const replica = stack.replicas[0]!
  const [owner] = await subAccounts(stack, 1)
  const keys = new KeyService(stack.db.pool, createKeyInvalidator(stack.db.pool, { redisUrl: undefined, redisKeyPrefix: '', keyCacheSecret: undefined }, 't'))
  const ready = (await (await fetch(`http://127.0.0.1:${replica.adminPort}/readyz`)).json()) as { checks: Record<string, boolean> }
  t.equal(ready.checks['issuedKeys'], true, '/readyz reports the issued-key filter loaded')

  // The flood: every address at once, each sending keys never issued as fast as it is answered.
  const before = await lookups(replica.adminPort)
  const statuses = new Map<number, number>()
  const started = performance.now()
  await Promise.all(
    Array.from({ length: ADDRESSES }, async (_, a) => {
      const send = connect(t, stack, replica.port, `127.0.1.${a + 1}`)
      for (let i = 0; i < KEYS_PER_ADDRESS; i++) {
        const { status } = await send(generateKey())
        statuses.set(status, (statuses.get(status) ?? 0) + 1)
      }
    }),
  )
  const seconds = (performance.now() - started) / 1000
  const after = await lookups(replica.adminPort)
  const delta = {
    postgres: after.postgres - before.postgres,
    redis: after.redis - before.redis,
    unsure: after.unsure - before.unsure,
    refused: after.refused - before.refused,
  }
  t.comment(
    `${ADDRESSES * KEYS_PER_ADDRESS} keys never issued from ${ADDRESSES} addresses in ${seconds.toFixed(1)} s: ${JSON.stringify(Object.fromEntries(statuses))}; ` +
      `store lookups ${JSON.stringify(delta)}`,
  )
  t.equal(
    (statuses.get(401) ?? 0) + (statuses.get(429) ?? 0) + (statuses.get(503) ?? 0),
    ADDRESSES * KEYS_PER_ADDRESS,
    'each refused: 401, or 429 past its allowance',
  )
  t.equal(statuses.get(503) ?? 0, delta.refused, 'a 503 only where the replica could not vouch and the unknown-key budget was spent')
  // A false positive of the filter reaches the store; with so few keys issued its chance is far below one in the flood.
  // (A poll in flight when a count is read adds one round trip that is not yet counted as a poll.)
  t.ok(delta.postgres - delta.unsure <= 2, `no Postgres lookup for a key the filter vouched was never issued (${delta.postgres - delta.unsure})`)
  t.ok(delta.redis - delta.unsure <= 1, `nor a Redis read (${delta.redis - delta.unsure})`)
  t.ok(delta.unsure <= BUDGET.burst + BUDGET.rate * seconds, `lookups while not current stay within the unknown-key budget (${delta.unsure})`)
  t.ok((await metric(replica.adminPort, /^gateway_unknown_keys_refused_from_memory_total (\d+)/gm)) > 0, 'counted as refused from memory')

  // A key created now, used at once from an address of the flood: 200.
  const created = await keys.create(owner!, 'after the flood', 'test')
  t.equal((await connect(t, stack, replica.port, '127.0.1.1')(created.key)).status, 200, 'a new key from a throttled address: 200 on its first use')

  // IPv6 through a trusted proxy: 60 addresses of one /64 are one client.
  const proxy = connect(t, stack, replica.port, '127.0.0.1')
  const rotating: number[] = []
  for (let i = 1; i <= 60; i++) rotating.push((await proxy(generateKey(), { 'x-forwarded-for': `2001:db8:64:64:${i.toString(16)}::${i.toString(16)}` })).status)
  t.same(rotating.slice(0, 20), Array<number>(20).fill(401), 'the /64’s first 20 keys never issued: 401')
  t.same(rotating.slice(20), Array<number>(40).fill(429), 'then every other address of that /64 is throttled: 429')
  t.equal((await proxy(generateKey(), { 'x-forwarded-for': '2001:db8:64:65::1' })).status, 401, 'the next /64 is another client')
  const fromSame64 = await proxy(created.key, { 'x-forwarded-for': '2001:db8:64:64::99' })
  t.equal(fromSame64.status, 200, 'an issued key from the throttled /64: 200')
})
