/**
 * Writing usage (migrations 017, 025, 026): one batch of a gateway replica's
 * counts, added to the minute rows in one transaction, per key and summed
 * without the key (per sub-account) and without the sub-account (per agency),
 * with the batch's replica id and sequence recorded in the same transaction. A
 * batch already recorded is not applied again, so a replica that lost the
 * answer to its commit retries the same batch without counting anything twice.
 * Hours and days are rolled up from the minutes once they are over
 * (rollUpUsage), by one replica at a time.
 */
import type { Pool, PoolClient } from './db.js'
import { inTransaction, sqlIdentifier } from './db.js'
import type { UsageRow } from './usage-columns.js'
import { usageColumns } from './usage-columns.js'

export type { UsageRow } from './usage-columns.js'

export interface UsageBatch {
  replicaId: string
  seq: number
  /**
   * Rows of usage_minutes, and their sums per sub-account and per agency; their hours and days are rolled up later
   * (rollUpUsage), or added to now when the rollup has passed them.
   */
  minutes: readonly UsageRow[]
  /** Rows added to the hour and day rows as they are (a back-fill of periods the rollup has passed; tests seed with it). */
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
/** The same counts without the sub-account either (migration 026): a whole agency's. */
export const USAGE_AGENCY_TABLES = { minute: 'usage_agency_minutes', hour: 'usage_agency_hours', day: 'usage_agency_days' } as const

const COLUMNS = 'bucket, key_id, agency_id, sub_account_id, route, outcome, status_class, requests, latency'
const ADD = 'DO UPDATE SET requests = u.requests + excluded.requests, latency = usage_add_histograms(u.latency, excluded.latency)'
const CONFLICT = `ON CONFLICT (key_id, bucket, route, outcome, status_class) ${ADD}`
/** The per-key minutes' primary key leads with the agency and the bucket (migration 026). */
const MINUTE_CONFLICT = `ON CONFLICT (agency_id, bucket, key_id, route, outcome, status_class) ${ADD}`
const SUMMARY_COLUMNS = 'bucket, agency_id, sub_account_id, route, outcome, status_class, requests, latency'
const SUMMARY_CONFLICT = `ON CONFLICT (agency_id, bucket, sub_account_id, route, outcome, status_class) ${ADD}`
const AGENCY_COLUMNS = 'bucket, agency_id, route, outcome, status_class, requests, latency'
const AGENCY_CONFLICT = `ON CONFLICT (agency_id, bucket, route, outcome, status_class) ${ADD}`
/** The rows of a batch as parameters $1–$9, one array per column. */
const ROWS = `SELECT r.bucket, r.key_id, r.agency_id, r.sub_account_id, r.route, r.outcome, r.status_class, r.requests, r.latency::bigint[] AS latency
  FROM unnest($1::timestamptz[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[], $6::text[], $7::smallint[], $8::bigint[], $9::text[])
       AS r (bucket, key_id, agency_id, sub_account_id, route, outcome, status_class, requests, latency)`
/** The same rows summed without the key, as parameters $10–$17. */
const SUMMARY_ROWS = `SELECT s.bucket, s.agency_id, s.sub_account_id, s.route, s.outcome, s.status_class, s.requests, s.latency::bigint[] AS latency
  FROM unnest($10::timestamptz[], $11::uuid[], $12::uuid[], $13::text[], $14::text[], $15::smallint[], $16::bigint[], $17::text[])
       AS s (bucket, agency_id, sub_account_id, route, outcome, status_class, requests, latency)`
/** And without the sub-account, as parameters $18–$24. */
const AGENCY_ROWS = `SELECT a.bucket, a.agency_id, a.route, a.outcome, a.status_class, a.requests, a.latency::bigint[] AS latency
  FROM unnest($18::timestamptz[], $19::uuid[], $20::text[], $21::text[], $22::smallint[], $23::bigint[], $24::text[])
       AS a (bucket, agency_id, route, outcome, status_class, requests, latency)`

/** The three kinds of counts (migration 026's usage_kinds): per key, per sub-account (the summaries) and per agency. */
const KINDS = [
  { table: USAGE_TABLES, columns: COLUMNS, conflict: CONFLICT, minuteConflict: MINUTE_CONFLICT, from: 'r' },
  { table: USAGE_SUMMARY_TABLES, columns: SUMMARY_COLUMNS, conflict: SUMMARY_CONFLICT, minuteConflict: SUMMARY_CONFLICT, from: 's' },
  { table: USAGE_AGENCY_TABLES, columns: AGENCY_COLUMNS, conflict: AGENCY_CONFLICT, minuteConflict: AGENCY_CONFLICT, from: 'a' },
] as const

/** The rows of a batch (`r`), summed without the key (`s`) and without the sub-account (`a`), per bucket. */
const SETS = `r AS MATERIALIZED (${ROWS}), s AS MATERIALIZED (${SUMMARY_ROWS}), a AS MATERIALIZED (${AGENCY_ROWS})`

/** `set`'s rows summed to `period` whose period the rollup has passed (migration 026): only rows that came late. */
function late(columns: string, set: string, period: 'hour' | 'day'): string {
  const dims = columns.replace(/^bucket, /, '').replace(/, requests, latency$/, '')
  const until = period === 'hour' ? 'w.rolled_until' : "date_trunc('day', w.rolled_until, 'UTC')"
  return `SELECT date_trunc('${period}', bucket, 'UTC'), ${dims}, sum(requests), usage_histogram_sum(latency)
            FROM ${set}, w WHERE date_trunc('${period}', bucket, 'UTC') < ${until} GROUP BY 1, ${dims}`
}

/**
 * One statement for a batch's minute rows, whatever their number: added to the
 * minute rows of each kind (per key, per sub-account, per agency). The hours
 * and days are rolled up from the minutes once they are over (usage_roll_up),
 * except for rows of an hour or a day already rolled: those are added to its
 * row here too. The caller holds the batch's hour and day locks, so the
 * rollup cannot pass them between this statement's reading of rolled_until
 * and its commit.
 */
const MINUTES_SQL = `WITH ${SETS},
    w AS (SELECT rolled_until FROM usage_rollup),
    ${KINDS.map(
      (kind, i) => `minutes_${i} AS (INSERT INTO ${kind.table.minute} AS u (${kind.columns}) SELECT ${kind.columns} FROM ${kind.from} ${kind.minuteConflict}),
    hours_${i} AS (INSERT INTO ${kind.table.hour} AS u (${kind.columns}) ${late(kind.columns, kind.from, 'hour')} ${kind.conflict}),
    days_${i} AS (INSERT INTO ${kind.table.day} AS u (${kind.columns}) ${late(kind.columns, kind.from, 'day')} ${kind.conflict})`,
    ).join(',\n    ')}
  SELECT 1`

async function addMinutes(client: PoolClient, rows: readonly UsageRow[]): Promise<void> {
  if (rows.length === 0) return
  await client.query(MINUTES_SQL, usageColumns(rows))
}

/**
 * Extra hour or day rows, added as they are per key and summed into the summaries of that period in the same
 * statement: a back-fill of periods the rollup has passed (a later rollup of the period would replace them).
 */
async function addRows(client: PoolClient, period: 'hour' | 'day', rows: readonly UsageRow[]): Promise<void> {
  if (rows.length === 0) return
  await client.query(
    `WITH ${SETS},
       ${KINDS.map((kind, i) => `rows_${i} AS (INSERT INTO ${sqlIdentifier(kind.table[period])} AS u (${kind.columns}) SELECT ${kind.columns} FROM ${kind.from} ${kind.conflict})`).join(',\n       ')}
     SELECT 1`,
    usageColumns(rows),
  )
}

/** Every bucket of a batch, for its locks (usage_hold takes one per distinct day and hour). */
function bucketsOf(batch: UsageBatch): string[] {
  const buckets = new Set<number>()
  for (const rows of [batch.minutes, batch.hours ?? [], batch.days ?? []]) for (const row of rows) buckets.add(row.bucket)
  return [...buckets].map((bucket) => new Date(bucket).toISOString())
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
    if (range !== null) {
      await client.query('SELECT usage_prepare($1, $2)', [new Date(range[0]).toISOString(), new Date(range[1]).toISOString()])
      await client.query('SELECT usage_hold($1)', [bucketsOf(batch)])
    }
    await addMinutes(client, batch.minutes)
    await addRows(client, 'hour', batch.hours ?? [])
    await addRows(client, 'day', batch.days ?? [])
    if (batch.alsoWrite !== undefined) await batch.alsoWrite(client)
    return 'applied'
  })
}

