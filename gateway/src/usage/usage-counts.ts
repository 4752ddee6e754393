/**
 * A replica's usage counts in memory: for each minute, each key, and each
 * (route, outcome, status class) of that key, how many answers and their
 * latency histogram. Counting is a few map lookups and additions, no I/O and
 * no lock; a cell is allocated the first time a key meets it in a minute.
 * The number of cells is bounded (the flusher counts those it holds too):
 * past the bound a count is dropped and said (`dropped`), never silently lost.
 *
 * The layout is tight because a replica may see a hundred thousand keys in a
 * minute: a key's cells are pairs in one small array (a key meets few cells,
 * so a scan beats a Map), and every cell's figures are a fixed run of words in
 * large shared typed arrays (CellSlab), not an object and a typed array each.
 */
import { LATENCY_BUCKETS, latencyBucket } from '@scoped/shared/usage'
import type { UsageOutcome } from '@scoped/shared/usage'
import { usageOutcomes } from '@scoped/shared/usage'
import type { Tenant } from '@scoped/shared/tenant-signature'

const OUTCOME_INDEX = new Map<UsageOutcome, number>(usageOutcomes.map((outcome, index) => [outcome, index]))
/** Cell codes: route index + 1 (0: no route), outcome, status class (1–5), packed in one number. */
const ROUTES_PER_CODE = 1
const CLASSES = 8

/** A cell's words in the slab: its requests, then its latency histogram. */
export const CELL_WORDS = 1 + LATENCY_BUCKETS
/** Cells per chunk of the slab: chunks of about 600 KiB, so a quiet replica holds one and a busy one grows in steps. */
const CHUNK_CELLS = 4096

/** The figures of every cell of a batch, CELL_WORDS uint32 words per cell, grown a chunk at a time. */
export class CellSlab {
  private readonly chunks: Uint32Array[] = []
  private used = 0

  /** A new cell, all zeros: its slot. */
  allocate(): number {
    if (this.used === this.chunks.length * CHUNK_CELLS) this.chunks.push(new Uint32Array(CHUNK_CELLS * CELL_WORDS))
    return this.used++
  }

  add(slot: number, bucket: number): void {
    const chunk = this.chunks[Math.floor(slot / CHUNK_CELLS)]!
    const base = (slot % CHUNK_CELLS) * CELL_WORDS
    chunk[base]!++
    chunk[base + 1 + bucket]!++
  }

  requests(slot: number): number {
    return this.chunks[Math.floor(slot / CHUNK_CELLS)]![(slot % CHUNK_CELLS) * CELL_WORDS]!
  }

  /** The cell's latency histogram: a view into the slab, not a copy. */
  latency(slot: number): Uint32Array {
    const base = (slot % CHUNK_CELLS) * CELL_WORDS + 1
    return this.chunks[Math.floor(slot / CHUNK_CELLS)]!.subarray(base, base + LATENCY_BUCKETS)
  }
}

/** One key's counts in one minute. */
export interface KeyMinute {
  readonly tenant: Tenant
  /** Its cells, as pairs: cell code, slot in the slab, cell code, slot, … */
  readonly cells: number[]
}

/** What was counted: minute (epoch ms of its start) → key id → its cells, whose figures are in `slab`. */
export interface MinuteCounts {
  readonly minutes: Map<number, Map<string, KeyMinute>>
  readonly slab: CellSlab
}

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

function emptyCounts(): MinuteCounts {
  return { minutes: new Map(), slab: new CellSlab() }
}

export class UsageCounts {
  private counted: MinuteCounts = emptyCounts()
  private cellCount = 0
  private answers = 0
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

  /** Answers counted since the last take(). */
  get requests(): number {
    return this.answers
  }

  count(nowMs: number, tenant: Tenant, routeIndex: number | null, outcome: UsageOutcome, status: number, ms: number): void {
    const minute = nowMs - (nowMs % 60_000)
    const { minutes, slab } = this.counted
    let keys = minutes.get(minute)
    if (keys === undefined) {
      keys = new Map()
      minutes.set(minute, keys)
    }
    const code = cellCode(routeIndex, outcome, Math.min(Math.max(Math.floor(status / 100), 1), 5))
    const key = keys.get(tenant.keyId)
    let slot = -1
    if (key !== undefined) {
      const cells = key.cells
      for (let i = 0; i < cells.length; i += 2) {
        if (cells[i] === code) {
          slot = cells[i + 1]!
          break
        }
      }
    }
    if (slot === -1) {
      if (this.cellCount + this.held() >= this.maxCells) {
        this.dropped++
        return
      }
      slot = slab.allocate()
      // Most keys meet one cell in a minute: their array is made with it, exactly two elements long.
      if (key === undefined) keys.set(tenant.keyId, { tenant, cells: [code, slot] })
      else key.cells.push(code, slot)
      this.cellCount++
    }
    slab.add(slot, latencyBucket(ms))
    this.answers++
  }

  /** Everything counted so far, handed over; counting starts again empty. */
  take(): { counts: MinuteCounts; cells: number; requests: number; dropped: number } {
    const taken = { counts: this.counted, cells: this.cellCount, requests: this.answers, dropped: this.dropped }
    this.counted = emptyCounts()
    this.cellCount = 0
    this.answers = 0
    this.dropped = 0
    return taken
  }
}
