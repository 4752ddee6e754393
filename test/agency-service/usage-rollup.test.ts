/**
 * Hours and days rolled up from the minutes (migration 026, issue 31 "Speed
 * and scale"): a flush writes minute rows only, and usage_roll_up makes each
 * hour's rows (and each day's, at its end) once the hour is over. Every report
 * must be exact whatever the rollup's progress: before it, between its steps,
 * across a day's end, and with rows that come late for hours and days already
 * rolled (a replica that held its counts while Postgres was away). And a
 * rollup racing the writers of the very hour it rolls must neither lose nor
 * double a count.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { usageReport } from '@scoped/agency-service/usage/usage-report'
import type { GroupBy, UsageOwner, UsageReport, UsageRequest } from '@scoped/agency-service/usage/usage-report'
import { createPool } from '@scoped/shared/db'
import { rollUpUsage, writeUsageBatch } from '@scoped/shared/usage-store'
import type { UsageRow } from '@scoped/shared/usage-store'
import { createTestDatabase } from '../helpers/database.js'
import type { TestDatabase } from '../helpers/database.js'

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR
/** Four hours before a day's end, so that the rollup crosses one. */
const START = Date.UTC(2026, 0, 5, 20, 0)
const SPAN = 30 * HOUR
const ROUTES = ['/v1/agents', '/v1/calls']
const OUTCOMES = ['served', 'rate-limited']

interface Key {
  keyId: string
  agencyId: string
  subAccountId: string | null
}

function total(report: UsageReport): number {
  return report.series.reduce((sum, series) => sum + series.points.reduce((s, point) => s + point.requests, 0), 0)
}

function ordered(report: UsageReport): UsageReport {
  return { ...report, series: [...report.series].sort((a, b) => String(a.group).localeCompare(String(b.group))) }
}

async function rolledUntil(db: TestDatabase): Promise<number> {
  const { rows } = await db.pool.query<{ at: Date }>('SELECT rolled_until AS at FROM usage_rollup')
  return rows[0]!.at.getTime()
}

t.test('every report is exact before, during and after the rollup, rows that come late included', async (t) => {
  const db = await createTestDatabase(t)
  // As if the gateways had started counting at START: nothing rolled up since.
  await db.pool.query('UPDATE usage_rollup SET rolled_until = $1', [new Date(START).toISOString()])
  const agencyId = randomUUID()
  const subAccountId = randomUUID()
  await db.pool.query(`INSERT INTO agencies (id, name) VALUES ($1, 'Rolled')`, [agencyId])
  await db.pool.query(`INSERT INTO sub_accounts (id, agency_id, name) VALUES ($1, $2, 'Rolled')`, [subAccountId, agencyId])
  const keys: Key[] = [null, null, subAccountId, subAccountId].map((sub) => ({ keyId: randomUUID(), agencyId, subAccountId: sub }))
  const written: UsageRow[] = []
  let seq = 0
  let n = 0
  /** One batch of a row per key in each of `minutes`, its counts varied so that no two sums agree by chance. */
  const write = async (minutes: number[]): Promise<void> => {
    const rows: UsageRow[] = []
    for (const bucket of minutes) {
      for (const key of keys) {
        n++
        rows.push({
          bucket,
          ...key,
          route: ROUTES[n % 2]!,
          outcome: OUTCOMES[(n >> 1) % 2]!,
          statusClass: 2 + (n % 3),
          requests: 1 + (n % 7),
          latency: [n % 3, 1, n % 2],
        })
      }
    }
    t.equal(await writeUsageBatch(db.pool, { replicaId: 'rollup-test', seq: ++seq, minutes: rows }), 'applied')
    written.push(...rows)
  }
  const owners: Array<{ owner: UsageOwner; groupBys: Array<GroupBy | null> }> = [
    { owner: { agencyId }, groupBys: [null, 'key', 'sub-account', 'route', 'outcome'] },
    { owner: { agencyId, subAccountId }, groupBys: [null, 'key', 'outcome'] },
  ]
  const ranges = {
    minute: { from: new Date(START + 3 * HOUR), to: new Date(START + 3 * HOUR + DAY) },
    hour: { from: new Date(START - HOUR), to: new Date(START + SPAN + HOUR) },
    day: { from: new Date(START - DAY), to: new Date(START + 3 * DAY) },
  }
  const check = async (stage: string): Promise<void> => {
    for (const { owner, groupBys } of owners) {
      for (const granularity of ['minute', 'hour', 'day'] as const) {
        const { from, to } = ranges[granularity]
        const expected = written
          .filter((row) => (owner.subAccountId === undefined || row.subAccountId === owner.subAccountId) && row.bucket >= from.getTime())
          .filter((row) => (granularity === 'minute' ? row.bucket < to.getTime() : true))
          .reduce((sum, row) => sum + row.requests, 0)
        for (const groupBy of groupBys) {
          const request: UsageRequest = { from, to, granularity, groupBy }
          const report = await usageReport(db.pool, owner, request)
          const what = `${stage}: ${owner.subAccountId === undefined ? 'agency' : 'sub-account'} by ${granularity}, grouped by ${groupBy}`
          t.equal(total(report), expected, `${what}: the total is what was written`)
          if (groupBy !== 'key') t.same(ordered(report), ordered(await usageReport(db.pool, owner, request, 'keys')), `${what}: equal to the per-key rows`)
        }
      }
    }
  }

  const minutes = Array.from({ length: SPAN / (17 * MINUTE) }, (_, i) => START + i * 17 * MINUTE)
  for (let i = 0; i < minutes.length; i += 9) await write(minutes.slice(i, i + 9))
  await check('nothing rolled up')
  t.same(await db.pool.query('SELECT 1 FROM usage_hours UNION ALL SELECT 1 FROM usage_days').then((r) => r.rows), [], 'a flush writes minute rows only')

  t.equal(await rollUpUsage(db.pool, new Date(START + 2 * HOUR + 30 * MINUTE), 24), 2, 'the two hours over are rolled, not the one under way')
  t.equal(await rolledUntil(db), START + 2 * HOUR)
  await check('two hours rolled up')
  // Late: rows of a rolled hour, of the hour the rollup stands at, and of the last one.
  await write([START + 5 * MINUTE, START + 2 * HOUR + 1 * MINUTE, START + SPAN - MINUTE])
  await check('rows late for a rolled hour')

  t.equal(await rollUpUsage(db.pool, new Date(START + 6 * HOUR), 3), 3, 'at most the hours asked for')
  t.equal(await rolledUntil(db), START + 5 * HOUR, "past the day's end: its day is rolled up too")
  const day = await db.pool.query<{ requests: string }>("SELECT sum(requests)::text AS requests FROM usage_days WHERE bucket = '2026-01-05T00:00Z'")
  const dayWritten = written.filter((row) => row.bucket < Date.UTC(2026, 0, 6)).reduce((sum, row) => sum + row.requests, 0)
  t.equal(Number(day.rows[0]!.requests), dayWritten, "the day's rows are its minutes' sums")
  await check('a day rolled up')
  await write([START + 10 * MINUTE, START + 4 * HOUR + 59 * MINUTE, START + 5 * HOUR])
  await check('rows late for a rolled day')

  t.equal(await rollUpUsage(db.pool, new Date(START + SPAN + HOUR), 100), SPAN / HOUR - 4, 'the rest')
  await check('everything rolled up')
  const hours = await db.pool.query<{ requests: string }>('SELECT sum(requests)::text AS requests FROM usage_hours')
  t.equal(
    Number(hours.rows[0]!.requests),
    written.reduce((sum, row) => sum + row.requests, 0),
    'the hour rows hold every count once',
  )
  t.equal(await rollUpUsage(db.pool, new Date(START + SPAN + HOUR), 100), 0, 'nothing twice')
})

