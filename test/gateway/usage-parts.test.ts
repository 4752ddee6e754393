/**
 * A busy flush cut into parts by agency and written at the same time
 * (usage-parts.ts, usage-recorder.ts), against the real Postgres: the parts
 * never share an agency, are written concurrently, each once; a part that
 * fails is retried alone while the others stay written, and every key's total
 * is exact in the end.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { createPool } from '@scoped/shared/db'
import type { Pool } from '@scoped/shared/db'
import { createLogger } from '@scoped/shared/logger'
import type { RequestLogRow } from '@scoped/shared/request-log-store'
import type { UsageRow } from '@scoped/shared/usage-store'
import { GatewayMetrics } from '@scoped/gateway/metrics'
import { KeyDecision } from '@scoped/gateway/request-state'
import { parseRouteMap } from '@scoped/gateway/route-map'
import type { ScopedRoute } from '@scoped/gateway/route-map'
import { DEFAULT_USAGE_OPTIONS, UsageRecorder } from '@scoped/gateway/usage/usage-recorder'
import { ROWS_PER_PART, partCount, splitByAgency } from '@scoped/gateway/usage/usage-parts'
import { GATEWAY_POOL_SIZE, MAX_FLUSH_CONNECTIONS } from '@scoped/gateway/usage/usage-config'
import { createTestDatabase } from '../helpers/database.js'
import { waitFor } from '../helpers/wait-for.js'

const routes = parseRouteMap(
  [
    'routes:',
    '  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }',
    '  - { prefix: /v1/calls, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }',
    '  - { prefix: /v1/contacts, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }',
    '',
  ].join('\n'),
  'x',
)

function row(agencyId: string, n: number): UsageRow {
  return {
    bucket: 0,
    keyId: `${agencyId}-${n}`,
    agencyId,
    subAccountId: null,
    route: '/v1/agents',
    outcome: 'served',
    statusClass: 2,
    requests: 1,
    latency: [1],
  }
}

function logRow(agencyId: string): RequestLogRow {
  return {
    at: 0,
    requestId: randomUUID(),
    agencyId,
    keyId: randomUUID(),
    subAccountId: null,
    method: 'GET',
    path: '/v1/agents',
    status: 429,
    outcome: 'rate-limited',
    durationMs: 1,
    clientAddress: null,
  }
}

t.test('a batch is cut by whole agencies into even parts; a small one stays whole', async (t) => {
  t.same(splitByAgency([], [], 4), [], 'nothing to write: no part')
  t.equal(partCount(ROWS_PER_PART, 4), 1)
  t.equal(partCount(ROWS_PER_PART + 1, 4), 2)
  t.equal(partCount(100 * ROWS_PER_PART, 3), 3, 'never more parts than writers')
  const small = [row('a', 1), row('b', 1)]
  t.equal(splitByAgency(small, [logRow('c')], 4).length, 1, 'a quiet flush is one transaction')

  // 40 agencies of 10 to 400 rows each: 8 200 rows in all.
  const rows: UsageRow[] = []
  const sizes = new Map<string, number>()
  for (let a = 0; a < 40; a++) {
    const agencyId = `agency-${a}`
    const size = 10 + ((a * 97) % 40) * 10
    sizes.set(agencyId, size)
    for (let n = 0; n < size; n++) rows.push(row(agencyId, n))
  }
  const log = [logRow('agency-3'), logRow('agency-17'), logRow('only-logged')]
  const parts = splitByAgency(rows, log, 3)
  t.equal(parts.length, partCount(rows.length, 3))
  t.equal(
    parts.reduce((sum, part) => sum + part.rows.length, 0),
    rows.length,
    'every row in a part',
  )
  const homes = new Map<string, Set<number>>()
  parts.forEach((part, i) => {
    for (const r of part.rows) homes.set(r.agencyId, (homes.get(r.agencyId) ?? new Set()).add(i))
  })
  t.ok(
    [...homes.values()].every((home) => home.size === 1),
    "each agency's rows in one part",
  )
  const sizesOfParts = parts.map((part) => part.rows.length)
  t.ok(
    Math.max(...sizesOfParts) - Math.min(...sizesOfParts) <= Math.max(...sizes.values()),
    `parts as even as whole agencies allow (${sizesOfParts.join(', ')})`,
  )
  for (const entry of log.slice(0, 2)) {
    const part = parts.findIndex((p) => p.log.includes(entry))
    t.ok([...homes.get(entry.agencyId)!].includes(part), `${entry.agencyId}'s log rows go with its counts`)
  }
  t.ok(parts[0]!.log.includes(log[2]!), 'an agency with log rows alone goes with the first part')
})

interface Key {
  keyId: string
  agencyId: string
  subAccountId: string
}

/** 30 agencies of 100 keys, 3 routes each: 9 000 cells, three parts' worth. */
function keys(): Key[] {
  const all: Key[] = []
  for (let a = 0; a < 30; a++) {
    const agencyId = randomUUID()
    for (let k = 0; k < 100; k++) all.push({ keyId: randomUUID(), agencyId, subAccountId: randomUUID() })
  }
  return all
}

function count(usage: UsageRecorder, key: Key, times: number): void {
  const state = { status: 'active' as const, tenant: { scope: 'SUB-ACCOUNT' as const, ...key } }
  for (let i = 0; i < times; i++) {
    const route = routes.routes[i % 3] as ScopedRoute
    const decision = new KeyDecision('192.0.2.7', { path: route.prefix, query: '' }, route, 'hash', state, 0)
    decision.outcome = 'forwarded'
    const request = { gateway: decision, id: 'req', method: 'GET', raw: { url: route.prefix } } as unknown as FastifyRequest
    usage.record(request, { statusCode: 200, elapsedTime: 2 } as FastifyReply)
  }
}

