/**
 * The tenants' usage summaries (migration 025) answer exactly what the
 * per-key rows do (issue 31, "Speed and scale"): random usage of a few
 * agencies, sub-accounts and keys over several days, written through the real
 * writer (minute batches of one minute and of many, extra hour and day rows, a
 * batch replayed), then every granularity × grouping × owner of the report
 * read from the summaries equals the same report read from the per-key rows,
 * and its totals equal the sums of what was written. The report picks the
 * summaries unless it is by key or for one key.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { usageReport, usageSource } from '@scoped/agency-service/usage/usage-report'
import type { GroupBy, UsageOwner, UsageReport, UsageRequest } from '@scoped/agency-service/usage/usage-report'
import { LATENCY_BUCKETS, usageOutcomes } from '@scoped/shared/usage'
import { writeUsageBatch } from '@scoped/shared/usage-store'
import type { UsageBatch, UsageRow } from '@scoped/shared/usage-store'
import { createTestDatabase } from '../helpers/database.js'

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR
const START = Date.UTC(2026, 0, 5, 20, 0)
const SPAN = 3 * DAY
const ROUTES = ['/v1/agents', '/v1/calls', '/v1/numbers']

/** A small seeded generator, so a failure can be replayed from the seed in its message. */
function generator(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let x = Math.imul(state ^ (state >>> 15), 1 | state)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4_294_967_296
  }
}

interface Key {
  keyId: string
  agencyId: string
  subAccountId: string | null
}

/** Series in the order of their groups: series of equal totals come in the order Postgres grouped them, which may differ. */
function ordered(report: UsageReport): UsageReport {
  return { ...report, series: [...report.series].sort((a, b) => String(a.group).localeCompare(String(b.group))) }
}

function total(report: UsageReport): number {
  return report.series.reduce((sum, series) => sum + series.points.reduce((s, point) => s + point.requests, 0), 0)
}

