/**
 * Usage counting in the gateway (issue 31), in-process against the real
 * Postgres: the latency histogram's buckets and quantiles, counts written as
 * minute, hour and day rows, a batch applied once however often it is sent,
 * counts held while Postgres is cut and written when it is back, the memory
 * bound said in a metric, and the request log's rows (refusals and 5xx only
 * by default, never the query).
 */
import { randomUUID } from 'node:crypto'
import { createServer } from 'node:net'
import type { AddressInfo, Socket } from 'node:net'
import t from 'tap'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { createPool } from '@scoped/shared/db'
import type { Pool } from '@scoped/shared/db'
import { createLogger } from '@scoped/shared/logger'
import { LATENCY_BUCKETS, latencyBucket, latencyBucketBound, latencyQuantile } from '@scoped/shared/usage'
import { rollUpUsage, writeUsageBatch } from '@scoped/shared/usage-store'
import { GatewayMetrics } from '@scoped/gateway/metrics'
import type { Verification } from '@scoped/gateway/key-verifier'
import { KeyDecision, KeyRefusal } from '@scoped/gateway/request-state'
import { parseRouteMap } from '@scoped/gateway/route-map'
import type { ScopedRoute } from '@scoped/gateway/route-map'
import { DEFAULT_USAGE_OPTIONS, UsageRecorder } from '@scoped/gateway/usage/usage-recorder'
import type { UsageOptions } from '@scoped/gateway/usage/usage-recorder'
import { createTestDatabase } from '../helpers/database.js'
import { cuttableProxy } from '../helpers/cuttable-proxy.js'
import { waitFor } from '../helpers/wait-for.js'

const routes = parseRouteMap(
  'routes:\n  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }\n  - { prefix: /v1/agency, scope: AGENCY, upstream: "http://127.0.0.1:1" }\n',
  'x',
)
const log = createLogger('test', 'silent')

t.test('latency buckets are √2 apart from 0.5 ms, and a quantile is the bound of the bucket that holds it', async (t) => {
  const rows: Array<[number, number]> = [
    [0, 0],
    [0.5, 0],
    [0.51, 1],
    [0.707, 1],
    [0.708, 2],
    [1, 2],
    [1000, 22],
    [1e9, LATENCY_BUCKETS - 1],
    [Number.NaN, 0],
  ]
  for (const [ms, bucket] of rows) t.equal(latencyBucket(ms), bucket, `${ms} ms`)
  for (let i = 1; i < LATENCY_BUCKETS - 1; i++) {
    t.equal(latencyBucket(latencyBucketBound(i) * 0.999), i, `just under the bound of ${i} is in ${i}`)
    t.equal(latencyBucket(latencyBucketBound(i) * 1.001), i + 1, `just over the bound of ${i} is in ${i + 1}`)
  }
  const histogram = new Array<number>(LATENCY_BUCKETS).fill(0)
  histogram[2] = 50
  histogram[10] = 45
  histogram[20] = 5
  t.equal(latencyQuantile(histogram, 0.5), latencyBucketBound(2))
  t.equal(latencyQuantile(histogram, 0.95), latencyBucketBound(10))
  t.equal(latencyQuantile(histogram, 0.99), latencyBucketBound(20))
  t.equal(latencyQuantile(new Array<number>(LATENCY_BUCKETS).fill(0), 0.5), null, 'nothing counted: no latency')
})

interface Key {
  keyId: string
  agencyId: string
  subAccountId: string
}

function newKey(): Key {
  return { keyId: randomUUID(), agencyId: randomUUID(), subAccountId: randomUUID() }
}

/** A request of `key` that ended as `outcome` with `status`, as the onResponse hook sees it. */
function answered(
  key: Key,
  outcome: 'forwarded' | 'expired' | 'upstream-error' | 'unavailable',
  status: number,
  path = '/v1/agents/1',
): [FastifyRequest, FastifyReply] {
  const state = { status: 'active' as const, tenant: { scope: 'SUB-ACCOUNT' as const, ...key } }
  const target = { path, query: 'secret=1' }
  const decision =
    outcome === 'expired'
      ? new KeyRefusal('192.0.2.7', target, routes.routes[0] as ScopedRoute, 'hash', state, 'expired')
      : new KeyDecision('192.0.2.7', target, routes.routes[0] as ScopedRoute, 'hash', state, 0)
  decision.outcome = outcome
  const request = { gateway: decision, id: `req-${randomUUID()}`, method: 'GET', raw: { url: `${path}?secret=1` } } as unknown as FastifyRequest
  return [request, { statusCode: status, elapsedTime: 3 } as FastifyReply]
}

