/**
 * Usage at scale (issue 31, "Speed and scale"), against the bench's temporary
 * database:
 *
 * 1. a replica's counts: usage-scale-replica.ts, in a process of its own, has
 *    the real UsageRecorder count BENCH_USAGE_KEYS (default 100 000) distinct
 *    keys in one minute and flushes them with the real batch writer; the heap
 *    the counts hold and the time of the flush (targets: < 64 MiB, < 1 s);
 * 2. the usage query: 30 days of hourly rows (and their day rows) seeded for
 *    an agency with 1 000 keys, every key active every hour, beside other
 *    agencies' rows; then the report the API answers (usageReport, the same
 *    code and SQL as GET /v1/agency/usage) for the whole agency over the 30
 *    days, BENCH_USAGE_QUERIES times each: with the API's default grouping
 *    (none, by hour), and grouped by key (by day, as the console's 30-day
 *    view asks); p50/p95 (target: p95 < 300 ms), the plan (EXPLAIN, FORMAT
 *    JSON) and the indexes it uses, and the size of the rows.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { randomUUID } from 'node:crypto'
import { createPool } from '@scoped/shared/db'
import type { Pool } from '@scoped/shared/db'
import type { UsageRequest } from '@scoped/agency-service/usage/usage-report'
import { rolledUntil, usageQuery, usageReport } from '@scoped/agency-service/usage/usage-report'
import { projectRoot } from '../../test/helpers/processes.js'
import { quantile } from './stats.js'
import type { UsageReplicaFigures } from './usage-scale-replica.js'

export const USAGE_FLUSH_TARGET_MS = 1_000
export const USAGE_MEMORY_TARGET_MIB = 64
export const USAGE_QUERY_P95_TARGET_MS = 300

const AGENCY_KEYS = 1_000
const DAYS = 30
const KEYS_PER_SUB_ACCOUNT = 20
/** Other agencies' keys, every one active every hour too: rows the agency's query must not read. */
const OTHER_AGENCIES = 50
const OTHER_KEYS_PER_AGENCY = 20

export interface QueryFigures {
  name: string
  granularity: UsageRequest['granularity']
  groupBy: UsageRequest['groupBy']
  /** Rows the statement returns, and the series × points of the report. */
  rows: number
  points: number
  p50Ms: number
  p95Ms: number
  maxMs: number
  /** Every index the plan reads (a partition's), with the index of the parent table it belongs to. */
  indexes: string[]
  usesIndex: boolean
  plan: string[]
}

export interface UsageScale {
  replica: UsageReplicaFigures
  seed: {
    agencyKeys: number
    days: number
    agencyRows: number
    otherRows: number
    seconds: number
    /** usage_hours over all its partitions, indexes included, and per row; rows per key per day of the agency. */
    hoursBytes: number
    bytesPerHourRow: number
    rowsPerKeyPerDay: number
    daysBytes: number
    /** The tenants' summaries (migration 025) of the same rows: hour rows, and bytes with indexes of hours and days. */
    summaryHourRows: number
    summaryHoursBytes: number
    summaryDaysBytes: number
  }
  runs: number
  queries: QueryFigures[]
}

const run = promisify(execFile)

async function replicaFigures(databaseUrl: string, keys: number): Promise<UsageReplicaFigures> {
  const { stdout } = await run(process.execPath, [...process.execArgv, '--expose-gc', 'scripts/bench/usage-scale-replica.ts', databaseUrl, String(keys)], {
    cwd: projectRoot,
    maxBuffer: 1 << 20,
    timeout: 30 * 60_000,
  })
  const line = stdout.trim().split('\n').pop()
  if (line === undefined || line === '') throw new Error('usage-scale-replica.ts printed nothing')
  return JSON.parse(line) as UsageReplicaFigures
}

/**
 * The rows of `keys` keys over `days` days, every hour: each key's main route
 * served (2xx), a second route on a third of the keys, a rate-limited answer
 * (4xx) on a tenth; sub-accounts of 20 keys. One INSERT … SELECT: the writer's
 * own path would take as long as the thirty days did.
 */
