/**
 * A tenant's usage over a range (the contract's "Usage"): the counts the
 * gateways wrote (migrations 017, 025 and 026) summed per bucket of the granularity and per
 * group, one point per bucket of the range with zeros included, `requests`
 * the sum of the outcomes, and latency percentiles read from the merged
 * histograms. The same report serves the API, ctl and the console.
 */
import type { Pool, PoolClient } from '@scoped/shared/db'
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
 * Where a report reads: the per-key rows (migration 017) only when it is grouped by key or filtered by one; the
 * summaries per sub-account (migration 025) when it is about sub-accounts (grouped by them, filtered by one, or a
 * sub-account's own); the whole agency's summary (migration 026) for every other. All are written together and
 * equal to each other's sums.
 */
export type UsageSource = 'keys' | 'summary' | 'agency'
const TABLE: Record<UsageSource, Record<Granularity, string>> = {
  keys: { minute: 'usage_minutes', hour: 'usage_hours', day: 'usage_days' },
  summary: { minute: 'usage_summary_minutes', hour: 'usage_summary_hours', day: 'usage_summary_days' },
  agency: { minute: 'usage_agency_minutes', hour: 'usage_agency_hours', day: 'usage_agency_days' },
}
const GROUP_COLUMN: Record<GroupBy | 'none', string> = {
  none: 'NULL::text',
  key: 'key_id::text',
  'sub-account': 'sub_account_id::text',
  route: 'route',
  outcome: 'outcome',
}
/**
 * The rows a report of each granularity reads, given where the hourly rollup stands (migration 026: hours before
 * it are in the hour rows, whole days before its day in the day rows): the coarse rows the rollup has made, and
 * the finer rows after it (the hours and minutes not rolled up yet), each truncated to the granularity.
 */
const PARTS: Record<Granularity, Array<{ granularity: Granularity; from: 'start' | 'rolled-day' | 'rolled'; to: 'end' | 'rolled-day' | 'rolled' }>> = {
  minute: [{ granularity: 'minute', from: 'start', to: 'end' }],
  hour: [
    { granularity: 'hour', from: 'start', to: 'rolled' },
    { granularity: 'minute', from: 'rolled', to: 'end' },
  ],
  day: [
    { granularity: 'day', from: 'start', to: 'rolled-day' },
    { granularity: 'hour', from: 'rolled-day', to: 'rolled' },
    { granularity: 'minute', from: 'rolled', to: 'end' },
  ],
}
const DEFAULT_RANGE_MS = 86_400_000
/**
 * A report is built whole in memory, one point per series and bucket (zeros included), from rows read whole: past
 * these it is refused (400) rather than let one request take the service's memory. A 1 000-key agency's 30 days by
 * key and day is 30 000 points; by key and hour, 720 000.
 */
export const MAX_REPORT_POINTS = 200_000
const MAX_REPORT_ROWS = 4 * MAX_REPORT_POINTS
const TOO_LARGE = 'This usage report would be too large: ask for a shorter range or a coarser granularity, or filter by key or sub-account'

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
  /** The histogram as Postgres writes an array: `{1,0,2}`. */
  latency: string
}

