/**
 * A tenant's usage over a range (the contract's "Usage"): the counts the
 * gateways wrote (migrations 017 and 025) summed per bucket of the granularity and per
 * group, one point per bucket of the range with zeros included, `requests`
 * the sum of the outcomes, and latency percentiles read from the merged
 * histograms. The same report serves the API, ctl and the console.
 */
import type { Pool } from '@scoped/shared/db'
import { ApiError, invalidField } from '@scoped/shared/errors'
import type { StatusClass, UsageOutcome } from '@scoped/shared/usage'
import { LATENCY_BUCKETS, latencyQuantile, statusClasses, usageOutcomes } from '@scoped/shared/usage'
import { requireIsoTime, requireUuid } from '@scoped/shared/validation'

export const granularities = ['minute', 'hour', 'day'] as const
export type Granularity = (typeof granularities)[number]
export const groupBys = ['key', 'sub-account', 'route', 'outcome'] as const
export type GroupBy = (typeof groupBys)[number]

const BUCKET_MS: Record<Granularity, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 }
/** The longest range of each granularity. */
export const MAX_RANGE_MS: Record<Granularity, number> = { minute: 86_400_000, hour: 90 * 86_400_000, day: 400 * 86_400_000 }
/**
 * Where a report reads: the per-key rows (migration 017) only when it is grouped by key or filtered by one, the
 * tenants' summaries without the key (migration 025, written with them and equal to their sums) for every other.
 */
export type UsageSource = 'keys' | 'summary'
const TABLE: Record<UsageSource, Record<Granularity, string>> = {
  keys: { minute: 'usage_minutes', hour: 'usage_hours', day: 'usage_days' },
  summary: { minute: 'usage_summary_minutes', hour: 'usage_summary_hours', day: 'usage_summary_days' },
}
const GROUP_COLUMN: Record<GroupBy | 'none', string> = {
  none: 'NULL::text',
  key: 'key_id::text',
  'sub-account': 'sub_account_id::text',
  route: 'route',
  outcome: 'outcome',
}
const DEFAULT_RANGE_MS = 86_400_000

/** Whose usage: an agency (its own keys and all its sub-accounts'), or one sub-account. */
export type UsageOwner = { agencyId: string; subAccountId?: undefined } | { agencyId: string; subAccountId: string }

export interface UsageRequest {
  from: Date
  to: Date
  granularity: Granularity
  groupBy: GroupBy | null
  keyId?: string
  subAccountId?: string
}

/** The query's words as they came (strings), checked here; `field` names them as the caller spelled them. */
export interface UsageQueryText {
  from?: string
  to?: string
  granularity?: string
  groupBy?: string
  keyId?: string
  subAccountId?: string
}

export function readUsageRequest(
  query: UsageQueryText,
  owner: UsageOwner,
  now: Date,
  field: (name: string) => string = (name) => `querystring.${name}`,
): UsageRequest {
  const granularity = (query.granularity ?? 'hour') as Granularity
  if (!granularities.includes(granularity)) throw invalidField(field('granularity'), `must be one of ${granularities.join(', ')}`)
  const groupBy = query.groupBy === undefined ? null : (query.groupBy as GroupBy)
  if (groupBy !== null && (!groupBys.includes(groupBy) || (groupBy === 'sub-account' && owner.subAccountId !== undefined))) {
    throw invalidField(field('groupBy'), `must be one of ${groupBys.filter((g) => owner.subAccountId === undefined || g !== 'sub-account').join(', ')}`)
  }
  const to =
    query.to === undefined
      ? query.from === undefined
        ? now
        : new Date(Math.min(now.getTime(), requireIsoTime(query.from, field('from')).getTime() + DEFAULT_RANGE_MS))
      : requireIsoTime(query.to, field('to'))
  const from = query.from === undefined ? new Date(to.getTime() - DEFAULT_RANGE_MS) : requireIsoTime(query.from, field('from'))
  if (from >= to) throw invalidField(field('from'), `must be before ${field('to')}`)
  if (to.getTime() - from.getTime() > MAX_RANGE_MS[granularity]) {
    throw invalidField(field('to'), `is too far from ${field('from')} for granularity ${granularity} (minute: up to 24h, hour: up to 90d, day: up to 400d)`)
  }
  const request: UsageRequest = { from, to, granularity, groupBy }
  if (query.keyId !== undefined) request.keyId = requireUuid(query.keyId, field('keyId'))
  if (query.subAccountId !== undefined) {
    if (owner.subAccountId !== undefined) throw invalidField(field('subAccountId'), 'is for agency keys only')
    request.subAccountId = requireUuid(query.subAccountId, field('subAccountId'))
  }
  return request
}

export interface UsagePoint {
  at: string
  requests: number
  outcomes: Record<UsageOutcome, number>
  statusClasses: Record<StatusClass, number>
  latencyMs: { p50: number | null; p95: number | null; p99: number | null }
}

export interface UsageReport {
  from: string
  to: string
  granularity: Granularity
  groupBy: GroupBy | null
  series: Array<{ group: string | null; points: UsagePoint[] }>
}

interface Row {
  at_ms: string
  grp: string | null
  outcome: string
  status_class: number
  requests: string
  latency: string[]
}

