/**
 * Writing the request log (migration 018): a batch of rows, in the
 * transaction of a usage batch (usage-store.ts), then each agency of the
 * batch trimmed to its newest `cap` rows; and its age bound.
 */
import type { Pool, PoolClient } from './db.js'

export interface RequestLogRow {
  /** Epoch milliseconds of the answer. */
  at: number
  requestId: string
  agencyId: string
  keyId: string
  subAccountId: string | null
  method: string
  /** The normalized path, masked, without its query. */
  path: string
  status: number
  outcome: string
  durationMs: number
  clientAddress: string | null
}

export async function writeRequestLog(client: PoolClient, rows: readonly RequestLogRow[], cap: number): Promise<void> {
  if (rows.length === 0) return
  let first = Infinity
  let last = -Infinity
  for (const row of rows) {
    first = Math.min(first, row.at)
    last = Math.max(last, row.at)
  }
  await client.query('SELECT request_log_prepare($1, $2)', [new Date(first).toISOString(), new Date(last).toISOString()])
  await client.query(
    `INSERT INTO request_log (at, request_id, agency_id, key_id, sub_account_id, method, path, status, outcome, duration_ms, client_address)
     SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::uuid[], $4::uuid[], $5::uuid[], $6::text[], $7::text[], $8::smallint[], $9::text[],
                          $10::float8[], $11::text[])`,
    [
      rows.map((row) => new Date(row.at).toISOString()),
      rows.map((row) => row.requestId),
      rows.map((row) => row.agencyId),
      rows.map((row) => row.keyId),
      rows.map((row) => row.subAccountId),
      rows.map((row) => row.method),
      rows.map((row) => row.path),
      rows.map((row) => row.status),
      rows.map((row) => row.outcome),
      rows.map((row) => row.durationMs),
      rows.map((row) => row.clientAddress),
    ],
  )
  await client.query('SELECT request_log_trim($1::uuid[], $2)', [[...new Set(rows.map((row) => row.agencyId))], cap])
}

/** Drops the day partitions older than `maxAgeSeconds`; answers how many went. */
export async function expireRequestLog(pool: Pool, maxAgeSeconds: number): Promise<number> {
  const { rows } = await pool.query<{ dropped: number }>('SELECT request_log_expire(make_interval(secs => $1)) AS dropped', [maxAgeSeconds])
  return rows[0]?.dropped ?? 0
}
