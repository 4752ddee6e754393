/**
 * A key's own rate limit through gateway replicas (in the test's process)
 * over HTTPS, set with `ctl` as a process: it replaces the route's `key`
 * limit (429 `Rate limit exceeded` with Retry-After and the RateLimit
 * headers at its burst) on every
 * route of the key's scope, limited or not, while another key of the same
 * tenant keeps the route's default and the tenant limit stays the route's;
 * a change with `ctl` applies on a running replica at its next request
 * (a new bucket of the new size), and a replica that reads the key from the
 * Redis cache sees the limit too.
 */
import t from 'tap'
import type { Test } from 'tap'
import { errorCatalog } from '@scoped/shared/errors'
import { hashKey } from '@scoped/shared/keys'
import type { HttpsClient } from '../helpers/https.js'
import { runCtl } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait-for.js'
import { gatewayFixture } from './fixture.js'

const fixture = await gatewayFixture(t)
const echo = `http://127.0.0.1:${fixture.echoPort}`
// Rates of one token every 20 s or slower: no bucket refills within a test, so every count below is exact.
const routesFile = fixture.routesFile(
  `routes:
  - { prefix: /v1/agency, scope: AGENCY, upstream: "${echo}" }
  - prefix: /v1/agents
    scope: SUB-ACCOUNT
    upstream: "${echo}"
    rateLimit:
      key: { rate: 0.05, burst: 4 }
  - prefix: /v1/contacts
    scope: SUB-ACCOUNT
    upstream: "${echo}"
    rateLimit:
      tenant: { rate: 0.05, burst: 50 }
  - { prefix: /v1/calls, scope: SUB-ACCOUNT, upstream: "${echo}" }
  - { prefix: /console, auth: session, upstream: "${echo}" }
`,
)
const ctlEnv = { ...fixture.ctlEnv, TENANT_SIGNING_SECRET: fixture.secret, CTL_ACTOR: 'ops' }
const get = (client: HttpsClient, path: string, key: string) => client.request(path, { headers: { authorization: `Bearer ${key}` } })

async function ctl(t: Test, args: string[]): Promise<Record<string, unknown>> {
  const result = await runCtl(args, ctlEnv)
  t.equal(result.status, 0, `ctl ${args.join(' ')}: ${result.stderr}`)
  return result.json as Record<string, unknown>
}

/** A sub-account key with its own limit, made with `ctl key create … --rate R --burst B`. */
async function keyWithLimit(t: Test, name: string, rate: string, burst: string): Promise<{ id: string; key: string }> {
  const created = await ctl(t, ['key', 'create', '--sub-account', fixture.tenants.subAccountId, '--name', name, '--rate', rate, '--burst', burst])
  return { id: String(created['id']), key: String(created['key']) }
}

t.test('a key with its own limit of burst 2 gets 429 on its third quick request; another key of the tenant keeps the route default', async (t) => {
  const replica = await fixture.startReplica({ ROUTES_FILE: routesFile }, { t })
  const own = await keyWithLimit(t, 'own limit', '0.05', '2')
  const other = await fixture.createKey('sub-account', 'route default')

  for (let i = 1; i <= 2; i++) {
    const ok = await get(replica.client, '/v1/agents', own.key)
    t.equal(ok.status, 200, `request ${i} within the key’s own burst`)
    t.equal(ok.headers['ratelimit-policy'], '"key";q=2;w=40', 'the policy names the key’s own limit, not the route’s 4')
    t.match(ok.headers['ratelimit'], /^"key";r=\d+;t=\d+$/)
  }
  const limited = await get(replica.client, '/v1/agents?marker=own-limit', own.key)
  t.equal(limited.status, 429, 'the third request is over the key’s own limit')
  t.same(limited.json, { success: false, message: errorCatalog.rateLimited.message })
  t.match(limited.headers['retry-after'], /^[1-9]\d*$/, 'Retry-After')
  t.equal(limited.headers['ratelimit-policy'], '"key";q=2;w=40')
  t.match(limited.headers['ratelimit'], /^"key";r=0;t=\d+$/)
  t.notOk(fixture.echo.output().includes('marker=own-limit'), 'the refused request never reached the backend')

  for (let i = 1; i <= 3; i++) {
    const ok = await get(replica.client, '/v1/agents', other.key)
    t.equal(ok.status, 200, `another key of the same tenant: request ${i} goes on`)
    t.equal(ok.headers['ratelimit-policy'], '"key";q=4;w=80', 'on the route’s default')
  }

  // A route without limits: the key's own limit applies there too, in a bucket of that route.
  t.same(
    [(await get(replica.client, '/v1/calls', own.key)).status, (await get(replica.client, '/v1/calls', own.key)).status],
    [200, 200],
    'a route without limits: its own burst of 2, counted apart from /v1/agents',
  )
  const overCalls = await get(replica.client, '/v1/calls', own.key)
  t.equal(overCalls.status, 429, 'then 429 there too')
  t.equal(overCalls.headers['ratelimit-policy'], '"key";q=2;w=40')
  t.notOk((await get(replica.client, '/v1/calls', other.key)).headers['ratelimit-policy'], 'while a key without one is not limited there')

  // A route with a tenant limit only: the key's own limit is added; the tenant's stays the route's.
  const contacts = await get(replica.client, '/v1/contacts', own.key)
  t.equal(contacts.status, 200)
  t.equal(contacts.headers['ratelimit-policy'], '"key";q=2;w=40, "tenant";q=50;w=1000', 'its own key limit beside the route’s tenant limit')
  t.equal((await get(replica.client, '/v1/contacts', other.key)).headers['ratelimit-policy'], '"tenant";q=50;w=1000')

  const log = await waitFor(
    () =>
      replica
        .output()
        .split('\n')
        .find((line) => line.includes('"outcome":"rate-limited"')),
    'the log line of the refusal',
  )
  t.match(log, /"limit":"key"/, 'the log line says the `key` limit refused it')
  t.notOk(log?.includes(own.key), 'and never the key')
  const metrics = await (await fetch(`http://127.0.0.1:${replica.ports.admin}/metrics`)).text()
  t.match(metrics, /gateway_throttled_requests_total\{limit="key"\} 2/, 'counted as the `key` limit')
})

