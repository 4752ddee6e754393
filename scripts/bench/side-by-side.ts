/**
 * CPU per request, side by side: the bare proxy, the no-check forwarder and
 * the gateway serve the same closed-loop load at the same time (one request
 * to each per round, side-by-side-load.ts), for BENCH_SIDE_WINDOWS windows of
 * SIDE_SECONDS; each target's CPU (utime + stime from /proc) over a window,
 * divided by the requests it served. The warm-key rounds measure each target
 * alone at full load, so a shared machine that changes speed from one
 * second to the next moves their ratios a long way; here the targets share
 * every moment, and the ratio of their CPU per request holds steady. It is
 * the cost of a request, not the throughput at saturation.
 *
 * With wrk (load-generator.ts) the targets cannot share one closed loop:
 * each gets a wrk process of its own sending the same fixed rate over
 * SIDE_CONNECTIONS connections, in the same seconds (wrk.lua paces the
 * requests; one untimed second first). The rate is a quarter of the slower
 * target's throughput at saturation in the paired measurement, so that the
 * three together stay well below the machine's; each target's CPU is divided
 * by the requests it served.
 */
import type { Target } from './measure.js'
import { PATH } from './measure.js'
import { cpuMicros } from './proc-stats.js'
import type { LoadHooks } from './load-client.js'
import { runGenerator } from './load-client.js'
import { loadGenerator } from './load-generator.js'
import type { Paired } from './paired.js'
import type { SideBySideResult, SideBySideSpec } from './side-by-side-load.js'
import { median } from './stats.js'
import type { Wrk } from './wrk.js'
import { monotonicMs, runWrk } from './wrk.js'
import { wrkStatuses } from './wrk-result.js'

export const SIDE_SECONDS = 3
export const SIDE_CONNECTIONS = 16
/** With wrk: each target's rate as a share of the slower paired target's throughput at saturation. */
export const SIDE_LOAD = 0.25
/** With wrk: the connections' lead-in, then the untimed second. */
const WRK_LEAD_MS = 1_000
const WRK_WARM_MS = 1_000

export interface SideBySideWindow {
  /** Requests each target served in the window, by target name (the same for all with the Node generator). */
  requests: Record<string, number>
  /** CPU µs per request, by target name. */
  cpuUsPerRequest: Record<string, number>
  /** Answers by status, by target name. */
  statuses: Record<string, Record<string, number>>
}

export interface SideBySide {
  windows: SideBySideWindow[]
  seconds: number
  connections: number
  /** By target name: the median over windows of its CPU per request, and of that ÷ the first target's. */
  medians: Record<string, { cpuUsPerRequest: number; ratio: number }>
  /** Whose ratios these are (the first target). */
  base: string
  /** With wrk: the requests per second sent to each target; the Node generator's closed loops have none. */
  rate?: number
}

/** With wrk, the rate of each target in the windows, from the paired measurement's throughputs. */
export function sideRate(paired: Paired): number {
  return Math.max(100, Math.round(SIDE_LOAD * Math.min(...paired.targets.map((target) => target.perSecond))))
}

/** What each target served in a window and its answers, by target; their CPU is sampled by `hooks`. */
type Served = Array<{ requests: number; statuses: Record<string, number> }>

async function servedByNode(targets: readonly Target[], seconds: number, connections: number, hooks: LoadHooks): Promise<Served> {
  const spec: SideBySideSpec = { targets: targets.map((target) => ({ url: `${target.origin}${PATH}`, headers: target.headers })), connections, seconds }
  const { rounds, statuses } = await runGenerator<SideBySideResult>('scripts/bench/side-by-side-load.ts', spec, hooks)
  return statuses.map((counts) => ({ requests: rounds, statuses: counts }))
}

async function servedByWrk(wrk: Wrk, targets: readonly Target[], seconds: number, connections: number, rate: number, hooks: LoadHooks): Promise<Served> {
  const warm = monotonicMs() + WRK_LEAD_MS
  const results = await Promise.all(
    targets.map((target, i) =>
      runWrk(
        wrk,
        { url: `${target.origin}${PATH}`, headers: target.headers, connections, start: warm + WRK_WARM_MS, sliceMs: seconds * 1000, own: [0], warm, rate },
        // All on one schedule: the first's moments are everyone's.
        i === 0 ? hooks : {},
      ),
    ),
  )
  return results.map((result) => ({ requests: result.slices[0]?.answers ?? 0, statuses: wrkStatuses(result) }))
}

async function window(targets: readonly Target[], seconds: number, connections: number, rate: number): Promise<SideBySideWindow> {
  let before: number[] = []
  let after: number[] = []
  const hooks: LoadHooks = {
    running: () => (before = targets.map((target) => cpuMicros(target.pid))),
    done: () => (after = targets.map((target) => cpuMicros(target.pid))),
  }
  const { wrk } = loadGenerator()
  const served = wrk === null ? await servedByNode(targets, seconds, connections, hooks) : await servedByWrk(wrk, targets, seconds, connections, rate, hooks)
  const byName = <T>(value: (i: number) => T): Record<string, T> => Object.fromEntries(targets.map((target, i) => [target.name, value(i)]))
  return {
    requests: byName((i) => served[i]!.requests),
    cpuUsPerRequest: byName((i) => (served[i]!.requests === 0 ? 0 : (after[i]! - before[i]!) / served[i]!.requests)),
    statuses: byName((i) => served[i]!.statuses),
  }
}

/** `windows` windows over the targets, at `rate` requests/s each with wrk; ratios to the first. */
export async function sideBySide(targets: readonly Target[], windows: number, rate: number, progress: (text: string) => void): Promise<SideBySide> {
  const measured: SideBySideWindow[] = []
  for (let i = 0; i < windows; i++) {
    const w = await window(targets, SIDE_SECONDS, SIDE_CONNECTIONS, rate)
    measured.push(w)
    progress(`side by side ${i + 1}/${windows}: ${targets.map((t) => `${t.name} ${w.cpuUsPerRequest[t.name]!.toFixed(0)} µs`).join(', ')}`)
  }
  const base = targets[0]!.name
  const medians = Object.fromEntries(
    targets.map((target) => [
      target.name,
      {
        cpuUsPerRequest: median(measured.map((w) => w.cpuUsPerRequest[target.name]!)),
        ratio: median(measured.map((w) => w.cpuUsPerRequest[target.name]! / w.cpuUsPerRequest[base]!)),
      },
    ]),
  )
  return { windows: measured, seconds: SIDE_SECONDS, connections: SIDE_CONNECTIONS, medians, base, ...(loadGenerator().wrk === null ? {} : { rate }) }
}