function recorder(pool: Pool, options: Partial<UsageOptions> = {}): { usage: UsageRecorder; metrics: GatewayMetrics } {
  const metrics = new GatewayMetrics(routes)
  const usage = new UsageRecorder(pool, log, metrics, routes.routes, `test-${randomUUID()}`, { ...DEFAULT_USAGE_OPTIONS, ...options })
  return { usage, metrics }
}

async function totals(pool: Pool, table: string, keyId: string): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ outcome: string; requests: string }>(
    `SELECT outcome || ' ' || status_class || ' ' || route AS outcome, sum(requests)::text AS requests FROM ${table} WHERE key_id = $1 GROUP BY 1`,
    [keyId],
  )
  return Object.fromEntries(rows.map((row) => [row.outcome, Number(row.requests)]))
}

/** The hours and days from now to the end of today rolled up (migration 026), early, as a test may: the hour and day rows then hold every count. */
async function rolledUp(pool: Pool): Promise<void> {
  await rollUpUsage(pool, new Date(Math.ceil((Date.now() + 1) / 86_400_000) * 86_400_000), 48)
}

t.test('counts are written as minute, hour and day rows that agree', async (t) => {
  const db = await createTestDatabase(t)
  const { usage } = recorder(db.pool)
  const key = newKey()
  for (let i = 0; i < 7; i++) usage.record(...answered(key, 'forwarded', 200))
  for (let i = 0; i < 2; i++) usage.record(...answered(key, 'expired', 401))
  usage.record(...answered(key, 'upstream-error', 502))
  await usage.flush()
  const expected = { 'served 2 /v1/agents': 7, 'expired 4 /v1/agents': 2, 'served 5 /v1/agents': 1 }
  await rolledUp(db.pool)
  for (const table of ['usage_minutes', 'usage_hours', 'usage_days']) t.same(await totals(db.pool, table, key.keyId), expected, table)
  const { rows } = await db.pool.query<{ latency: string[] }>(
    `SELECT latency FROM usage_minutes WHERE key_id = $1 AND outcome = 'served' AND status_class = 2`,
    [key.keyId],
  )
  t.equal(Number(rows[0]!.latency[latencyBucket(3)]), 7, 'the latency histogram holds every answer')
  t.equal(usage.pending(), 0)
})

t.test('an answer that authentication is unavailable is never counted, even for a key the gate had found', async (t) => {
  const db = await createTestDatabase(t)
  const { usage } = recorder(db.pool)
  const key = newKey()
  // The forwarder's re-check of a key the gate passed could not reach the stores: 503, as at the gate, where no key is known.
  usage.record(...answered(key, 'unavailable', 503))
  t.equal(usage.pending(), 0, 'nothing counted')
  usage.record(...answered(key, 'forwarded', 200))
  await usage.flush()
  t.same(await totals(db.pool, 'usage_minutes', key.keyId), { 'served 2 /v1/agents': 1 })
  const { rows } = await db.pool.query('SELECT 1 FROM request_log WHERE key_id = $1', [key.keyId])
  t.equal(rows.length, 0, 'nor logged')
})

t.test('a batch is applied once, however often it is sent', async (t) => {
  const db = await createTestDatabase(t)
  const key = newKey()
  const row = { bucket: Date.now() - (Date.now() % 60_000), ...key, route: '/v1/agents', outcome: 'served', statusClass: 2, requests: 5, latency: [0, 5] }
  const batch = { replicaId: 'replica-a', seq: 1, minutes: [row] }
  t.equal(await writeUsageBatch(db.pool, batch), 'applied')
  t.equal(await writeUsageBatch(db.pool, batch), 'duplicate', 'the same replica and sequence again: nothing added')
  t.equal(await writeUsageBatch(db.pool, { ...batch, replicaId: 'replica-b' }), 'applied', 'another replica adds to the same rows')
  await rolledUp(db.pool)
  for (const table of ['usage_minutes', 'usage_hours', 'usage_days']) t.same(await totals(db.pool, table, key.keyId), { 'served 2 /v1/agents': 10 }, table)
})