t.test('ctl changes the limit of a running gateway at its next request; a replica reading the key from Redis sees the limit', async (t) => {
  const replica = await fixture.startReplica({ ROUTES_FILE: routesFile }, { t })
  const own = await keyWithLimit(t, 'changing', '0.05', '2')
  t.same(
    [200, 200, 429],
    [
      (await get(replica.client, '/v1/agents', own.key)).status,
      (await get(replica.client, '/v1/agents', own.key)).status,
      (await get(replica.client, '/v1/agents', own.key)).status,
    ],
    'its burst of 2 is spent',
  )

  // One token every 1000 s: the bucket stays spent while a second replica starts, however long that takes.
  t.same(await ctl(t, ['key', 'update', own.id, '--rate', '0.001', '--burst', '5']), { id: own.id, rateLimit: { rate: 0.001, burst: 5 } })
  // ctl returns once every replica has dropped the key: the very next request reads the new limit.
  const statuses: number[] = []
  for (let i = 0; i < 6; i++) {
    const response = await get(replica.client, '/v1/agents', own.key)
    statuses.push(response.status)
    t.equal(response.headers['ratelimit-policy'], '"key";q=5;w=5000', `request ${i + 1}: the new limit, without a restart`)
  }
  t.same(statuses, [200, 200, 200, 200, 200, 429], 'a bucket of the new size: five, then 429')

  // A second replica started now finds the key in the Redis cache (written by the first, with its limit).
  const cached = await waitFor(() => fixture.redis!.client.get(`${fixture.redis!.prefix}key:${hashKey(own.key)}`), 'the key’s Redis cache entry')
  t.ok(cached, 'the first replica cached the key in Redis')
  const second = await fixture.startReplica({ ROUTES_FILE: routesFile }, { t })
  const fromRedis = await get(second.client, '/v1/agents', own.key)
  t.equal(fromRedis.headers['ratelimit-policy'], '"key";q=5;w=5000', 'the second replica applies the limit it read from Redis')
  t.equal(fromRedis.status, 429, 'and shares the spent bucket')
  const metrics = await (await fetch(`http://127.0.0.1:${second.ports.admin}/metrics`)).text()
  t.match(metrics, /gateway_key_cache_lookups_total\{layer="redis",result="hit"\} 1/, 'the key came from Redis, not Postgres')

  t.same(await ctl(t, ['key', 'update', own.id, '--clear-rate-limit']), { id: own.id, rateLimit: null })
  for (const [name, client] of [
    ['the first replica', replica.client],
    ['the second replica', second.client],
  ] as const) {
    const response = await get(client, '/v1/agents', own.key)
    t.equal(response.status, 200, `${name}: back on the route default, a bucket of its own`)
    t.equal(response.headers['ratelimit-policy'], '"key";q=4;w=80', `${name}: the route’s policy`)
  }
})
