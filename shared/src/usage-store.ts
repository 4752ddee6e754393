/**
 * Writing usage (migrations 017, 025): one batch of a gateway replica's counts,
 * added to the minute, hour and day rows in one transaction, per key and summed
 * without the key (the tenants' summaries the reports read), with the batch's
 * replica id and sequence recorded in the same transaction. A batch already
 * recorded is not applied again, so a replica that lost the answer to its
 * commit retries the same batch without counting anything twice.
 */
import type { Pool, PoolClient } from './db.js'
import { inTransaction, sqlIdentifier } from './db.js'

/** One row's addition: the counts of one key, bucket, route, outcome and status class. */
export interface UsageRow {
  /** The bucket's start, epoch milliseconds. */
  bucket: number
  keyId: string
  agencyId: string
  subAccountId: string | null
  route: string
  outcome: string
  /** The status code's hundreds (1–5). */
  statusClass: number
  requests: number
  latency: ArrayLike<number>
}

export interface UsageBatch {
  replicaId: string
  seq: number
  /** Rows of usage_minutes, also summed to their hour and (UTC) day into usage_hours and usage_days in the same statement. */
  minutes: readonly UsageRow[]
  /** Rows added to usage_hours and usage_days as they are, besides the minutes' sums (a back-fill, or rows older than minutes are kept). */
  hours?: readonly UsageRow[]
  days?: readonly UsageRow[]
  /** Extra work in the same transaction (the request log's rows: request-log-store.ts). */
  alsoWrite?: (client: PoolClient) => Promise<void>
  /**
   * Postgres cancels any statement of the batch that runs longer: a writer that gave up waiting must not leave
   * its statement holding a connection and row locks while its retry queues behind it.
   */
  statementTimeoutMs?: number
}

export const USAGE_TABLES = { minute: 'usage_minutes', hour: 'usage_hours', day: 'usage_days' } as const
/** The same counts without the key dimension (migration 025), written by the same statements. */
export const USAGE_SUMMARY_TABLES = { minute: 'usage_summary_minutes', hour: 'usage_summary_hours', day: 'usage_summary_days' } as const

const COLUMNS = 'bucket, key_id, agency_id, sub_account_id, route, outcome, status_class, requests, latency'
const CONFLICT = `ON CONFLICT (key_id, bucket, route, outcome, status_class)
  DO UPDATE SET requests = u.requests + excluded.requests, latency = usage_add_histograms(u.latency, excluded.latency)`
const SUMMARY_COLUMNS = 'bucket, agency_id, sub_account_id, route, outcome, status_class, requests, latency'
const SUMMARY_CONFLICT = `ON CONFLICT (agency_id, bucket, sub_account_id, route, outcome, status_class)
  DO UPDATE SET requests = u.requests + excluded.requests, latency = usage_add_histograms(u.latency, excluded.latency)`
/** A set of per-key rows `source` summed without the key, per `bucket` (an expression). */
function summed(source: string, bucket = 'bucket'): string {
  return `SELECT ${bucket} AS bucket, agency_id, sub_account_id, route, outcome, status_class, sum(requests) AS requests, usage_histogram_sum(latency) AS latency
    FROM ${source} GROUP BY 1, 2, 3, 4, 5, 6`
}
/** The rows of a batch as parameters $1–$9, one array per column. */
const ROWS = `SELECT r.bucket, r.key_id, r.agency_id, r.sub_account_id, r.route, r.outcome, r.status_class, r.requests, r.latency::bigint[] AS latency
  FROM unnest($1::timestamptz[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[], $6::text[], $7::smallint[], $8::bigint[], $9::text[])
       AS r (bucket, key_id, agency_id, sub_account_id, route, outcome, status_class, requests, latency)`

/** A histogram as an array literal, without its trailing zeros (a missing element counts 0 everywhere histograms are read or added). */
function histogramText(latency: ArrayLike<number>): string {
  let end = latency.length
  while (end > 1 && latency[end - 1] === 0) end--
  let text = '{'
  for (let i = 0; i < end; i++) text += i === 0 ? String(latency[i]) : `,${latency[i]}`
  return `${text}}`
}

function columns(rows: readonly UsageRow[]): unknown[] {
  return [
    rows.map((row) => new Date(row.bucket).toISOString()),
    rows.map((row) => row.keyId),
    rows.map((row) => row.agencyId),
    rows.map((row) => row.subAccountId),
    rows.map((row) => row.route),
    rows.map((row) => row.outcome),
    rows.map((row) => row.statusClass),
    rows.map((row) => row.requests),
    rows.map((row) => histogramText(row.latency)),
  ]
}

/**
 * One statement for a batch's minute rows, whatever their number: added to
 * usage_minutes, and summed to the hour and the day into usage_hours and
 * usage_days; the same rows summed without the key go to the three summary
 * tables. When every row is of one minute (the usual batch of a few seconds),
 * each row is already its own hour's and day's sum.
 */
