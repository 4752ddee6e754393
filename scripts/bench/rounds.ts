/**
 * Warm key throughput and latency: every target under the same closed-loop
 * load, BENCH_ROUNDS rounds of BENCH_SECONDS each, interleaved so drift of a
 * busy machine hits all alike: round r starts with the r-th target, and the
 * bare proxy and the gateway are always measured one right after the other
 * (which of the two first alternates), since the targets are ratios of the
 * two within a round.
 */
import type { Measured, Target } from './measure.js'
import { measure } from './measure.js'
import { BARE, GATEWAY } from './summary.js'

export interface RoundSample extends Measured {
  round: number
  target: string
}

/** The order of round `round` (from 1): the targets rotated, the bare proxy and the gateway kept side by side. */
export function roundOrder<T extends { name: string }>(targets: readonly T[], round: number): T[] {
  const pair = [BARE, GATEWAY].map((name) => targets.find((target) => target.name === name))
  if (pair.some((target) => target === undefined)) return targets.map((_, i) => targets[(i + round - 1) % targets.length]!)
  const [bare, gateway] = pair as [T, T]
  // The pair is one unit of the rotation, in the bare proxy's place.
  const units: T[][] = targets
    .filter((target) => target !== gateway)
    .map((target) => (target === bare ? (round % 2 === 1 ? [bare, gateway] : [gateway, bare]) : [target]))
  return units.map((_, i) => units[(i + round - 1) % units.length]!).flat()
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
    const order = roundOrder(targets, round)
    for (const target of order) {
      const sample: RoundSample = { round, target: target.name, ...(await measure(target, { connections, seconds, prime: true })) }
      samples.push(sample)
      progress(sample)
    }
  }
  return samples
}
