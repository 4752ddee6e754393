/**
 * Rate limits through gateway replicas (in the test's process) over HTTPS,
 * with real Postgres and Redis: a key over its limit gets 429 with
 * Retry-After and the RateLimit headers while another key of the same tenant
 * goes on; a tenant limit is shared by its keys; two replicas hold a
 * limit together; with Redis unreachable a replica falls back to its share.
 * A refused request never reaches the backend.
 */
import t from 'tap'
import { errorCatalog } from '@scoped/shared/errors'
import type { HttpsClient } from '../helpers/https.js'
import { freePort } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait-for.js'
import { gatewayFixture } from './fixture.js'

const fixture = await gatewayFixture(t)
const echo = `http://127.0.0.1:${fixture.echoPort}`
const routesFile = fixture.routesFile(
  `rateLimits:
  AGENCY:
    key: { rate: 0.05, burst: 3 }
routes:
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
      tenant: { rate: 0.05, burst: 6 }
  - { prefix: /v1/calls, scope: SUB-ACCOUNT, upstream: "${echo}" }
  - { prefix: /console, auth: session, upstream: "${echo}" }
`,
)
const get = (client: HttpsClient, path: string, key: string, marker = '') => client.request(`${path}${marker}`, { headers: { authorization: `Bearer ${key}` } })

t.test('one key over its limit gets 429 with Retry-After and RateLimit headers; another key of the same tenant is unaffected', async (t) => {
  const replica = await fixture.startReplica({ ROUTES_FILE: routesFile }, { t })
  const [first, second] = [await fixture.createKey('sub-account', 'first'), await fixture.createKey('sub-account', 'second')]
  for (let i = 1; i <= 4; i++) {
    const ok = await get(replica.client, '/v1/agents', first.key)
    t.equal(ok.status, 200, `request ${i} within the burst`)
    t.equal(ok.headers['ratelimit-policy'], '"key";q=4;w=80', 'the policy on every response of a limited route')
    t.match(ok.headers['ratelimit'], /^"key";r=\d+;t=\d+$/)
  }
  const limited = await get(replica.client, '/v1/agents', first.key, '?marker=limited-once')
  t.equal(limited.status, 429)
  t.same(limited.json, { success: false, message: errorCatalog.rateLimited.message })
  t.match(limited.headers['retry-after'], /^[1-9]\d*$/, 'Retry-After')
  t.equal(limited.headers['ratelimit-policy'], '"key";q=4;w=80')
  t.match(limited.headers['ratelimit'], /^"key";r=0;t=\d+$/)
  t.notOk(fixture.echo.output().includes('marker=limited-once'), 'the refused request never reached the backend')
  t.equal((await get(replica.client, '/v1/agents', second.key)).status, 200, 'another key of the same tenant goes on')
  t.equal((await get(replica.client, '/v1/calls', first.key)).status, 200, 'a route without limits is not limited')
  t.notOk((await get(replica.client, '/v1/calls', first.key)).headers['ratelimit-policy'], 'and carries no RateLimit headers')
  // The request's log line is written once its response has gone out: wait for it rather than read at once.
  const log = await waitFor(
    () =>
      replica
        .output()
        .split('\n')
        .find((line) => line.includes('"outcome":"rate-limited"')),
    'the log line of the refusal',
  )
  t.match(log, /"limit":"key"/, 'the log line says which limit refused it')
  t.notOk(log?.includes(first.key), 'and never the key')
  const metrics = await (await fetch(`http://127.0.0.1:${replica.ports.admin}/metrics`)).text()
  t.match(metrics, /gateway_requests_total\{outcome="rate-limited",scope="SUB-ACCOUNT",route="\/v1\/agents"\} 1/)
  t.match(metrics, /gateway_throttled_requests_total\{limit="key"\} 1/)
})

t.test('a tenant limit is shared by all of the tenant’s keys; the scope default applies to agency keys', async (t) => {
  const replica = await fixture.startReplica({ ROUTES_FILE: routesFile }, { t })
  const keys = [await fixture.createKey('sub-account', 'a'), await fixture.createKey('sub-account', 'b')]
  const statuses: number[] = []
  for (let i = 0; i < 8; i++) statuses.push((await get(replica.client, '/v1/contacts', keys[i % 2]!.key)).status)
  t.same(statuses, [200, 200, 200, 200, 200, 200, 429, 429], 'six together, whichever key')
  const agencyKey = await fixture.createKey('agency', 'agency')
  const agency: number[] = []
  for (let i = 0; i < 4; i++) agency.push((await get(replica.client, '/v1/agency', agencyKey.key)).status)
  t.same(agency, [200, 200, 200, 429], 'the AGENCY default from rateLimits')
})

t.test('two replicas together hold a limit (leases from one shared bucket: no overshoot while Redis answers)', async (t) => {
  const replicas = await Promise.all([fixture.startReplica({ ROUTES_FILE: routesFile }, { t }), fixture.startReplica({ ROUTES_FILE: routesFile }, { t })])
  const key = await fixture.createKey('sub-account', 'shared')
  const started = performance.now()
  const statuses = await Promise.all(
    Array.from({ length: 12 }, (_, i) => get(replicas[i % 2]!.client, '/v1/agents', key.key).then((response) => response.status)),
  )
  const seconds = (performance.now() - started) / 1000
  const admitted = statuses.filter((status) => status === 200).length
  t.ok(admitted <= 4 + Math.ceil(0.05 * seconds), `${admitted} admitted across both replicas, within the burst of 4`)
  t.equal(admitted + statuses.filter((status) => status === 429).length, 12, 'every other request got 429')
})

t.test('Redis unreachable: a replica falls back to its share of the limit (fail-soft, never unlimited)', async (t) => {
  const replica = await fixture.startReplica({ ROUTES_FILE: routesFile, REDIS_URL: `redis://127.0.0.1:${await freePort()}` }, { t })
  const key = await fixture.createKey('sub-account', 'no redis')
  // Each replica's share is the burst of 4 divided among the replicas seen in the registry (the earlier tests'
  // replicas left it when their tests ended), counted here rather than assumed.
  const { rows } = await fixture.db.pool.query<{ live: number }>(
    `SELECT count(*)::int AS live FROM gateway_replicas WHERE seen_at > now() - interval '1.5 seconds'`,
  )
  const share = Math.floor(Math.max(1, 4 / rows[0]!.live))
  const statuses: number[] = []
  for (let i = 0; i < 6; i++) statuses.push((await get(replica.client, '/v1/agents', key.key)).status)
  t.same(statuses, [...Array<number>(share).fill(200), ...Array<number>(6 - share).fill(429)], `its share: 4 ÷ ${rows[0]!.live} replicas seen`)
})