async function seedHours(pool: Pool, agencyId: string, keys: number, hours: { first: Date; last: Date }): Promise<number> {
  const { rowCount } = await pool.query(
    `INSERT INTO usage_hours (bucket, key_id, agency_id, sub_account_id, route, outcome, status_class, requests, latency)
     SELECT h, k.key_id, $1::uuid, k.sub_account_id, c.route, c.outcome, c.status_class, 28 + (k.i + hh) % 17,
            ARRAY[0, 0, 0, (k.i + hh) % 3, 4 + hh % 5, 10 + k.i % 7, 8, 4, 2, 0, (k.i + hh) % 17]::bigint[]
       FROM generate_series($3::timestamptz, $4::timestamptz, interval '1 hour') AS h
      CROSS JOIN LATERAL (SELECT extract(hour FROM h)::int AS hh) AS hour
      CROSS JOIN (SELECT i, md5($1::text || ':' || i)::uuid AS key_id, md5($1::text || ':sub:' || (i / ${KEYS_PER_SUB_ACCOUNT}))::uuid AS sub_account_id
                    FROM generate_series(0, $2::int - 1) AS i) AS k
      CROSS JOIN (VALUES (0, '/v1/agents', 'served', 2::smallint, 1), (1, '/v1/calls', 'served', 2::smallint, 3), (2, '/v1/agents', 'rate-limited', 4::smallint, 10))
                 AS c (n, route, outcome, status_class, every)
      WHERE k.i % c.every = 0`,
    [agencyId, keys, hours.first.toISOString(), hours.last.toISOString()],
  )
  return rowCount ?? 0
}

async function relationBytes(pool: Pool, table: string): Promise<number> {
  const { rows } = await pool.query<{ bytes: string }>('SELECT coalesce(sum(pg_total_relation_size(relid)), 0)::text AS bytes FROM pg_partition_tree($1)', [
    table,
  ])
  return Number(rows[0]!.bytes)
}

interface PlanNode {
  'Node Type'?: string
  'Index Name'?: string
  Plans?: PlanNode[]
}

function indexNames(node: PlanNode): string[] {
  return [...(node['Index Name'] === undefined ? [] : [node['Index Name']]), ...(node.Plans ?? []).flatMap(indexNames)]
}

/** The plan of the report's statement: its text, and the indexes it reads, each named with its parent table's index. */
async function planOf(pool: Pool, text: string, values: unknown[]): Promise<{ plan: string[]; indexes: string[] }> {
  const json = await pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${text}`, values)
  const names = [...new Set(indexNames(json.rows[0]!['QUERY PLAN'][0]!.Plan))]
  const parents = await pool.query<{ name: string; parent: string | null }>(
    `SELECT c.relname AS name, p.relname AS parent FROM unnest($1::text[]) AS n (name)
       JOIN pg_class c ON c.relname = n.name LEFT JOIN pg_inherits i ON i.inhrelid = c.oid LEFT JOIN pg_class p ON p.oid = i.inhparent`,
    [names],
  )
  const indexes = parents.rows.map((row) => (row.parent === null ? row.name : `${row.parent} (${row.name})`)).sort()
  const explained = await pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${text}`, values)
  return { plan: explained.rows.map((row) => row['QUERY PLAN']), indexes }
}

async function measureQuery(pool: Pool, agencyId: string, runs: number, name: string, request: UsageRequest): Promise<QueryFigures> {
  const owner = { agencyId }
  const { text, values } = usageQuery(owner, request, await rolledUntil(pool))
  const { plan, indexes } = await planOf(pool, text, values)
  const rows = (await pool.query(text, values)).rowCount ?? 0
  // Untimed: the statement planned once, the rows read into the cache, as for an agency that looks at its usage.
  for (let i = 0; i < 2; i++) await usageReport(pool, owner, request)
  const samples: number[] = []
  let points = 0
  for (let i = 0; i < runs; i++) {
    const started = performance.now()
    const report = await usageReport(pool, owner, request)
    samples.push(performance.now() - started)
    points = report.series.reduce((sum, series) => sum + series.points.length, 0)
  }
  samples.sort((a, b) => a - b)
  return {
    name,
    granularity: request.granularity,
    groupBy: request.groupBy,
    rows,
    points,
    p50Ms: quantile(samples, 0.5),
    p95Ms: quantile(samples, 0.95),
    maxMs: quantile(samples, 1),
    indexes,
    usesIndex: indexes.length > 0,
    plan,
  }
}

