/**
 * A replica's minute counts turned into the rows of one batch: the minute
 * rows as counted, and the same counts summed to their hour and their (UTC)
 * day, so the three tables are added to in one transaction and never
 * disagree.
 */
import type { UsageRow } from '@scoped/shared/usage-store'
import type { Route } from '../route-map.js'
import type { MinuteCounts } from './usage-counts.js'
import { decodeCell } from './usage-counts.js'

const HOUR_MS = 3_600_000
const DAY_MS = 86_400_000

/** The route a row names: its prefix, or `none` for a key's request that matched no route. */
export const NO_ROUTE = 'none'

export interface BatchRows {
  minutes: UsageRow[]
  hours: UsageRow[]
  days: UsageRow[]
  /** Answers counted in the batch. */
  requests: number
}

function addTo(sums: Map<string, UsageRow>, row: UsageRow, bucket: number): void {
  const id = `${bucket}|${row.keyId}|${row.route}|${row.outcome}|${row.statusClass}`
  const sum = sums.get(id)
  if (sum === undefined) {
    sums.set(id, { ...row, bucket, latency: Array.from(row.latency) })
    return
  }
  sum.requests += row.requests
  const latency = sum.latency as number[]
  for (let i = 0; i < row.latency.length; i++) latency[i]! += row.latency[i]!
}

export function batchRows(minutes: MinuteCounts, routes: readonly Route[]): BatchRows {
  const rows: BatchRows = { minutes: [], hours: [], days: [], requests: 0 }
  const hours = new Map<string, UsageRow>()
  const days = new Map<string, UsageRow>()
  for (const [minute, keys] of minutes) {
    for (const [keyId, { tenant, cells }] of keys) {
      for (const [code, cell] of cells) {
        const { routeIndex, outcome, statusClass } = decodeCell(code)
        const row: UsageRow = {
          bucket: minute,
          keyId,
          agencyId: tenant.agencyId,
          subAccountId: tenant.subAccountId,
          route: routeIndex === null ? NO_ROUTE : (routes[routeIndex]?.prefix ?? NO_ROUTE),
          outcome,
          statusClass,
          requests: cell.requests,
          latency: cell.latency,
        }
        rows.minutes.push(row)
        rows.requests += cell.requests
        addTo(hours, row, minute - (minute % HOUR_MS))
        addTo(days, row, minute - (minute % DAY_MS))
      }
    }
  }
  rows.hours = [...hours.values()]
  rows.days = [...days.values()]
  return rows
}