/** A filter that names another tenant's key or sub-account is answered as one that does not exist. */
async function checkOwnership(pool: Pool, owner: UsageOwner, request: UsageRequest): Promise<void> {
  if (request.keyId !== undefined) {
    const { rowCount } = await pool.query(
      `SELECT 1 FROM api_keys WHERE id = $1 AND agency_id = $2 AND ($3::uuid IS NULL OR sub_account_id = $3)
       UNION ALL SELECT 1 FROM usage_days WHERE key_id = $1 AND agency_id = $2 AND ($3::uuid IS NULL OR sub_account_id = $3)
       UNION ALL SELECT 1 FROM usage_hours WHERE key_id = $1 AND agency_id = $2 AND ($3::uuid IS NULL OR sub_account_id = $3)
       UNION ALL SELECT 1 FROM usage_minutes WHERE agency_id = $2 AND bucket >= (SELECT rolled_until FROM usage_rollup) AND key_id = $1
                                             AND ($3::uuid IS NULL OR sub_account_id = $3) LIMIT 1`,
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

/** The tables a report needs: the per-key ones only for a key's dimension, the sub-accounts' only for theirs. */
export function usageSource(owner: UsageOwner, request: UsageRequest): UsageSource {
  if (request.groupBy === 'key' || request.keyId !== undefined) return 'keys'
  if (request.groupBy === 'sub-account' || request.subAccountId !== undefined || owner.subAccountId !== undefined) return 'summary'
  return 'agency'
}

/** Whether `source` has what the report needs (a test compares the sources that do). */
function serves(source: UsageSource, owner: UsageOwner, request: UsageRequest): boolean {
  const needed = usageSource(owner, request)
  return source === needed || source === 'keys' || (source === 'summary' && needed === 'agency')
}

/**
 * Where the rollup stands. Read before the report's statement rather than in it, so that the planner reads only
 * the partitions each part needs; a rollup that commits in between leaves the report exact, as every hour it
 * rolls keeps its minute rows (migration 026 drops minutes only once rolled up) and a row written late goes to
 * both.
 */
export async function rolledUntil(db: Pool | PoolClient): Promise<Date> {
  const { rows } = await db.query<{ rolled_until: Date }>('SELECT rolled_until FROM usage_rollup')
  if (rows[0] === undefined) throw new Error('usage_rollup has no row: run the migrations')
  return rows[0].rolled_until
}

/**
 * The statement of a report (the benchmark and the tests read its plan): the rows of the range at the report's
 * granularity (finer rows summed to it), each with its group, for buildReport to add up per point. `source` is the
 * report's own unless a test compares them.
 */
export function usageQuery(
  owner: UsageOwner,
  request: UsageRequest,
  rolled: Date,
  source: UsageSource = usageSource(owner, request),
): { text: string; values: unknown[]; start: number } {
  if (!serves(source, owner, request)) throw new Error(`usageQuery: ${source} rows lack a dimension the report needs`)
  const step = BUCKET_MS[request.granularity]
  const start = firstBucket(request.from, request.granularity)
  // Every bucket of the granularity that begins before `to`, whole: its finer rows up to its end.
  const end = firstBucket(new Date(request.to.getTime() + step - 1), request.granularity)
  const bounds = { start, end, rolled: rolled.getTime(), 'rolled-day': firstBucket(rolled, 'day') }
  const values: unknown[] = [owner.agencyId]
  const where = ['agency_id = $1']
  const parameter = (value: unknown): string => {
    values.push(value)
    return `$${values.length}`
  }
  const subAccountId = owner.subAccountId ?? request.subAccountId
  if (subAccountId !== undefined) where.push(`sub_account_id = ${parameter(subAccountId)}`)
  if (request.keyId !== undefined) where.push(`key_id = ${parameter(request.keyId)}`)
  const group = GROUP_COLUMN[request.groupBy ?? 'none']
  const parts = PARTS[request.granularity].flatMap(({ granularity, from, to }) => {
    const first = Math.max(start, bounds[from])
    const last = Math.min(end, bounds[to])
    if (first >= last) return []
    const rows = `FROM ${TABLE[source][granularity]}
        WHERE ${where.join(' AND ')} AND bucket >= ${parameter(new Date(first).toISOString())} AND bucket < ${parameter(new Date(last).toISOString())}`
    // Rows of the report's own granularity are merged by the reader (buildReport), which adds every row of a point
    // anyway; finer rows are summed here to the granularity first, as there are many of them to a point.
    return granularity === request.granularity
      ? [`SELECT bucket, ${group} AS grp, outcome, status_class, requests, latency ${rows}`]
      : [
          `SELECT date_trunc('${request.granularity}', bucket, 'UTC') AS bucket, ${group} AS grp, outcome, status_class,
                  sum(requests) AS requests, usage_histogram_sum(latency) AS latency ${rows} GROUP BY 1, 2, 3, 4`,
        ]
  })
  if (parts.length === 0)
    parts.push(`SELECT NULL::timestamptz AS bucket, NULL::text AS grp, NULL::text AS outcome, NULL::smallint AS status_class,
    NULL::bigint AS requests, NULL::bigint[] AS latency WHERE false`)
  const text = `SELECT (extract(epoch FROM bucket) * 1000)::bigint::text AS at_ms, grp, outcome, status_class,
            requests::text AS requests, latency::text AS latency
       FROM (${parts.join('\n UNION ALL ')}) AS counted`
  return { text, values, start }
}

/** The rows of a report, read whole: refused (400) past MAX_REPORT_ROWS, before anything is built of them. */
async function reportRows(pool: Pool, owner: UsageOwner, request: UsageRequest, source: UsageSource): Promise<{ rows: Row[]; start: number }> {
  await checkOwnership(pool, owner, request)
  const { text, values, start } = usageQuery(owner, request, await rolledUntil(pool), source)
  const { rows } = await pool.query<Row>(`${text} LIMIT ${MAX_REPORT_ROWS + 1}`, values)
  if (rows.length > MAX_REPORT_ROWS) throw new ApiError('badRequest', TOO_LARGE)
  return { rows, start }
}

export async function usageReport(
  pool: Pool,
  owner: UsageOwner,
  request: UsageRequest,
  source: UsageSource = usageSource(owner, request),
): Promise<UsageReport> {
  const { rows, start } = await reportRows(pool, owner, request, source)
  const buckets = Math.ceil((request.to.getTime() - start) / BUCKET_MS[request.granularity])
  const series = request.groupBy === null ? 1 : new Set(rows.map((row) => row.grp)).size
  if (series * buckets > MAX_REPORT_POINTS) throw new ApiError('badRequest', TOO_LARGE)
  return buildReport(request, start, rows)
}

/**
 * Each group's requests over the range (`request.groupBy`'s), as the report's series would total them, without
 * their points: for rankings (the console's busiest keys and sub-accounts), however many groups there are.
 */
export async function usageTotals(pool: Pool, owner: UsageOwner, request: UsageRequest): Promise<Map<string, number>> {
  const { rows } = await reportRows(pool, owner, request, usageSource(owner, request))
  const totals = new Map<string, number>()
  for (const row of rows) if (row.grp !== null) totals.set(row.grp, (totals.get(row.grp) ?? 0) + Number(row.requests))
  return totals
}

/** Adds a histogram as Postgres writes it (`{1,0,2}`) to `histogram`, element by element. */
function addHistogram(histogram: number[], text: string): void {
  const counts = text.slice(1, -1).split(',')
  for (let index = 0; index < counts.length && index < LATENCY_BUCKETS; index++) histogram[index]! += Number(counts[index])
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
    addHistogram(point.histogram, row.latency)
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