export async function usageScale(databaseUrl: string, keys: number, runs: number, progress: (text: string) => void): Promise<UsageScale> {
  progress(`usage scale: ${keys} keys counted in one minute by a replica (a process of its own), then one flush`)
  const replica = await replicaFigures(databaseUrl, keys)
  const pool = createPool(databaseUrl, { max: 1, applicationName: 'bench usage' })
  try {
    // The replica's rows go: the sizes below are of the seeded rows alone.
    await pool.query(
      `TRUNCATE usage_minutes, usage_hours, usage_days, usage_summary_minutes, usage_summary_hours, usage_summary_days,
                usage_agency_minutes, usage_agency_hours, usage_agency_days, usage_batches`,
    )
    const hourMs = 3_600_000
    const thisHour = Math.floor(Date.now() / hourMs) * hourMs
    const hours = { first: new Date(thisHour - DAYS * 24 * hourMs), last: new Date(thisHour - hourMs) }
    progress(`usage scale: seeding ${DAYS} days of hourly rows for an agency with ${AGENCY_KEYS} keys and ${OTHER_AGENCIES} other agencies`)
    const seedStarted = performance.now()
    await pool.query('SELECT usage_prepare($1, $2)', [hours.first.toISOString(), new Date(thisHour).toISOString()])
    const agencyId = randomUUID()
    const agencyRows = await seedHours(pool, agencyId, AGENCY_KEYS, hours)
    let otherRows = 0
    for (let a = 0; a < OTHER_AGENCIES; a++) otherRows += await seedHours(pool, randomUUID(), OTHER_KEYS_PER_AGENCY, hours)
    // Their day rows: the hours' sums, as the writer keeps them.
    await pool.query(
      `INSERT INTO usage_days (bucket, key_id, agency_id, sub_account_id, route, outcome, status_class, requests, latency)
       SELECT date_trunc('day', bucket, 'UTC'), key_id, agency_id, sub_account_id, route, outcome, status_class, sum(requests), usage_histogram_sum(latency)
         FROM usage_hours WHERE bucket >= $1 GROUP BY 1, 2, 3, 4, 5, 6, 7`,
      [hours.first.toISOString()],
    )
    // The summaries without the key, as the writer keeps them beside the per-key rows.
    for (const period of ['hours', 'days'])
      await pool.query(
        `INSERT INTO usage_summary_${period} (bucket, agency_id, sub_account_id, route, outcome, status_class, requests, latency)
         SELECT bucket, agency_id, sub_account_id, route, outcome, status_class, sum(requests), usage_histogram_sum(latency)
           FROM usage_${period} WHERE bucket >= $1 GROUP BY 1, 2, 3, 4, 5, 6`,
        [hours.first.toISOString()],
      )
    // And the whole agencies' (migration 026), summed once more without the sub-account.
    for (const period of ['hours', 'days'])
      await pool.query(
        `INSERT INTO usage_agency_${period} (bucket, agency_id, route, outcome, status_class, requests, latency)
         SELECT bucket, agency_id, route, outcome, status_class, sum(requests), usage_histogram_sum(latency)
           FROM usage_summary_${period} WHERE bucket >= $1 GROUP BY 1, 2, 3, 4, 5`,
        [hours.first.toISOString()],
      )
    // What tables in service have had: their vacuum and statistics.
    await pool.query('VACUUM (ANALYZE) usage_hours, usage_days, usage_summary_hours, usage_summary_days, usage_agency_hours, usage_agency_days')
    const seconds = (performance.now() - seedStarted) / 1000
    const hoursBytes = await relationBytes(pool, 'usage_hours')
    const hourRows = Number((await pool.query<{ n: string }>('SELECT count(*)::text AS n FROM usage_hours')).rows[0]!.n)
    const seed = {
      agencyKeys: AGENCY_KEYS,
      days: DAYS,
      agencyRows,
      otherRows,
      seconds,
      hoursBytes,
      bytesPerHourRow: hoursBytes / hourRows,
      rowsPerKeyPerDay: agencyRows / AGENCY_KEYS / DAYS,
      daysBytes: await relationBytes(pool, 'usage_days'),
      summaryHourRows: Number((await pool.query<{ n: string }>('SELECT count(*)::text AS n FROM usage_summary_hours')).rows[0]!.n),
      summaryHoursBytes: await relationBytes(pool, 'usage_summary_hours'),
      summaryDaysBytes: await relationBytes(pool, 'usage_summary_days'),
    }
    const to = new Date()
    const from = new Date(to.getTime() - DAYS * 86_400_000)
    progress(`usage scale: ${runs} reports of the agency's ${DAYS} days, by hour, by hour and sub-account, then by key and day`)
    const queries = [
      await measureQuery(pool, agencyId, runs, `${DAYS} days by hour, default grouping`, { from, to, granularity: 'hour', groupBy: null }),
      await measureQuery(pool, agencyId, runs, `${DAYS} days by hour, grouped by sub-account`, { from, to, granularity: 'hour', groupBy: 'sub-account' }),
      await measureQuery(pool, agencyId, runs, `${DAYS} days by day, grouped by key`, { from, to, granularity: 'day', groupBy: 'key' }),
    ]
    return { replica, seed, runs, queries }
  } finally {
    await pool.end()
  }
}