t.test('a rollup racing the writers of the hour it rolls loses and doubles nothing', async (t) => {
  const db = await createTestDatabase(t)
  await db.pool.query('UPDATE usage_rollup SET rolled_until = $1', [new Date(START).toISOString()])
  const writers = createPool(db.url, { max: 8, applicationName: 'scoped-api-test' })
  t.teardown(() => writers.end())
  const agencyId = randomUUID()
  const keyId = randomUUID()
  let expected = 0
  const writer = async (replica: number): Promise<void> => {
    for (let seq = 1; seq <= 25; seq++) {
      const requests = replica * 100 + seq
      expected += requests
      const row = {
        bucket: START + ((replica * 7 + seq) % 60) * MINUTE,
        keyId,
        agencyId,
        subAccountId: null,
        route: '/v1/agency',
        outcome: 'served',
        statusClass: 2,
      }
      await writeUsageBatch(writers, { replicaId: `racer-${replica}`, seq, minutes: [{ ...row, requests, latency: [1] }] })
    }
  }
  const roll = async (): Promise<number> => {
    // Somewhere in the middle of the writes.
    await new Promise((resolve) => setTimeout(resolve, 30))
    return rollUpUsage(db.pool, new Date(START + DAY), 1)
  }
  const [rolled] = await Promise.all([roll(), ...Array.from({ length: 7 }, (_, i) => writer(i + 1))])
  t.equal(rolled, 1, 'the hour was rolled up while its writers wrote')
  const sums = await db.pool.query<{ minutes: string; hours: string; agency: string }>(
    `SELECT (SELECT sum(requests) FROM usage_minutes)::text AS minutes, (SELECT sum(requests) FROM usage_hours WHERE bucket = $1)::text AS hours,
            (SELECT sum(requests) FROM usage_agency_hours WHERE bucket = $1)::text AS agency`,
    [new Date(START).toISOString()],
  )
  t.same(sums.rows[0], { minutes: String(expected), hours: String(expected), agency: String(expected) }, 'every count once, in the minutes and in the hour')
  const report = await usageReport(db.pool, { agencyId }, { from: new Date(START), to: new Date(START + HOUR), granularity: 'hour', groupBy: null })
  t.equal(total(report), expected, 'and in the report')
})