/** A filter that names another tenant's key or sub-account is answered as one that does not exist. */
async function checkOwnership(pool: Pool, owner: UsageOwner, request: UsageRequest): Promise<void> {
  if (request.keyId !== undefined) {
    const { rowCount } = await pool.query(
      `SELECT 1 FROM api_keys WHERE id = $1 AND agency_id = $2 AND ($3::uuid IS NULL OR sub_account_id = $3)
       UNION ALL SELECT 1 FROM usage_days WHERE key_id = $1 AND agency_id = $2 AND ($3::uuid IS NULL OR sub_account_id = $3) LIMIT 1`,
      [request.keyId, owner.agencyId, owner.subAccountId ?? null],
    )
    if (rowCount === 0) throw new ApiError('notFound')
  }
  if (request.subAccountId !== undefined) {
    const { rowCount } = await pool.query('SELECT 1 FROM sub_accounts WHERE id = $1 AND agency_id = $2', [request.subAccountId, owner.agencyId])
    if (rowCount === 0) throw new ApiError('notFound')
  }
}

function emptyPoint(at: number): UsagePoint & { histogram: number[] } {
  return {
    at: new Date(at).toISOString(),
    requests: 0,
    outcomes: Object.fromEntries(usageOutcomes.map((outcome) => [outcome, 0])) as Record<UsageOutcome, number>,
    statusClasses: Object.fromEntries(statusClasses.map((statusClass) => [statusClass, 0])) as Record<StatusClass, number>,
    latencyMs: { p50: null, p95: null, p99: null },
    histogram: new Array<number>(LATENCY_BUCKETS).fill(0),
  }
}

/** The first bucket of the range: `from` rounded down to its granularity (UTC). */
export function firstBucket(from: Date, granularity: Granularity): number {
  const ms = from.getTime()
  return ms - (((ms % BUCKET_MS[granularity]) + BUCKET_MS[granularity]) % BUCKET_MS[granularity])
}

/** The tables a report needs: the per-key ones only for a key's dimension. */
export function usageSource(request: UsageRequest): UsageSource {
  return request.groupBy === 'key' || request.keyId !== undefined ? 'keys' : 'summary'
}

/**
 * The statement of a report (the benchmark and the tests read its plan): the counts of the range, summed per
 * bucket, group, outcome and status class. `source` is the report's own unless a test compares the two.
 */
export function usageQuery(
  owner: UsageOwner,
  request: UsageRequest,
  source: UsageSource = usageSource(request),
): { text: string; values: unknown[]; start: number } {
  if (source === 'summary' && usageSource(request) === 'keys') throw new Error('usageQuery: the summaries have no key dimension')
  const start = firstBucket(request.from, request.granularity)
  const values: unknown[] = [owner.agencyId, new Date(start).toISOString(), request.to.toISOString()]
  const where = ['agency_id = $1', 'bucket >= $2', 'bucket < $3']
  const add = (condition: (parameter: string) => string, value: unknown): void => {
    values.push(value)
    where.push(condition(`$${values.length}`))
  }
  const subAccountId = owner.subAccountId ?? request.subAccountId
  if (subAccountId !== undefined) add((p) => `sub_account_id = ${p}`, subAccountId)
  if (request.keyId !== undefined) add((p) => `key_id = ${p}`, request.keyId)
  const text = `SELECT (extract(epoch FROM bucket) * 1000)::bigint::text AS at_ms, ${GROUP_COLUMN[request.groupBy ?? 'none']} AS grp, outcome, status_class,
            sum(requests)::text AS requests, usage_histogram_sum(latency)::text[] AS latency
       FROM ${TABLE[source][request.granularity]} WHERE ${where.join(' AND ')} GROUP BY 1, 2, 3, 4`
  return { text, values, start }
}

export async function usageReport(pool: Pool, owner: UsageOwner, request: UsageRequest, source: UsageSource = usageSource(request)): Promise<UsageReport> {
  await checkOwnership(pool, owner, request)
  const { text, values, start } = usageQuery(owner, request, source)
  const { rows } = await pool.query<Row>(text, values)
  return buildReport(request, start, rows)
}

function buildReport(request: UsageRequest, start: number, rows: readonly Row[]): UsageReport {
  const step = BUCKET_MS[request.granularity]
  const end = request.to.getTime()
  const series = new Map<string | null, { points: Map<number, ReturnType<typeof emptyPoint>>; total: number }>()
  const seriesOf = (group: string | null): { points: Map<number, ReturnType<typeof emptyPoint>>; total: number } => {
    let found = series.get(group)
    if (found === undefined) {
      found = { points: new Map(), total: 0 }
      for (let at = start; at < end; at += step) found.points.set(at, emptyPoint(at))
      series.set(group, found)
    }
    return found
  }
  if (request.groupBy === null) seriesOf(null)
  for (const row of rows) {
    const group = seriesOf(row.grp)
    const point = group.points.get(Number(row.at_ms))
    if (point === undefined) continue
    const requests = Number(row.requests)
    group.total += requests
    point.requests += requests
    if (row.outcome in point.outcomes) point.outcomes[row.outcome as UsageOutcome] += requests
    const statusClass = statusClasses[row.status_class - 2]
    if (statusClass !== undefined) point.statusClasses[statusClass] += requests
    row.latency.forEach((count, index) => {
      if (index < LATENCY_BUCKETS) point.histogram[index]! += Number(count)
    })
  }
  const ordered = [...series.entries()].sort((a, b) => b[1].total - a[1].total)
  return {
    from: request.from.toISOString(),
    to: request.to.toISOString(),
    granularity: request.granularity,
    groupBy: request.groupBy,
    series: ordered.map(([group, { points }]) => ({
      group,
      points: [...points.values()].map(({ histogram, ...point }) => ({
        ...point,
        latencyMs: { p50: latencyQuantile(histogram, 0.5), p95: latencyQuantile(histogram, 0.95), p99: latencyQuantile(histogram, 0.99) },
      })),
    })),
  }
}
