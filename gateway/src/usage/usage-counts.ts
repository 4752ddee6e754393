/**
 * A replica's usage counts in memory: for each minute, each key, and each
 * (route, outcome, status class) of that key, how many answers and their
 * latency histogram. Counting is a few map lookups and additions, no I/O and
 * no lock; a cell is allocated the first time a key meets it in a minute.
 * The number of cells is bounded (the flusher counts those it holds too):
 * past the bound a count is dropped and said (`dropped`), never silently lost.
 */
import { LATENCY_BUCKETS, latencyBucket } from '@scoped/shared/usage'
import type { UsageOutcome } from '@scoped/shared/usage'
import { usageOutcomes } from '@scoped/shared/usage'
import type { Tenant } from '@scoped/shared/tenant-signature'

const OUTCOME_INDEX = new Map<UsageOutcome, number>(usageOutcomes.map((outcome, index) => [outcome, index]))
/** Cell codes: route index + 1 (0: no route), outcome, status class (1–5), packed in one number. */
const ROUTES_PER_CODE = 1
const CLASSES = 8

export interface UsageCell {
  requests: number
  latency: Uint32Array
}

/** One key's counts in one minute. */
export interface KeyMinute {
  readonly tenant: Tenant
  /** cell code → counts */
  readonly cells: Map<number, UsageCell>
}

/** minute (epoch ms of its start) → key id → its counts */
export type MinuteCounts = Map<number, Map<string, KeyMinute>>

export function cellCode(routeIndex: number | null, outcome: UsageOutcome, statusClass: number): number {
  const route = routeIndex === null ? 0 : routeIndex + ROUTES_PER_CODE
  return (route * usageOutcomes.length + OUTCOME_INDEX.get(outcome)!) * CLASSES + statusClass
}

export function decodeCell(code: number): { routeIndex: number | null; outcome: UsageOutcome; statusClass: number } {
  const statusClass = code % CLASSES
  const rest = (code - statusClass) / CLASSES
  const outcome = usageOutcomes[rest % usageOutcomes.length]!
  const route = Math.floor(rest / usageOutcomes.length)
  return { routeIndex: route === 0 ? null : route - ROUTES_PER_CODE, outcome, statusClass }
}

export class UsageCounts {
  private minutes: MinuteCounts = new Map()
  private cellCount = 0
  /** Counts dropped since the last take(), because the bound was reached. */
  dropped = 0

  /** `held`: how many cells are held elsewhere (a batch waiting to be written), counted against `maxCells`. */
  constructor(
    private readonly maxCells: number,
    private readonly held: () => number = () => 0,
  ) {}

  get cells(): number {
    return this.cellCount
  }

  count(nowMs: number, tenant: Tenant, routeIndex: number | null, outcome: UsageOutcome, status: number, ms: number): void {
    const minute = nowMs - (nowMs % 60_000)
    let keys = this.minutes.get(minute)
    if (keys === undefined) {
      keys = new Map()
      this.minutes.set(minute, keys)
    }
    let key = keys.get(tenant.keyId)
    if (key === undefined) {
      key = { tenant, cells: new Map() }
      keys.set(tenant.keyId, key)
    }
    const code = cellCode(routeIndex, outcome, Math.min(Math.max(Math.floor(status / 100), 1), 5))
    let cell = key.cells.get(code)
    if (cell === undefined) {
      if (this.cellCount + this.held() >= this.maxCells) {
        this.dropped++
        return
      }
      cell = { requests: 0, latency: new Uint32Array(LATENCY_BUCKETS) }
      key.cells.set(code, cell)
      this.cellCount++
    }
    cell.requests++
    cell.latency[latencyBucket(ms)]!++
  }

  /** What is counted so far, left in place. */
  peek(): MinuteCounts {
    return this.minutes
  }

  /** Everything counted so far, handed over; counting starts again empty. */
  take(): { minutes: MinuteCounts; cells: number; dropped: number } {
    const taken = { minutes: this.minutes, cells: this.cellCount, dropped: this.dropped }
    this.minutes = new Map()
    this.cellCount = 0
    this.dropped = 0
    return taken
  }
}