t.test('counts are held while Postgres is cut and written exactly once when it is back', async (t) => {
  const db = await createTestDatabase(t)
  const proxy = await cuttableProxy(t, db.url)
  const pool = createPool(proxy.url, { max: 2 })
  // A client cut while checked out says so on its own emitter as well as in its query's rejection.
  pool.on('connect', (client) => client.on('error', () => undefined))
  t.teardown(() => pool.end())
  const { usage, metrics } = recorder(pool)
  const key = newKey()
  usage.record(...answered(key, 'forwarded', 200))
  await usage.flush()
  await proxy.cut()
  for (let i = 0; i < 5; i++) usage.record(...answered(key, 'forwarded', 200))
  await usage.flush()
  t.equal(usage.pending(), 5, 'the batch is held in memory')
  for (let i = 0; i < 3; i++) usage.record(...answered(key, 'forwarded', 200))
  await usage.flush()
  t.equal(usage.pending(), 8, 'more counted meanwhile, beside the batch in flight')
  await proxy.restore()
  await waitFor(async () => {
    await usage.flush()
    return usage.pending() < 8
  }, 'a flush that reaches Postgres')
  t.equal(usage.pending(), 0, 'that one flush wrote the held batch and what was counted since: nothing waits for another interval')
  t.same(await totals(db.pool, 'usage_minutes', key.keyId), { 'served 2 /v1/agents': 9 })
  t.match(await metrics.text(), /gateway_usage_flushes_total\{result="error"\} [1-9]/)
})

t.test('a replica stopping while Postgres hangs gives up within its stop deadline: its counts dropped, counted and said', async (t) => {
  // A Postgres that accepts connections and never answers (a network that drops packets, say).
  const sockets = new Set<Socket>()
  const hanging = createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => undefined)
  })
  await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve))
  const pool = createPool(`postgres://postgres@127.0.0.1:${(hanging.address() as AddressInfo).port}/nowhere`, { max: 2 })
  t.teardown(() => pool.end().catch(() => undefined))
  // Last in, first out: the connections are cut before the pool ends, so it need not wait for them.
  t.teardown(() => {
    for (const socket of sockets) socket.destroy()
    hanging.close()
  })
  const { usage, metrics } = recorder(pool)
  usage.record(...answered(newKey(), 'forwarded', 200))
  let stopped = false
  void usage.stop(200).then(() => (stopped = true))
  // Far less than a write's own deadline, or the pool's wait for a connection: the stop's deadline bounds the write too.
  await waitFor(() => stopped, 'the stop giving up', 2_500)
  t.match(await metrics.text(), /gateway_usage_dropped_total\{kind="counts"\} 1/)
})

t.test('past the memory bound counts are dropped, counted in a metric and said', async (t) => {
  const db = await createTestDatabase(t)
  const { usage, metrics } = recorder(db.pool, { maxCells: 2 })
  for (let i = 0; i < 4; i++) usage.record(...answered(newKey(), 'forwarded', 200))
  await usage.flush()
  t.match(await metrics.text(), /gateway_usage_dropped_total\{kind="counts"\} 2/)
})

t.test('the request log keeps refusals and 5xx answers by default, every request with `all`, none with `off`; never the query', async (t) => {
  const db = await createTestDatabase(t)
  for (const [mode, expected] of [
    ['errors', 2],
    ['all', 3],
    ['off', 0],
  ] as const) {
    const { usage } = recorder(db.pool, { requestLog: { ...DEFAULT_USAGE_OPTIONS.requestLog, mode } })
    const key = newKey()
    usage.record(...answered(key, 'forwarded', 200))
    usage.record(...answered(key, 'expired', 401))
    usage.record(...answered(key, 'upstream-error', 502))
    await usage.flush()
    const { rows } = await db.pool.query<{ path: string; outcome: string; client_address: string }>(
      'SELECT path, outcome, client_address FROM request_log WHERE key_id = $1',
      [key.keyId],
    )
    t.equal(rows.length, expected, mode)
    for (const row of rows) {
      t.equal(row.path, '/v1/agents/1', 'the path without its query')
      t.equal(row.client_address, '192.0.2.7')
    }
  }
})

