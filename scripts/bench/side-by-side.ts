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
 */
import type { Target } from './measure.js'
import { PATH } from './measure.js'
import { cpuMicros } from './proc-stats.js'
import { runGenerator } from './load-client.js'
import type { SideBySideResult, SideBySideSpec } from './side-by-side-load.js'
import { median } from './stats.js'

export const SIDE_SECONDS = 3
export const SIDE_CONNECTIONS = 16

export interface SideBySideWindow {
  /** Requests each target served in the window. */
  requests: number
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
}

async function window(targets: readonly Target[], seconds: number, connections: number): Promise<SideBySideWindow> {
  const spec: SideBySideSpec = { targets: targets.map((target) => ({ url: `${target.origin}${PATH}`, headers: target.headers })), connections, seconds }
  let before: number[] = []
  let after: number[] = []
  const { rounds, statuses } = await runGenerator<SideBySideResult>('scripts/bench/side-by-side-load.ts', spec, {
    running: () => (before = targets.map((target) => cpuMicros(target.pid))),
    done: () => (after = targets.map((target) => cpuMicros(target.pid))),
  })
  return {
    requests: rounds,
    cpuUsPerRequest: Object.fromEntries(targets.map((target, i) => [target.name, rounds === 0 ? 0 : (after[i]! - before[i]!) / rounds])),
    statuses: Object.fromEntries(targets.map((target, i) => [target.name, statuses[i]!])),
  }
}

/** `windows` windows over the targets; ratios to the first. */
export async function sideBySide(targets: readonly Target[], windows: number, progress: (text: string) => void): Promise<SideBySide> {
  const measured: SideBySideWindow[] = []
  for (let i = 0; i < windows; i++) {
    const w = await window(targets, SIDE_SECONDS, SIDE_CONNECTIONS)
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
  return { windows: measured, seconds: SIDE_SECONDS, connections: SIDE_CONNECTIONS, medians, base }
}