function minutesSql(oneMinute: boolean): string {
  const rolledUp = (period: 'hour' | 'day'): string =>
    oneMinute
      ? `SELECT date_trunc('${period}', bucket, 'UTC'), key_id, agency_id, sub_account_id, route, outcome, status_class, requests, latency FROM r`
      : `SELECT date_trunc('${period}', bucket, 'UTC'), key_id, agency_id, sub_account_id, route, outcome, status_class, sum(requests), usage_histogram_sum(latency)
           FROM r GROUP BY 1, 2, 3, 4, 5, 6, 7`
  const summaryRolledUp = (period: 'hour' | 'day'): string =>
    oneMinute
      ? `SELECT date_trunc('${period}', bucket, 'UTC'), agency_id, sub_account_id, route, outcome, status_class, requests, latency FROM s`
      : summed('s', `date_trunc('${period}', bucket, 'UTC')`)
  return `WITH r AS MATERIALIZED (${ROWS}),
    s AS MATERIALIZED (${summed('r')}),
    minutes AS (INSERT INTO usage_minutes AS u (${COLUMNS}) SELECT ${COLUMNS} FROM r ${CONFLICT}),
    hours AS (INSERT INTO usage_hours AS u (${COLUMNS}) ${rolledUp('hour')} ${CONFLICT}),
    days AS (INSERT INTO usage_days AS u (${COLUMNS}) ${rolledUp('day')} ${CONFLICT}),
    summary_minutes AS (INSERT INTO usage_summary_minutes AS u (${SUMMARY_COLUMNS}) SELECT ${SUMMARY_COLUMNS} FROM s ${SUMMARY_CONFLICT}),
    summary_hours AS (INSERT INTO usage_summary_hours AS u (${SUMMARY_COLUMNS}) ${summaryRolledUp('hour')} ${SUMMARY_CONFLICT})
    INSERT INTO usage_summary_days AS u (${SUMMARY_COLUMNS}) ${summaryRolledUp('day')} ${SUMMARY_CONFLICT}`
}

async function addMinutes(client: PoolClient, rows: readonly UsageRow[]): Promise<void> {
  if (rows.length === 0) return
  const oneMinute = rows.every((row) => row.bucket === rows[0]!.bucket)
  await client.query(minutesSql(oneMinute), columns(rows))
}

/** Extra hour or day rows, added as they are per key and summed into the summary of that period in the same statement. */
async function addRows(client: PoolClient, period: 'hour' | 'day', rows: readonly UsageRow[]): Promise<void> {
  if (rows.length === 0) return
  await client.query(
    `WITH r AS MATERIALIZED (${ROWS}),
       keys AS (INSERT INTO ${sqlIdentifier(USAGE_TABLES[period])} AS u (${COLUMNS}) SELECT ${COLUMNS} FROM r ${CONFLICT})
     INSERT INTO ${sqlIdentifier(USAGE_SUMMARY_TABLES[period])} AS u (${SUMMARY_COLUMNS}) ${summed('r')} ${SUMMARY_CONFLICT}`,
    columns(rows),
  )
}

function bucketRange(batch: UsageBatch): [number, number] | null {
  let first = Infinity
  let last = -Infinity
  for (const rows of [batch.minutes, batch.hours ?? [], batch.days ?? []]) {
    for (const row of rows) {
      if (row.bucket < first) first = row.bucket
      if (row.bucket > last) last = row.bucket
    }
  }
  return first === Infinity ? null : [first, last]
}

/** Applies a batch once: 'applied', or 'duplicate' when this replica's batch of that sequence was applied before. */
export async function writeUsageBatch(pool: Pool, batch: UsageBatch): Promise<'applied' | 'duplicate'> {
  return inTransaction(pool, async (client) => {
    if (batch.statementTimeoutMs !== undefined)
      await client.query("SELECT set_config('statement_timeout', $1, true)", [`${Math.max(1, Math.ceil(batch.statementTimeoutMs))}ms`])
    const recorded = await client.query('INSERT INTO usage_batches (replica_id, seq) VALUES ($1, $2) ON CONFLICT DO NOTHING', [batch.replicaId, batch.seq])
    if (recorded.rowCount === 0) return 'duplicate'
    const range = bucketRange(batch)
    if (range !== null) await client.query('SELECT usage_prepare($1, $2)', [new Date(range[0]).toISOString(), new Date(range[1]).toISOString()])
    await addMinutes(client, batch.minutes)
    await addRows(client, 'hour', batch.hours ?? [])
    await addRows(client, 'day', batch.days ?? [])
    if (batch.alsoWrite !== undefined) await batch.alsoWrite(client)
    return 'applied'
  })
}

/** How long each kind of row is kept, in seconds. */
export interface UsageRetention {
  minutes: number
  hours: number
  days: number
}

/** Drops the partitions past their retention (whole tables, never a scan); answers how many went. */
export async function expireUsage(pool: Pool, retention: UsageRetention): Promise<number> {
  const { rows } = await pool.query<{ dropped: number }>(
    'SELECT usage_expire(make_interval(secs => $1), make_interval(secs => $2), make_interval(secs => $3)) AS dropped',
    [retention.minutes, retention.hours, retention.days],
  )
  return rows[0]?.dropped ?? 0
}