/** A refusal of `key` by the gate's decision on `state` (what the key cache held), as the onResponse hook sees it. */
function refused(state: Verification, outcome: 'revoked' | 'deleted'): [FastifyRequest, FastifyReply] {
  const decision = new KeyRefusal('192.0.2.7', { path: '/v1/agents/1', query: '' }, routes.routes[0] as ScopedRoute, 'hash', state, outcome)
  decision.outcome = outcome
  const request = { gateway: decision, id: `req-${randomUUID()}`, method: 'GET', raw: { url: '/v1/agents/1' } } as unknown as FastifyRequest
  return [request, { statusCode: 401, elapsedTime: 1 } as FastifyReply]
}

t.test("a revoked key's requests are counted and logged for its owner; a deleted key's for no one", async (t) => {
  const db = await createTestDatabase(t)
  const { usage, metrics } = recorder(db.pool)
  const key = newKey()
  const owner = { scope: 'SUB-ACCOUNT' as const, ...key }
  for (let i = 0; i < 3; i++) usage.record(...refused({ status: 'revoked', tenant: owner }, 'revoked'))
  // Active when the gate passed it, revoked while its body arrived: the forwarder's second check refused it.
  const [inFlight, inFlightReply] = answered(key, 'forwarded', 401)
  inFlight.gateway!.outcome = 'revoked'
  usage.record(inFlight, inFlightReply)
  // Deleted: refused by the gate (no owner held), or by the forwarder's second check (its owner was known then).
  usage.record(...refused({ status: 'deleted' }, 'deleted'))
  const [deletedInFlight, deletedReply] = answered(key, 'forwarded', 401)
  deletedInFlight.gateway!.outcome = 'deleted'
  usage.record(deletedInFlight, deletedReply)
  await usage.flush()
  await rolledUp(db.pool)
  for (const table of ['usage_minutes', 'usage_hours', 'usage_days']) {
    t.same(await totals(db.pool, table, key.keyId), { 'revoked 4 /v1/agents': 4 }, `${table}: the revoked refusals, none of the deleted`)
  }
  const { rows } = await db.pool.query<{ outcome: string; status: number; agency_id: string; sub_account_id: string }>(
    'SELECT outcome, status, agency_id, sub_account_id FROM request_log WHERE key_id = $1',
    [key.keyId],
  )
  t.equal(rows.length, 4, 'each revoked refusal is in the request log, the deleted ones are not')
  for (const row of rows) t.same(row, { outcome: 'revoked', status: 401, agency_id: key.agencyId, sub_account_id: key.subAccountId })
  t.notMatch(
    await metrics.text(),
    /gateway_usage_dropped_total\{kind="counts"\} [1-9]/,
    'a deleted key’s requests are not counts lost: there is no one to count them for',
  )

  // Revoked, its owner unknown to this replica (Postgres away when it asked): refused, and the lost count said.
  usage.record(...refused({ status: 'revoked' }, 'revoked'))
  t.equal(usage.pending(), 0, 'not counted for anyone')
  t.match(await metrics.text(), /gateway_usage_dropped_total\{kind="counts"\} 1/, 'but counted as dropped')
})

t.test('USAGE=off: nothing counted, nothing logged, nothing written', async (t) => {
  const db = await createTestDatabase(t)
  const { usage } = recorder(db.pool, { counting: false, requestLog: { ...DEFAULT_USAGE_OPTIONS.requestLog, mode: 'off' } })
  const key = newKey()
  usage.record(...answered(key, 'forwarded', 200))
  usage.record(...answered(key, 'expired', 401))
  t.equal(usage.pending(), 0)
  await usage.flush()
  t.same(await totals(db.pool, 'usage_minutes', key.keyId), {})
})

t.test('the request log keeps each agency to its newest rows', async (t) => {
  const db = await createTestDatabase(t)
  const { usage } = recorder(db.pool, { requestLog: { ...DEFAULT_USAGE_OPTIONS.requestLog, capPerAgency: 100 } })
  const key = newKey()
  const other = newKey()
  for (let i = 0; i < 150; i++) usage.record(...answered(key, 'expired', 401, `/v1/agents/${i}`))
  usage.record(...answered(other, 'expired', 401))
  await usage.flush()
  const { rows } = await db.pool.query<{ agency_id: string; n: number; oldest: string }>(
    `SELECT agency_id, count(*)::int AS n, min(substring(path from 12)::int)::text AS oldest FROM request_log GROUP BY agency_id`,
  )
  const byAgency = new Map(rows.map((row) => [row.agency_id, row]))
  t.equal(byAgency.get(key.agencyId)?.n, 100, 'the flooding agency is cut to its cap')
  t.equal(byAgency.get(other.agencyId)?.n, 1, 'another agency keeps its rows')
})