async function keyTotals(pool: Pool): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ key_id: string; requests: string }>('SELECT key_id, sum(requests)::text AS requests FROM usage_minutes GROUP BY 1')
  return new Map(rows.map((r) => [r.key_id, Number(r.requests)]))
}

t.test('a busy flush writes its parts at the same time, each once; a failed part is retried alone, and the totals are exact', async (t) => {
  const db = await createTestDatabase(t)
  const usage = new UsageRecorder(db.pool, createLogger('test', 'silent'), new GatewayMetrics(routes), routes.routes, `test-${randomUUID()}`, {
    ...DEFAULT_USAGE_OPTIONS,
    writers: 3,
  })
  const all = keys()
  const expected = new Map(all.map((key, i) => [key.keyId, 3 + (i % 5)]))
  for (const key of all) count(usage, key, expected.get(key.keyId)!)
  const requests = [...expected.values()].reduce((sum, n) => sum + n, 0)
  t.equal(usage.pending(), requests)

  // Every part begins by recording its sequence: with that table locked, all three are seen waiting at once.
  const gate = await db.pool.connect()
  t.teardown(() => gate.release())
  await gate.query('BEGIN')
  await gate.query('LOCK TABLE usage_batches IN EXCLUSIVE MODE')
  // One agency's part fails (a constraint its rows break), the others are written.
  const failing = all[0]!.agencyId
  await db.pool.query(`ALTER TABLE usage_minutes ADD CONSTRAINT test_fault CHECK (agency_id <> '${failing}') NOT VALID`)
  const flushed = usage.flush()
  await waitFor(
    async () =>
      (
        await db.pool.query(
          "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO usage_batches%'",
        )
      ).rowCount === 3,
    'three parts waiting at once',
  )
  await gate.query('COMMIT')
  await flushed

  const failed = all.filter((key) => key.agencyId === failing)
  const written = await keyTotals(db.pool)
  t.equal((await db.pool.query('SELECT 1 FROM usage_batches')).rowCount, 2, 'two parts recorded')
  t.notOk(
    failed.some((key) => written.has(key.keyId)),
    "the failed part's agency has nothing written",
  )
  const writtenRequests = [...written.values()].reduce((sum, n) => sum + n, 0)
  t.ok(writtenRequests > 0, 'the other parts are written')
  t.equal(usage.pending(), requests - writtenRequests, 'the failed part is still held')

  await db.pool.query('ALTER TABLE usage_minutes DROP CONSTRAINT test_fault')
  await usage.flush()
  t.equal(usage.pending(), 0)
  t.equal((await db.pool.query('SELECT 1 FROM usage_batches')).rowCount, 3, 'three parts, each recorded once')
  t.same(await keyTotals(db.pool), expected, "every key's total exact: nothing lost, nothing twice")
})

t.test("a flush held up with its most parts, and the rollup with it, leave half the replica's pool to key lookups", async (t) => {
  const db = await createTestDatabase(t)
  // The replica's own pool, as app.ts makes it.
  const pool = createPool(db.url, { max: GATEWAY_POOL_SIZE, applicationName: 'scoped-api-test' })
  t.teardown(() => pool.end())
  const usage = new UsageRecorder(pool, createLogger('test', 'silent'), new GatewayMetrics(routes), routes.routes, `test-${randomUUID()}`, {
    ...DEFAULT_USAGE_OPTIONS,
    writers: MAX_FLUSH_CONNECTIONS,
  })
  const all = [...keys(), ...keys()]
  for (const key of all) count(usage, key, 3)
  const gate = await db.pool.connect()
  t.teardown(() => gate.release())
  await gate.query('BEGIN')
  await gate.query('LOCK TABLE usage_batches IN EXCLUSIVE MODE')
  const hour = 3_600_000
  await db.pool.query('UPDATE usage_rollup SET rolled_until = $1', [new Date(Math.floor(Date.now() / hour) * hour - hour).toISOString()])
  const holdsRollup = await db.pool.connect()
  t.teardown(() => holdsRollup.release())
  await holdsRollup.query('SELECT pg_advisory_lock(31027, $1)', [Math.floor(Date.now() / hour) - 1])
  const flushed = usage.flush()
  const rolled = usage.rollUp(Date.now() + hour)
  const waiting = async (): Promise<number> =>
    (
      await db.pool.query(
        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name = 'scoped-api-test' AND pid <> pg_backend_pid()",
      )
    ).rowCount ?? 0
  await waitFor(async () => (await waiting()) === MAX_FLUSH_CONNECTIONS + 1, 'every part and the rollup waiting')

  // Key lookups meanwhile: as many at once as the pool has left, each answered.
  const lookups = await Promise.all(
    Array.from({ length: GATEWAY_POOL_SIZE - MAX_FLUSH_CONNECTIONS - 1 }, () => pool.query<{ n: number }>('SELECT 1 AS n FROM pg_sleep(0.05)')),
  )
  t.equal(lookups.length, GATEWAY_POOL_SIZE / 2, 'half the pool still answers')
  t.ok(
    lookups.every((lookup) => lookup.rows[0]!.n === 1),
    'each lookup answered while the flush waits',
  )
  await gate.query('COMMIT')
  await holdsRollup.query('SELECT pg_advisory_unlock(31027, $1)', [Math.floor(Date.now() / hour) - 1])
  await flushed
  await rolled
  t.equal(usage.pending(), 0, 'then the flush is written')
})