/** The longest an hour's rollup may take: past it the hour is given up and tried again at the next turn. */
const ROLLUP_TIMEOUT = '30min'

/**
 * One hour rolled up, in a transaction of its own that COMMIT ends: a connection closed before that (a replica
 * that stops) leaves nothing done, whenever the function itself returns.
 */
async function rollUpHour(client: PoolClient, until: Date): Promise<boolean> {
  await client.query('BEGIN')
  try {
    // A busy hour takes a while to sum; a server-wide statement timeout meant for requests must not stop it for good.
    await client.query("SELECT set_config('statement_timeout', $1, true)", [ROLLUP_TIMEOUT])
    const { rows } = await client.query<{ rolled: boolean }>('SELECT usage_roll_up($1) AS rolled', [until.toISOString()])
    await client.query('COMMIT')
    return rows[0]?.rolled === true
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined)
    throw error
  }
}

/**
 * Rolls up every hour that ended by `until`, one transaction an hour, at most `maxHours` of them (a replica that
 * comes back after a long outage catches up over several calls); answers how many it rolled. While another
 * replica rolls, it answers 0 at once.
 */
export async function rollUpUsage(db: Pool | PoolClient, until: Date, maxHours: number): Promise<number> {
  const client = 'release' in db ? db : await db.connect()
  try {
    let rolled = 0
    while (rolled < maxHours && (await rollUpHour(client, until))) rolled++
    return rolled
  } finally {
    if (client !== db) client.release()
  }
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
