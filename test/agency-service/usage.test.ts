/**
 * GET /v1/agency/usage, GET /v1/usage and the request log routes (issue 31),
 * against agency-service in-process with counts written as a gateway writes
 * them: one point per bucket with zeros, requests the sum of the outcomes,
 * percentiles from merged histograms, groupBy and filters, the bounds (400),
 * another tenant's id (404), and a sub-account seeing only its own.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { AGENCY_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'
import { writeRequestLog } from '@scoped/shared/request-log-store'
import { LATENCY_BUCKETS, latencyBucket, latencyBucketBound } from '@scoped/shared/usage'
import { writeUsageBatch } from '@scoped/shared/usage-store'
import type { UsageRow } from '@scoped/shared/usage-store'
import { MAX_REPORT_POINTS } from '@scoped/agency-service/usage/usage-report'
import { TenantStore } from '@scoped/agency-service/tenants'
import { subAccountTenant, tenantClient } from '../helpers/signed-request.js'
import { startAgencyService } from './fixture.js'

const HOUR = 3_600_000
/** The service's clock is the real one (signatures are checked against it), held still for the test. */
const NOW = Date.now()

function histogram(ms: number, count: number): number[] {
  const counts = new Array<number>(LATENCY_BUCKETS).fill(0)
  counts[latencyBucket(ms)] = count
  return counts
}

interface Point {
  at: string
  requests: number
  outcomes: Record<string, number>
  statusClasses: Record<string, number>
  latencyMs: Record<string, number | null>
}
interface Report {
  series: Array<{ group: string | null; points: Point[] }>
}

