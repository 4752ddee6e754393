/**
 * The usage batch writer at scale (issue 31, "Speed and scale"), against the
 * real Postgres: a flush of thousands of keys is a handful of statements,
 * whatever the number of keys (the minute rows of every kind in one), the
 * hours and days rolled up from them are exact, and so are the sums of rows
 * that come for hours and days already rolled, within one minute and across
 * minutes of one hour and day; a batch held up in Postgres is cancelled there, not left
 * holding its connection. No timing here: the bench (BENCH_ONLY=usage-scale) measures it.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { createPool } from '@scoped/shared/db'
import { createLogger } from '@scoped/shared/logger'
import type { ActiveKeyState } from '@scoped/shared/key-state'
import { rollUpUsage, writeUsageBatch } from '@scoped/shared/usage-store'
import type { UsageRow } from '@scoped/shared/usage-store'
import { GatewayMetrics } from '@scoped/gateway/metrics'
import { KeyDecision } from '@scoped/gateway/request-state'
import { parseRouteMap } from '@scoped/gateway/route-map'
import type { ScopedRoute } from '@scoped/gateway/route-map'
import { DEFAULT_USAGE_OPTIONS, UsageRecorder } from '@scoped/gateway/usage/usage-recorder'
import { createTestDatabase } from '../helpers/database.js'

const routes = parseRouteMap(
  'routes:\n  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }\n  - { prefix: /v1/calls, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }\n',
  'x',
)
const KEYS = 3_000

function served(state: ActiveKeyState, route: number, status: number): [FastifyRequest, FastifyReply] {
  const decision = new KeyDecision('192.0.2.7', { path: '/v1/agents/1', query: '' }, routes.routes[route] as ScopedRoute, 'hash', state, 0)
  decision.outcome = 'forwarded'
  const request = { gateway: decision, id: 'req', method: 'GET', raw: { url: '/v1/agents/1' } } as unknown as FastifyRequest
  return [request, { statusCode: status, elapsedTime: 2 } as FastifyReply]
}

async function sums(pool: ReturnType<typeof createPool>, table: string): Promise<{ rows: number; requests: number }> {
  const { rows } = await pool.query<{ rows: number; requests: string }>(
    `SELECT count(*)::int AS rows, coalesce(sum(requests), 0)::text AS requests FROM ${table}`,
  )
  return { rows: rows[0]!.rows, requests: Number(rows[0]!.requests) }
}

t.test('a flush of thousands of keys is a few statements, and its hour and day rows, rolled up, are the minutes summed', async (t) => {
  const db = await createTestDatabase(t)
  const pool = createPool(db.url, { max: 1 })
  t.teardown(() => pool.end())
  // Where the rollup stands while a replica counts: at the hour under way.
  const thisHour = Math.floor(Date.now() / 3_600_000) * 3_600_000
  await db.pool.query('UPDATE usage_rollup SET rolled_until = $1', [new Date(thisHour).toISOString()])
  const statements: string[] = []
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown
    ;(client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const first = args[0]
      statements.push(typeof first === 'string' ? first : String((first as { text?: string }).text))
      return query(...args)
    }
  })
  const usage = new UsageRecorder(
    pool,
    createLogger('test', 'silent'),
    new GatewayMetrics(routes),
    routes.routes,
    `test-${randomUUID()}`,
    DEFAULT_USAGE_OPTIONS,
  )
  const agencyId = randomUUID()
  let requests = 0
  for (let i = 0; i < KEYS; i++) {
    const state: ActiveKeyState = { status: 'active', tenant: { scope: 'SUB-ACCOUNT', keyId: randomUUID(), agencyId, subAccountId: randomUUID() } }
    usage.record(...served(state, 0, 200))
    usage.record(...served(state, 0, 200))
    usage.record(...served(state, 1, 503))
    requests += 3
  }
  t.equal(usage.pending(), requests, 'every answer is pending')
  await usage.flush()
  t.equal(usage.pending(), 0, 'written')
  const writes = statements.filter((text) => /usage_(minutes|hours|days)/.test(text) && /INSERT/.test(text))
  t.equal(writes.length, 1, `one statement adds to the minute rows of ${KEYS} keys`)
  const batch = statements.slice(0, statements.indexOf('COMMIT') + 1)
  t.ok(batch.length <= 10, `the batch's transaction is a handful of statements: ${batch.length}`)
  const minutes = await sums(pool, 'usage_minutes')
  t.ok(minutes.rows >= 2 * KEYS, `${minutes.rows} minute rows: two cells per key (more when the minute turned while counting)`)
  t.equal(minutes.requests, requests, 'every answer is in the minute rows')
  t.equal((await sums(pool, 'usage_hours')).rows, 0, 'no hour row before its hour is rolled up')
  // The rollup of the hour (and, at the day's end, the day): early here, as a test may.
  const dayEnd = Math.ceil((thisHour + 1) / 86_400_000) * 86_400_000
  t.ok((await rollUpUsage(pool, new Date(dayEnd), 24)) >= 1, 'the hours to the end of the day rolled up')
  t.equal((await sums(pool, 'usage_hours')).requests, requests, 'every answer is in the hour rows')
  t.equal((await sums(pool, 'usage_days')).requests, requests, 'and in the day rows')
})

t.test('minute rows of several minutes, late for their rolled hours and days, are summed to them exactly', async (t) => {
  const db = await createTestDatabase(t)
  const day = Date.UTC(2026, 0, 15)
  const keyId = randomUUID()
  const row = (bucket: number, requests: number, latency: number[]): UsageRow => ({
    bucket,
    keyId,
    agencyId: randomUUID(),
    subAccountId: null,
    route: '/v1/agents',
    outcome: 'served',
    statusClass: 2,
    requests,
    latency,
  })
  // Two minutes of one hour, one of the next hour, one of the next day: and a histogram with trailing zeros.
  const hour = day + 5 * 3_600_000
  const rows = [row(hour + 60_000, 2, [1, 1, 0, 0]), row(hour + 120_000, 3, [0, 0, 3]), row(hour + 3_600_000, 4, [4]), row(day + 86_400_000, 5, [0, 5])]
  const agencyId = rows[0]!.agencyId
  for (const r of rows) r.agencyId = agencyId
  t.equal(await writeUsageBatch(db.pool, { replicaId: 'w', seq: 1, minutes: rows }), 'applied')
  // A second batch adds to the same rows.
  t.equal(
    await writeUsageBatch(db.pool, { replicaId: 'w', seq: 2, minutes: [row(hour + 60_000, 1, [0, 0, 0, 1])].map((r) => ({ ...r, agencyId })) }),
    'applied',
  )
  const read = async (table: string): Promise<Array<[string, number, string]>> =>
    (
      await db.pool.query<{ at: string; requests: string; latency: string }>(
        `SELECT to_char(bucket AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') AS at, requests::text, latency::text FROM ${table} WHERE key_id = $1 ORDER BY bucket`,
        [keyId],
      )
    ).rows.map((r) => [r.at, Number(r.requests), r.latency])
  t.same(await read('usage_minutes'), [
    ['2026-01-15 05:01', 3, '{1,1,0,1}'],
    ['2026-01-15 05:02', 3, '{0,0,3}'],
    ['2026-01-15 06:00', 4, '{4}'],
    ['2026-01-16 00:00', 5, '{0,5}'],
  ])
  t.same(await read('usage_hours'), [
    ['2026-01-15 05:00', 6, '{1,1,3,1}'],
    ['2026-01-15 06:00', 4, '{4}'],
    ['2026-01-16 00:00', 5, '{0,5}'],
  ])
  t.same(await read('usage_days'), [
    ['2026-01-15 00:00', 10, '{5,1,3,1}'],
    ['2026-01-16 00:00', 5, '{0,5}'],
  ])
})

t.test('a batch held up in Postgres past its statement timeout is cancelled there, its connection freed and nothing written', async (t) => {
  const db = await createTestDatabase(t)
  const pool = createPool(db.url, { max: 1 })
  t.teardown(() => pool.end())
  const row: UsageRow = {
    bucket: Date.UTC(2026, 0, 15, 5, 1),
    keyId: randomUUID(),
    agencyId: randomUUID(),
    subAccountId: null,
    route: '/v1/agents',
    outcome: 'served',
    statusClass: 2,
    requests: 1,
    latency: [1],
  }
  // Another session holds the table the batch records itself in, as a stuck or slow Postgres would.
  const blocker = await db.pool.connect()
  await blocker.query('BEGIN')
  await blocker.query('LOCK TABLE usage_batches IN EXCLUSIVE MODE')
  const held = writeUsageBatch(pool, { replicaId: 'w', seq: 1, minutes: [row], statementTimeoutMs: 200 })
  await t.rejects(held, { code: '57014' }, 'Postgres cancels the statement (query_canceled)')
  await blocker.query('ROLLBACK')
  blocker.release()
  t.equal(
    await writeUsageBatch(pool, { replicaId: 'w', seq: 1, minutes: [row], statementTimeoutMs: 5_000 }),
    'applied',
    'the one connection is free again, and the batch was never recorded',
  )
  t.equal((await sums(db.pool, 'usage_minutes')).requests, 1, 'its counts are written once')
})