t.test('every report read from the summaries equals the one read from the per-key rows', async (t) => {
  const db = await createTestDatabase(t)
  const seed = Math.floor(Math.random() * 2 ** 31)
  const random = generator(seed)
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!
  const agencies = [randomUUID(), randomUUID(), randomUUID()]
  const subAccounts = new Map(agencies.map((agencyId) => [agencyId, [randomUUID(), randomUUID()]]))
  // The report answers a sub-account filter only for a sub-account of the agency.
  for (const agencyId of agencies) {
    await db.pool.query(`INSERT INTO agencies (id, name) VALUES ($1, 'Summed')`, [agencyId])
    for (const id of subAccounts.get(agencyId)!) await db.pool.query(`INSERT INTO sub_accounts (id, agency_id, name) VALUES ($1, $2, 'Summed')`, [id, agencyId])
  }
  const keys: Key[] = agencies.flatMap((agencyId) =>
    [null, ...subAccounts.get(agencyId)!].flatMap((subAccountId) => [0, 1, 2].map(() => ({ keyId: randomUUID(), agencyId, subAccountId }))),
  )
  const row = (key: Key, bucket: number): UsageRow => {
    const latency = new Array<number>(1 + Math.floor(random() * LATENCY_BUCKETS)).fill(0).map(() => Math.floor(random() * 3))
    return {
      bucket,
      ...key,
      route: pick(ROUTES),
      outcome: pick(usageOutcomes),
      statusClass: 2 + Math.floor(random() * 4),
      requests: 1 + Math.floor(random() * 20),
      latency,
    }
  }
  /** Rows with distinct cells (a batch's minute rows are one per key, minute, route, outcome and class). */
  const distinct = (rows: UsageRow[]): UsageRow[] => [
    ...new Map(rows.map((r) => [`${r.keyId} ${r.bucket} ${r.route} ${r.outcome} ${r.statusClass}`, r])).values(),
  ]
  const written: Array<{ period: 'minute' | 'hour' | 'day'; row: UsageRow }> = []
  const batches: UsageBatch[] = []
  for (let seq = 1; seq <= 40; seq++) {
    // Half the batches are of one minute (the writer's usual path), half spread over the days (its grouping path).
    const oneMinute = START + Math.floor(random() * (SPAN / MINUTE)) * MINUTE
    const minuteOf = (): number => (seq % 2 === 0 ? oneMinute : START + Math.floor(random() * (SPAN / MINUTE)) * MINUTE)
    const minutes = distinct(Array.from({ length: 30 }, () => row(pick(keys), minuteOf())))
    const batch: UsageBatch = { replicaId: 'summary-test', seq, minutes }
    if (seq % 10 === 0) {
      batch.hours = distinct(Array.from({ length: 8 }, () => row(pick(keys), START + Math.floor(random() * (SPAN / HOUR)) * HOUR)))
      batch.days = distinct(Array.from({ length: 5 }, () => row(pick(keys), Date.UTC(2026, 0, 5) + Math.floor(random() * 4) * DAY)))
    }
    batches.push(batch)
    written.push(...minutes.map((r) => ({ period: 'minute' as const, row: r })))
    written.push(...(batch.hours ?? []).map((r) => ({ period: 'hour' as const, row: r })))
    written.push(...(batch.days ?? []).map((r) => ({ period: 'day' as const, row: r })))
  }
  for (const batch of batches) t.equal(await writeUsageBatch(db.pool, batch), 'applied')
  t.equal(await writeUsageBatch(db.pool, batches[3]!), 'duplicate', 'a batch replayed is not counted again in either')

  const ranges = {
    minute: { from: new Date(START + DAY + 7 * MINUTE), to: new Date(START + 2 * DAY + 7 * MINUTE) },
    hour: { from: new Date(START - HOUR), to: new Date(START + SPAN + HOUR) },
    day: { from: new Date(Date.UTC(2026, 0, 4)), to: new Date(Date.UTC(2026, 0, 10)) },
  } as const
  const expected = (owner: UsageOwner, granularity: keyof typeof ranges, subAccountId?: string): number => {
    const { from, to } = ranges[granularity]
    return written
      .filter(({ period, row }) => {
        const counted = period === 'minute' || period === granularity
        const bucket =
          granularity === 'minute' ? row.bucket : Math.floor(row.bucket / (granularity === 'hour' ? HOUR : DAY)) * (granularity === 'hour' ? HOUR : DAY)
        return (
          counted &&
          row.agencyId === owner.agencyId &&
          (owner.subAccountId ?? subAccountId ?? row.subAccountId) === row.subAccountId &&
          bucket >= from.getTime() - (from.getTime() % (granularity === 'minute' ? MINUTE : granularity === 'hour' ? HOUR : DAY)) &&
          bucket < to.getTime()
        )
      })
      .reduce((sum, { row }) => sum + row.requests, 0)
  }

  const owners: Array<{ owner: UsageOwner; subAccountId?: string; groupBys: Array<GroupBy | null> }> = []
  for (const agencyId of agencies) {
    owners.push({ owner: { agencyId }, groupBys: [null, 'sub-account', 'route', 'outcome'] })
    owners.push({ owner: { agencyId }, subAccountId: subAccounts.get(agencyId)![0]!, groupBys: [null, 'route', 'outcome'] })
    for (const subAccountId of subAccounts.get(agencyId)!) owners.push({ owner: { agencyId, subAccountId }, groupBys: [null, 'route', 'outcome'] })
  }
  let compared = 0
  for (const { owner, subAccountId, groupBys } of owners) {
    for (const granularity of ['minute', 'hour', 'day'] as const) {
      for (const groupBy of groupBys) {
        const request: UsageRequest = { ...ranges[granularity], granularity, groupBy }
        if (subAccountId !== undefined) request.subAccountId = subAccountId
        const source = usageSource(owner, request)
        t.equal(source, owner.subAccountId !== undefined || subAccountId !== undefined || groupBy === 'sub-account' ? 'summary' : 'agency')
        const summary = await usageReport(db.pool, owner, request)
        const perKey = await usageReport(db.pool, owner, request, 'keys')
        const what = `seed ${seed}, ${JSON.stringify(owner)} ${subAccountId ?? ''} ${granularity} by ${groupBy}`
        t.same(ordered(summary), ordered(perKey), `${what}: ${source} summary = per-key rows`)
        if (source === 'agency')
          t.same(ordered(await usageReport(db.pool, owner, request, 'summary')), ordered(perKey), `${what}: sub-account summary = per-key rows`)
        t.equal(total(summary), expected(owner, granularity, subAccountId), `${what}: total = what was written`)
        if (total(summary) > 0) compared++
      }
    }
  }
  t.ok(compared > owners.length * 6, 'the comparisons had counts to compare')
  const agency = { agencyId: agencies[0]! }
  t.equal(usageSource(agency, { ...ranges.hour, granularity: 'hour', groupBy: 'key' }), 'keys', 'by key reads the per-key rows')
  t.equal(usageSource(agency, { ...ranges.hour, granularity: 'hour', groupBy: null, keyId: keys[0]!.keyId }), 'keys', 'one key reads the per-key rows')
})