t.test('usage through the API: buckets, sums, percentiles, groups, filters, bounds and tenants', async (t) => {
  const service = await startAgencyService(t, { now: () => new Date(NOW) })
  const tenants = new TenantStore(service.db.pool)
  const west = await tenants.createSubAccount(service.acme.tenant.agencyId, 'West')
  const westKey = await service.keys.create({ scope: 'SUB-ACCOUNT', subAccountId: west.id }, 'west key', 'test')
  const otherKey = await service.keys.create({ scope: 'SUB-ACCOUNT', subAccountId: west.id }, 'other key', 'test')
  const agencyId = service.acme.tenant.agencyId
  const hour = NOW - (NOW % HOUR) - 2 * HOUR
  const row = (keyId: string, outcome: string, statusClass: number, requests: number, ms: number): UsageRow => ({
    bucket: hour,
    keyId,
    agencyId,
    subAccountId: west.id,
    route: '/v1/agents',
    outcome,
    statusClass,
    requests,
    latency: histogram(ms, requests),
  })
  const rows = [
    row(westKey.id, 'served', 2, 90, 2),
    row(westKey.id, 'served', 5, 5, 400),
    row(westKey.id, 'rate-limited', 4, 5, 0.2),
    row(otherKey.id, 'served', 2, 10, 2),
  ]
  await writeUsageBatch(service.db.pool, { replicaId: 'test', seq: 1, minutes: [], hours: rows, days: [] })

  const report = async (path: string, client = service.acme): Promise<Report> => {
    const response = await client.get(path)
    t.equal(response.status, 200, `${path}: ${response.text}`)
    return (JSON.parse(response.text) as { data: Report }).data
  }
  const whole = await report('/v1/agency/usage')
  t.equal(whole.series.length, 1)
  t.equal(whole.series[0]!.group, null)
  const points = whole.series[0]!.points
  t.equal(points.length, 25, 'the last 24 h by the hour: every bucket the range touches, zeros included')
  const busy = points.find((point) => point.at === new Date(hour).toISOString())!
  t.equal(busy.requests, 110)
  t.same(busy.outcomes, {
    served: 105,
    revoked: 0,
    expired: 0,
    'address-refused': 0,
    'scope-refused': 0,
    'permission-refused': 0,
    'rate-limited': 5,
    'bad-request': 0,
    timeout: 0,
  })
  t.same(busy.statusClasses, { '2xx': 100, '3xx': 0, '4xx': 5, '5xx': 5 })
  t.same(
    busy.latencyMs,
    { p50: latencyBucketBound(latencyBucket(2)), p95: latencyBucketBound(latencyBucket(2)), p99: latencyBucketBound(latencyBucket(400)) },
    'p95 is the 105th of 110: still 2 ms',
  )
  t.equal(points.filter((point) => point.requests === 0).length, 24)
  t.same(points[0]!.latencyMs, { p50: null, p95: null, p99: null })

  const byKey = await report('/v1/agency/usage?groupBy=key')
  t.same(
    byKey.series.map((series) => series.group),
    [westKey.id, otherKey.id],
    'one series per key, busiest first',
  )
  const oneKey = await report(
    `/v1/agency/usage?keyId=${otherKey.id}&granularity=hour&from=${new Date(hour).toISOString()}&to=${new Date(hour + HOUR).toISOString()}`,
  )
  t.equal(oneKey.series[0]!.points.length, 1)
  t.equal(oneKey.series[0]!.points[0]!.requests, 10)

  const west_ = tenantClient(service.baseUrl, service.secret, subAccountTenant(agencyId, west.id), AGENCY_SERVICE_AUDIENCE)
  const own = await report('/v1/usage?groupBy=outcome', west_)
  t.same(own.series.map((series) => series.group).sort(), ['rate-limited', 'served'])

  for (const [path, status] of [
    ['/v1/agency/usage?granularity=minute&from=2026-11-20T00:00:00Z&to=2026-11-22T00:00:00Z', 400],
    ['/v1/agency/usage?granularity=day&from=2025-01-01T00:00:00Z&to=2026-11-22T00:00:00Z', 400],
    ['/v1/agency/usage?granularity=hour&from=2026-01-01T00:00:00Z&to=2026-11-22T00:00:00Z', 400],
    ['/v1/agency/usage?granularity=week', 400],
    ['/v1/agency/usage?from=2026-11-22T00:00:00Z&to=2026-11-21T00:00:00Z', 400],
    ['/v1/agency/usage?groupBy=colour', 400],
    ['/v1/agency/usage?keyId=nope', 400],
    [`/v1/agency/usage?subAccountId=${west.id}`, 200],
  ] as const) {
    t.equal((await service.acme.get(path)).status, status, path)
  }
  t.equal((await service.globex.get(`/v1/agency/usage?keyId=${westKey.id}`)).status, 404, "another agency's key: 404")
  t.equal((await service.globex.get(`/v1/agency/usage?subAccountId=${west.id}`)).status, 404, "another agency's sub-account: 404")
  t.equal((await west_.get(`/v1/usage?subAccountId=${west.id}`)).status, 400, 'a sub-account names no sub-account')
  t.equal((await west_.get('/v1/usage?groupBy=sub-account')).status, 400)
  t.equal((await service.acme.get('/v1/usage')).status, 403, 'an agency key on the sub-account route')
  const globexView = await report('/v1/agency/usage', service.globex)
  t.equal(
    globexView.series[0]!.points.reduce((sum, point) => sum + point.requests, 0),
    0,
    "another agency sees none of this agency's usage",
  )
})

