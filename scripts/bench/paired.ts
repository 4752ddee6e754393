/**
 * The warm-key targets' measurement: the bare proxy and the gateway at
 * saturation in turn, half a second at a time (paired-load.ts), for
 * BENCH_PAIRED_SECONDS each; then the same with the no-check forwarder in
 * the gateway's place (the ceiling). Throughput ratio: the median over
 * groups of four slices (A B B A) of the second target's requests/s ÷ the
 * bare proxy's; p99 ratio: the second's p99 over all its slices ÷ the bare
 * proxy's. CPU per request: each process's CPU over the whole run ÷ its
 * requests (a target waiting for its turn spends next to nothing).
 */
import type { Target } from './measure.js'
import { PATH } from './measure.js'
import { runGenerator } from './load-client.js'
import type { PairedResult, PairedSpec, PairedTargetResult } from './paired-load.js'
import { cpuMicros } from './proc-stats.js'
import { median } from './stats.js'

export const SLICE_MS = 500

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
  const result = await runGenerator<PairedResult>('scripts/bench/paired-load.ts', spec, {
    running: () => (before = both.map((target) => cpuMicros(target.pid))),
    done: () => (after = both.map((target) => cpuMicros(target.pid))),
  })
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
