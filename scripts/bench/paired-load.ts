/**
 * The paired generator, a process of its own: two targets at saturation in
 * turn, in slices of `sliceMs`, in the order A B B A, A B B A, … (so a
 * machine that speeds up or slows down over a group of four slices favours
 * neither). In a slice every connection of one target runs its closed loop
 * until the slice's time is up; the slice ends when the last answer is in
 * (its time counts to the end of it), and the other target's connections
 * wait, open, meanwhile. The rounds measure each target alone for seconds
 * at a time, and the shared machine's speed drifts by a third between them;
 * here each target's figures are gathered over the same stretch of time,
 * half a second at a time. Writes JSON lines: {"event":"running"},
 * {"event":"done"}, then {"event":"result","result":{…}} (PairedResult).
 */
import { emit, generatorPool } from './generator-pool.js'
import { requestHead } from './http1-connection.js'
import type { Latency } from './stats.js'
import { latency } from './stats.js'
import { SLICE_ORDER } from './paired-slices.js'

export interface PairedSpec {
  targets: [{ url: string; headers: Record<string, string> }, { url: string; headers: Record<string, string> }]
  connections: number
  sliceMs: number
  /** Slices in all: a multiple of four. */
  slices: number
}

export interface PairedTargetResult extends Latency {
  requests: number
  /** Time of its slices, start to last answer. */
  seconds: number
  perSecond: number
  statuses: Record<string, number>
}

export interface PairedResult {
  targets: [PairedTargetResult, PairedTargetResult]
  /** Per group of four slices (A B B A): requests/s of the second target ÷ the first's. */
  groupRatios: number[]
}

const ORDER = SLICE_ORDER

const spec = JSON.parse(process.argv[2] ?? '') as PairedSpec
const urls = spec.targets.map((target) => new URL(target.url))
const pools = urls.map((url) => generatorPool(url, spec.connections))
const heads = urls.map((url, index) => requestHead(url, spec.targets[index]!.headers))
const latencies: number[][] = [[], []]
const statuses: Array<Record<string, number>> = [{}, {}]
const busy = [0, 0]

/** One slice of one target; answers how many requests it completed, and in how long. */
async function slice(index: number): Promise<{ completed: number; ms: number }> {
  const start = performance.now()
  const until = start + spec.sliceMs
  let completed = 0
  await Promise.all(
    pools[index]!.map(async (connection) => {
      while (performance.now() < until) {
        const sent = performance.now()
        const status = await connection.request(heads[index]!)
        latencies[index]!.push(performance.now() - sent)
        statuses[index]![status] = (statuses[index]![status] ?? 0) + 1
        completed++
      }
    }),
  )
  const ms = performance.now() - start
  busy[index]! += ms
  return { completed, ms }
}

// Every connection opened (TLS handshake included) before anything is timed.
await Promise.all(pools.flatMap((pool, index) => pool.map((connection) => connection.request(heads[index]!))))
emit({ event: 'running' })
const groupRatios: number[] = []
for (let group = 0; group < spec.slices / ORDER.length; group++) {
  const rates = [0, 0]
  for (const index of ORDER) {
    const { completed, ms } = await slice(index)
    // Each target has two slices in a group: its rate is their mean.
    rates[index]! += completed / (ms / 1000) / 2
  }
  groupRatios.push(rates[1]! / rates[0]!)
}
emit({ event: 'done' })
const result: PairedResult = {
  targets: [0, 1].map((index) => {
    const requests = latencies[index]!.length
    const seconds = busy[index]! / 1000
    return { requests, seconds, perSecond: requests / seconds, statuses: statuses[index]!, ...latency(latencies[index]!) }
  }) as [PairedTargetResult, PairedTargetResult],
  groupRatios,
}
emit({ event: 'result', result })
for (const pool of pools) for (const connection of pool) connection.close()
process.exit(0)