t.test('the request log through the API: newest first, paged, filtered, a tenant sees its own only', async (t) => {
  const service = await startAgencyService(t, { now: () => new Date(NOW) })
  const tenants = new TenantStore(service.db.pool)
  const agencyId = service.acme.tenant.agencyId
  const west = await tenants.createSubAccount(agencyId, 'West')
  const east = await tenants.createSubAccount(agencyId, 'East')
  const key = (subAccountId: string, i: number) => ({
    at: NOW - 60_000 + i,
    requestId: `r${i}`,
    agencyId,
    keyId: `00000000-0000-4000-8000-00000000000${subAccountId === west.id ? 1 : 2}`,
    subAccountId,
    method: 'GET',
    path: '/v1/agents',
    status: i % 2 === 0 ? 401 : 503,
    outcome: i % 2 === 0 ? 'expired' : 'served',
    durationMs: 1.5,
    clientAddress: '192.0.2.1',
  })
  const rows = [...Array.from({ length: 5 }, (_, i) => key(west.id, i)), ...Array.from({ length: 3 }, (_, i) => key(east.id, 10 + i))]
  await writeUsageBatch(service.db.pool, {
    replicaId: 'log',
    seq: 1,
    minutes: [],
    hours: [],
    days: [],
    alsoWrite: (client) => writeRequestLog(client, rows, 1000),
  })
  const first = await service.acme.get('/v1/agency/request-log?limit=3')
  t.equal(first.status, 200, first.text)
  t.same(
    first.items.map((item) => item['requestId']),
    ['r12', 'r11', 'r10'],
  )
  t.equal(first.json.pagination?.hasMore, true)
  const second = await service.acme.get(`/v1/agency/request-log?limit=3&cursor=${first.json.pagination!.nextCursor!}`)
  t.same(
    second.items.map((item) => item['requestId']),
    ['r4', 'r3', 'r2'],
  )
  const westOnly = await service.acme.get(`/v1/agency/request-log?subAccountId=${west.id}&outcome=expired`)
  t.same(
    westOnly.items.map((item) => item['requestId']),
    ['r4', 'r2', 'r0'],
  )
  t.same(Object.keys(westOnly.items[0]!).sort(), [
    'at',
    'clientAddress',
    'durationMs',
    'id',
    'keyId',
    'method',
    'outcome',
    'path',
    'requestId',
    'status',
    'subAccountId',
  ])
  const eastClient = tenantClient(service.baseUrl, service.secret, subAccountTenant(agencyId, east.id), AGENCY_SERVICE_AUDIENCE)
  const own = await eastClient.get('/v1/request-log')
  t.same(
    own.items.map((item) => item['requestId']),
    ['r12', 'r11', 'r10'],
    'a sub-account sees its own requests only',
  )
  t.equal((await service.globex.get('/v1/agency/request-log')).items.length, 0, 'another agency sees none')
  t.equal((await service.acme.get('/v1/agency/request-log?outcome=nope')).status, 400)
})

t.test('a report past the bound of its points is refused with 400, in the envelope, before it is built', async (t) => {
  const service = await startAgencyService(t, { now: () => new Date(NOW) })
  const agencyId = service.acme.tenant.agencyId
  const minute = NOW - (NOW % 60_000) - 60 * 60_000
  // One minute row for each of enough keys that, by key and by the minute over 24 h, the series × buckets pass the bound.
  const keys = Math.ceil(MAX_REPORT_POINTS / 1_441) + 1
  const minutes: UsageRow[] = Array.from({ length: keys }, () => ({
    bucket: minute,
    keyId: randomUUID(),
    agencyId,
    subAccountId: null,
    route: '/v1/agency',
    outcome: 'served',
    statusClass: 2,
    requests: 1,
    latency: [1],
  }))
  await writeUsageBatch(service.db.pool, { replicaId: 'bound', seq: 1, minutes })
  const from = new Date(NOW - 86_400_000).toISOString()
  const refused = await service.acme.get(`/v1/agency/usage?groupBy=key&granularity=minute&from=${from}`)
  t.equal(refused.status, 400, refused.text)
  t.same(JSON.parse(refused.text), {
    success: false,
    message: 'This usage report would be too large: ask for a shorter range or a coarser granularity, or filter by key or sub-account',
  })
  const coarser = await service.acme.get(`/v1/agency/usage?groupBy=key&granularity=hour&from=${from}`)
  t.equal(coarser.status, 200, 'the same by the hour is answered')
  t.equal((JSON.parse(coarser.text) as { data: Report }).data.series.length, keys, 'one series per key')
})
