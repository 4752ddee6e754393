/**
 * The console's Usage page (issue 31), in-process with counts and request-log
 * rows written as a gateway writes them: the charts (SVG, classes only) with a
 * table beside each, the busiest keys, each sub-account, the request log and
 * its filters; the Usage tab; who may read it; another tenant's ids 404.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { writeRequestLog } from '@scoped/shared/request-log-store'
import type { RequestLogRow } from '@scoped/shared/request-log-store'
import { LATENCY_BUCKETS, latencyBucket } from '@scoped/shared/usage'
import { writeUsageBatch } from '@scoped/shared/usage-store'
import type { UsageRow } from '@scoped/shared/usage-store'
import { MAX_REPORT_POINTS } from '@scoped/agency-service/usage/usage-report'
import { TenantStore } from '@scoped/agency-service/tenants'
import { createWorld, signedIn, startConsole } from './console-harness.js'

const HOUR = 3_600_000

function histogram(ms: number, count: number): number[] {
  const counts = new Array<number>(LATENCY_BUCKETS).fill(0)
  counts[latencyBucket(ms)] = count
  return counts
}

t.test('the Usage page of an agency and of a sub-account', async (t) => {
  const { app, pool, keys, clock } = await startConsole(t)
  const world = await createWorld(pool)
  const westKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: world.subAccountId }, 'west busy key', 'test')
  const eastKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: world.otherSubAccountId }, 'east quiet key', 'test')
  const other = await createWorld(pool, 'Globex')
  const otherKey = await keys.create({ scope: 'AGENCY', agencyId: other.agencyId }, 'globex key', 'test')
  const now = clock.now().getTime()
  const hour = now - (now % HOUR) - 2 * HOUR
  const row = (keyId: string, subAccountId: string, agencyId: string, outcome: string, statusClass: number, requests: number): UsageRow => ({
    bucket: hour,
    keyId,
    agencyId,
    subAccountId,
    route: '/v1/agents',
    outcome,
    statusClass,
    requests,
    latency: histogram(outcome === 'served' ? 3 : 0.3, requests),
  })
  const logRow = (requestId: string, keyId: string, subAccountId: string | null, agencyId: string, outcome: string, status: number): RequestLogRow => ({
    at: hour + 60_000,
    requestId,
    agencyId,
    keyId,
    subAccountId,
    method: 'GET',
    path: '/v1/agents/1',
    status,
    outcome,
    durationMs: 1.5,
    clientAddress: '192.0.2.7',
  })
  await writeUsageBatch(pool, {
    replicaId: 'console-test',
    seq: 1,
    minutes: [
      row(westKey.id, world.subAccountId, world.agencyId, 'served', 2, 90),
      row(westKey.id, world.subAccountId, world.agencyId, 'rate-limited', 4, 7),
      row(eastKey.id, world.otherSubAccountId, world.agencyId, 'served', 2, 4),
      row(otherKey.id, other.subAccountId, other.agencyId, 'served', 2, 1000),
    ],
    alsoWrite: (client) =>
      writeRequestLog(
        client,
        [
          logRow('req-west-limited', westKey.id, world.subAccountId, world.agencyId, 'rate-limited', 429),
          logRow('req-west-5xx', westKey.id, world.subAccountId, world.agencyId, 'served', 502),
          logRow('req-east-expired', eastKey.id, world.otherSubAccountId, world.agencyId, 'expired', 401),
          logRow('req-globex', otherKey.id, null, other.agencyId, 'expired', 401),
        ],
        1000,
      ),
  })
  const usagePath = `/console/agencies/${world.agencyId}/usage`

  await t.test('an owner sees the agency: charts with tables, busiest keys, each sub-account, the log', async (t) => {
    const owner = await signedIn(app, world.owner.email)
    const keysPage = await owner.get(`/console/agencies/${world.agencyId}/keys`)
    t.match(keysPage.body, `href="${usagePath}">Usage</a>`, 'a Usage tab beside the keys and the audit trail')
    const page = await owner.get(usagePath)
    t.equal(page.statusCode, 200, page.body)
    const body = page.body
    t.match(body, /<svg class="chart"[^>]*role="img" aria-labelledby="requests-heading"/, 'the requests chart, named by its heading')
    t.match(body, /<rect class="chart-outcome-served"/)
    t.match(body, /<rect class="chart-outcome-rate-limited"/)
    t.match(body, /aria-labelledby="latency-heading"/, 'the latency chart')
    t.match(body, />Time \(UTC\)</, 'a labelled time axis')
    t.match(body, />Requests</, 'a labelled count axis')
    t.match(body, /<table class="stacking">/, 'tables that stack on a narrow screen')
    t.match(body, /<td data-label="Requests">101<\/td>/, 'the busy hour: 90 + 7 + 4 requests')
    t.match(body, /<td data-label="Rate limited">7<\/td>/)
    t.notMatch(body, /style=|<script>|<style>/, 'nothing inline')
    const busiest = body.slice(body.indexOf('busiest-heading'), body.indexOf('sub-accounts-heading'))
    t.ok(busiest.indexOf('west busy key') < busiest.indexOf('east quiet key') && busiest.includes('east quiet key'), 'the busiest key first')
    t.notMatch(body, 'globex key', 'nothing of another agency')
    t.match(body, `href="/console/sub-accounts/${world.subAccountId}/usage">Acme West</a>`, 'each sub-account, linked to its page')
    for (const id of ['req-west-limited', 'req-west-5xx', 'req-east-expired']) t.match(body, id)
    t.notMatch(body, 'req-globex')

    const limited = (await owner.get(`${usagePath}?range=24h&outcome=rate-limited`)).body
    t.match(limited, 'req-west-limited')
    t.notMatch(limited, 'req-west-5xx', 'the outcome filter')
    const east = (await owner.get(`${usagePath}?key=${eastKey.id}`)).body
    t.match(east, 'req-east-expired')
    t.notMatch(east, 'req-west-limited', 'the key filter')
    t.match(east, /<td data-label="Requests">4<\/td>/, 'the charts of that key alone')
    const hourAgo = (await owner.get(`${usagePath}?range=1h`)).body
    t.notMatch(hourAgo, 'req-west-limited', 'the time filter: nothing in the last hour')

    t.equal((await owner.get(`${usagePath}?key=${otherKey.id}`)).statusCode, 404, "another agency's key: not found")
    t.equal((await owner.get(`/console/agencies/${other.agencyId}/usage`)).statusCode, 404, 'another agency: not found')
    t.equal((await owner.get(`${usagePath}?range=year`)).statusCode, 400, 'a range not offered')
    t.equal((await owner.get(`${usagePath}?outcome=fine`)).statusCode, 400, 'an outcome that does not exist')
  })

  await t.test("a sub-account's member sees that sub-account only", async (t) => {
    const member = await signedIn(app, world.member.email)
    const page = await member.get(`/console/sub-accounts/${world.subAccountId}/usage`)
    t.equal(page.statusCode, 200)
    t.match(page.body, 'west busy key')
    t.match(page.body, 'req-west-limited')
    t.notMatch(page.body, 'east quiet key')
    t.notMatch(page.body, 'req-east-expired')
    t.notMatch(page.body, 'sub-accounts-heading', 'no per-sub-account table on a sub-account')
    t.equal((await member.get(`/console/sub-accounts/${world.otherSubAccountId}/usage`)).statusCode, 404, 'another sub-account: not found')
    t.equal((await member.get(`/console/sub-accounts/${other.subAccountId}/usage`)).statusCode, 404, "another agency's sub-account: not found")
    t.equal((await member.get(`/console/sub-accounts/${world.subAccountId}/usage?key=${eastKey.id}`)).statusCode, 404, "a sibling's key: not found")
    t.equal((await member.get(usagePath)).statusCode, 403, "the agency's usage is for its owners and admins")
  })

  await t.test('a sub-account without usage shows empty charts, not an error', async (t) => {
    const quiet = await new TenantStore(pool).createSubAccount(world.agencyId, 'Acme Quiet')
    const owner = await signedIn(app, world.owner.email)
    const page = await owner.get(`/console/sub-accounts/${quiet.id}/usage`)
    t.equal(page.statusCode, 200)
    t.match(page.body, 'No requests in this range.')
    t.match(page.body, 'No logged requests in this range.')
  })
})

t.test("an agency with more keys than a by-key report's bound still sees its busiest keys", async (t) => {
  const { app, pool, keys, clock } = await startConsole(t)
  const world = await createWorld(pool)
  const busy = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: world.subAccountId }, 'the busiest key', 'test')
  const now = clock.now().getTime()
  const minute = now - (now % 60_000) - 2 * HOUR
  // Enough keys that their series by the hour over 7 days (168 or 169 points each) pass a report's bound of points.
  const many = Math.ceil(MAX_REPORT_POINTS / 168) + 1
  const rows: UsageRow[] = Array.from({ length: many }, (_, i) => ({
    bucket: minute,
    keyId: i === 0 ? busy.id : randomUUID(),
    agencyId: world.agencyId,
    subAccountId: world.subAccountId,
    route: '/v1/agents',
    outcome: 'served',
    statusClass: 2,
    requests: i === 0 ? 50 : 1,
    latency: histogram(3, i === 0 ? 50 : 1),
  }))
  await writeUsageBatch(pool, { replicaId: 'console-many', seq: 1, minutes: rows })
  const owner = await signedIn(app, world.owner.email)
  const page = await owner.get(`/console/agencies/${world.agencyId}/usage?range=7d`)
  t.equal(page.statusCode, 200, 'the page, not "too large"')
  const busiest = page.body.slice(page.body.indexOf('busiest-heading'), page.body.indexOf('sub-accounts-heading'))
  t.match(busiest, 'the busiest key', 'the busiest key named first')
  t.equal((busiest.match(/data-label="Requests"/g) ?? []).length, 10, 'ten keys listed')
  t.match(page.body, `>${many + 49}</td>`, 'the sub-account holds every request')
})