t.test('replicas roll up the hours that are over, one at a time; a replica that stops gives up its rollup, undone', async (t) => {
  const db = await createTestDatabase(t)
  const hour = 3_600_000
  const thisHour = Math.floor(Date.now() / hour) * hour
  await db.pool.query('UPDATE usage_rollup SET rolled_until = $1', [new Date(thisHour - 3 * hour).toISOString()])
  const key = newKey()
  const minutes = [3, 2, 1, 0].map((ago, i) => ({
    bucket: thisHour - ago * hour + 60_000,
    ...key,
    route: '/v1/agents',
    outcome: 'served',
    statusClass: 2,
    requests: 10 + i,
    latency: [1],
  }))
  t.equal(await writeUsageBatch(db.pool, { replicaId: 'r', seq: 1, minutes }), 'applied')
  const rolled = async (): Promise<number> => (await db.pool.query<{ at: Date }>('SELECT rolled_until AS at FROM usage_rollup')).rows[0]!.at.getTime()

  // A replica whose rollup is held up (another session holds the lock of the hour it rolls) and is stopped meanwhile.
  const held = await db.pool.connect()
  t.teardown(() => held.release())
  await held.query('SELECT pg_advisory_lock(31027, $1)', [Math.floor((thisHour - 3 * hour) / hour)])
  const stopping = recorder(db.pool).usage
  const rollingUp = stopping.rollUp(thisHour + 30 * 60_000)
  await waitFor(
    async () =>
      (await db.pool.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%usage_roll_up%'"))
        .rowCount === 1,
    'the rollup waiting for the lock',
  )
  await stopping.stop(1_000)
  t.equal(await rollingUp, 0, 'the stopped replica rolled nothing')
  await held.query('SELECT pg_advisory_unlock(31027, $1)', [Math.floor((thisHour - 3 * hour) / hour)])
  await waitFor(
    async () =>
      (await db.pool.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%usage_roll_up%' AND pid <> pg_backend_pid()"))
        .rowCount === 0,
    'its connection gone',
  )
  t.equal(await rolled(), thisHour - 3 * hour, 'and its transaction is undone')

  const [a, b] = [recorder(db.pool), recorder(db.pool)]
  const done = await Promise.all([a.usage.rollUp(thisHour + 30 * 60_000), b.usage.rollUp(thisHour + 30 * 60_000)])
  t.equal(done[0] + done[1], 3, `the three hours over a minute ago are rolled up once between two replicas (${done.join(' + ')})`)
  const rolledMetric = async (replica: { metrics: GatewayMetrics }): Promise<number> =>
    Number(/gateway_usage_rollups_total\{result="rolled"\} (\d+)/.exec(await replica.metrics.text())?.[1] ?? 0)
  t.equal((await rolledMetric(a)) + (await rolledMetric(b)), 3, 'each replica counts the hours it rolled')
  t.equal(await rolled(), thisHour, 'not the hour under way')
  t.same(await totals(db.pool, 'usage_hours', key.keyId), { 'served 2 /v1/agents': 10 + 11 + 12 }, 'the hour rows hold the minutes of the hours rolled')
  t.equal(await a.usage.rollUp(thisHour + 30 * 60_000), 0, 'nothing more to roll')
})

t.test('a rollup that cannot reach Postgres is counted as failed, said, and left for the next turn', async (t) => {
  const unreachable = createPool('postgres://postgres@127.0.0.1:1/none', { max: 1, applicationName: 'scoped-api-test' })
  t.teardown(() => unreachable.end())
  const { usage, metrics } = recorder(unreachable)
  t.equal(await usage.rollUp(), 0, 'nothing rolled, nothing thrown')
  t.match(await metrics.text(), /gateway_usage_rollups_total\{result="error"\} 1/, 'the failed turn counted')
  t.equal(await usage.rollUp(), 0, 'and the next turn tries again')
  t.match(await metrics.text(), /gateway_usage_rollups_total\{result="error"\} 2/)
})
