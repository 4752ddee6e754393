/**
 * The warm-key targets' measurement: the bare proxy and the gateway at
 * saturation in turn, half a second at a time (paired-load.ts, or a wrk
 * process per target sending only within its own slices: paired-slices.ts), for
 * BENCH_PAIRED_SECONDS each; then the same with the no-check forwarder in
 * the gateway's place (the ceiling). Throughput ratio: the median over
 * groups of four slices (A B B A) of the second target's requests/s ÷ the
 * bare proxy's; p99 ratio: the second's p99 over all its slices ÷ the bare
 * proxy's. CPU per request: each process's CPU over the whole run ÷ its
 * requests (a target waiting for its turn spends next to nothing).
 */
import type { Target } from './measure.js'
import { PATH } from './measure.js'
import type { LoadHooks } from './load-client.js'
import { runGenerator } from './load-client.js'
import { loadGenerator } from './load-generator.js'
import type { PairedResult, PairedSpec, PairedTargetResult } from './paired-load.js'
import { cpuMicros } from './proc-stats.js'
import { median } from './stats.js'
import type { Wrk } from './wrk.js'
import { monotonicMs, runWrk } from './wrk.js'
import { ownSlices, pairedFromWrk } from './paired-slices.js'

export const SLICE_MS = 500
/** Before the first slice, with wrk: time for both targets' connections (and their TLS handshakes) to open. */
const WRK_LEAD_MS = 1_500

export interface PairedTarget extends PairedTargetResult {
  name: string
  cpuUsPerRequest: number
}

export interface Paired {
  sliceMs: number
  slices: number
  connections: number
  /** The bare proxy, then the other target. */
  targets: [PairedTarget, PairedTarget]
  groupRatios: number[]
  throughputRatio: number
  p99Ratio: number
}

/** `bare` first, then `other` (the gateway, or the no-check forwarder). */
export async function paired(bare: Target, other: Target, secondsEach: number, connections: number): Promise<Paired> {
  // Slices per target rounded up to an even number, so that the groups of four are whole.
  const slices = 4 * Math.max(1, Math.ceil((secondsEach * 1000) / SLICE_MS / 2))
  const both = [bare, other] as const
  const spec: PairedSpec = {
    targets: [bare, other].map((target) => ({ url: `${target.origin}${PATH}`, headers: target.headers })) as PairedSpec['targets'],
    connections,
    sliceMs: SLICE_MS,
    slices,
  }
  let before: number[] = []
  let after: number[] = []
  const hooks: LoadHooks = {
    running: () => (before = both.map((target) => cpuMicros(target.pid))),
    done: () => (after = both.map((target) => cpuMicros(target.pid))),
  }
  const { wrk } = loadGenerator()
  const result = wrk === null ? await runGenerator<PairedResult>('scripts/bench/paired-load.ts', spec, hooks) : await pairedWithWrk(wrk, spec, hooks)
  const targets = result.targets.map((measured, i) => ({
    ...measured,
    name: both[i]!.name,
    cpuUsPerRequest: measured.requests === 0 ? 0 : (after[i]! - before[i]!) / measured.requests,
  })) as [PairedTarget, PairedTarget]
  return {
    sliceMs: SLICE_MS,
    slices,
    connections,
    targets,
    groupRatios: result.groupRatios,
    throughputRatio: median(result.groupRatios),
    p99Ratio: targets[0].p99Ms === 0 ? 0 : targets[1].p99Ms / targets[0].p99Ms,
  }
}

/** The same slices sent by wrk: one process per target, each sending only within its own slices (wrk.lua). */
async function pairedWithWrk(wrk: Wrk, spec: PairedSpec, hooks: LoadHooks): Promise<PairedResult> {
  const start = monotonicMs() + WRK_LEAD_MS
  const [first, second] = await Promise.all(
    spec.targets.map((target, index) =>
      runWrk(
        wrk,
        {
          url: target.url,
          headers: target.headers,
          connections: spec.connections,
          start,
          sliceMs: spec.sliceMs,
          own: ownSlices(index === 0 ? 0 : 1, spec.slices),
        },
        // Both run on one schedule: the first's moments are the second's.
        index === 0 ? hooks : {},
      ),
    ),
  )
  return pairedFromWrk(first!, second!)
}
