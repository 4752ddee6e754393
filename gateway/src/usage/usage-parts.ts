/**
 * A batch cut into parts that are written at the same time, each on a
 * connection and in a transaction of its own, so that a busy minute's flush
 * uses several of Postgres's cores rather than one. Parts are cut by agency:
 * every row a part adds to (a key's, a sub-account's, an agency's sum, its
 * request log and that log's cap) belongs to that part alone, so parts never
 * wait on each other's row locks, and each is idempotent on its own sequence.
 */
import type { RequestLogRow } from '@scoped/shared/request-log-store'
import type { UsageRow } from '@scoped/shared/usage-store'

export interface UsagePart {
  rows: UsageRow[]
  log: RequestLogRow[]
}

/** Fewer rows than this per part are not worth a connection of their own: a quiet flush stays one transaction. */
export const ROWS_PER_PART = 4_000

/** How many parts `rows` make, up to `writers`. */
export function partCount(rows: number, writers: number): number {
  return Math.max(1, Math.min(writers, Math.ceil(rows / ROWS_PER_PART)))
}

/**
 * `rows` and `log` in up to `writers` parts, each agency's rows in one part, the parts as even as whole agencies
 * allow (largest agencies first, each to the part with fewest rows so far). An agency that has only log rows goes
 * with the first part. Never an empty part.
 */
export function splitByAgency(rows: UsageRow[], log: RequestLogRow[], writers: number): UsagePart[] {
  const count = partCount(rows.length, writers)
  if (count === 1) return rows.length === 0 && log.length === 0 ? [] : [{ rows, log }]
  const byAgency = new Map<string, UsageRow[]>()
  for (const row of rows) {
    const agencyRows = byAgency.get(row.agencyId)
    if (agencyRows === undefined) byAgency.set(row.agencyId, [row])
    else agencyRows.push(row)
  }
  const parts: UsagePart[] = Array.from({ length: count }, () => ({ rows: [], log: [] }))
  const partOf = new Map<string, UsagePart>()
  for (const [agencyId, agencyRows] of [...byAgency].sort((a, b) => b[1].length - a[1].length)) {
    const lightest = parts.reduce((least, part) => (part.rows.length < least.rows.length ? part : least))
    for (const row of agencyRows) lightest.rows.push(row)
    partOf.set(agencyId, lightest)
  }
  for (const entry of log) (partOf.get(entry.agencyId) ?? parts[0]!).log.push(entry)
  return parts.filter((part) => part.rows.length > 0 || part.log.length > 0)
}
