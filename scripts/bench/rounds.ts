/**
 * Warm key throughput and latency: every target under the same closed-loop
 * load, BENCH_ROUNDS rounds of BENCH_SECONDS each, interleaved (round r
 * starts with the r-th target) so drift of a busy machine hits all alike.
 */
import type { Measured, Target } from './measure.js'
import { measure } from './measure.js'

export interface RoundSample extends Measured {
  round: number
  target: string
}

export async function warmUp(targets: readonly Target[], seconds: number, connections: number): Promise<void> {
  for (const target of targets) await measure(target, { connections, seconds })
}

export async function runRounds(
  targets: readonly Target[],
  rounds: number,
  seconds: number,
  connections: number,
  progress: (sample: RoundSample) => void,
): Promise<RoundSample[]> {
  const samples: RoundSample[] = []
  for (let round = 1; round <= rounds; round++) {
    const order = targets.map((_, i) => targets[(i + round - 1) % targets.length]!)
    for (const target of order) {
      const sample: RoundSample = { round, target: target.name, ...(await measure(target, { connections, seconds, prime: true })) }
      samples.push(sample)
      progress(sample)
    }
  }
  return samples
}
