/**
 * A replica's minute counts turned into the rows of one batch: one row per
 * key, minute, route, outcome and status class. Their sums per sub-account and
 * per agency are made by the writer (usage-store.ts), and their hours and days
 * by the rollup once the hour is over (migration 026).
 */
import type { UsageRow } from '@scoped/shared/usage-store'
import type { Route } from '../route-map.js'
import type { MinuteCounts } from './usage-counts.js'
import { decodeCell } from './usage-counts.js'

/** The route a row names: its prefix, or `none` for a key's request that matched no route. */
export const NO_ROUTE = 'none'

export function batchRows({ minutes, slab }: MinuteCounts, routes: readonly Route[]): UsageRow[] {
  const rows: UsageRow[] = []
  for (const [minute, keys] of minutes) {
    for (const [keyId, { tenant, cells }] of keys) {
      for (let i = 0; i < cells.length; i += 2) {
        const { routeIndex, outcome, statusClass } = decodeCell(cells[i]!)
        const slot = cells[i + 1]!
        rows.push({
          bucket: minute,
          keyId,
          agencyId: tenant.agencyId,
          subAccountId: tenant.subAccountId,
          route: routeIndex === null ? NO_ROUTE : (routes[routeIndex]?.prefix ?? NO_ROUTE),
          outcome,
          statusClass,
          requests: slab.requests(slot),
          latency: slab.latency(slot),
        })
      }
    }
  }
  return rows
}
