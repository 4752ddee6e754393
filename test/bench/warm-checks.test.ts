/** The benchmark's warm-key targets: met or not from the paired ratios, and the ceiling reported beside the stretch target. */
import t from 'tap'
import type { Paired, PairedTarget } from '../../scripts/bench/paired.js'
import { BARE, GATEWAY, GATEWAY_USAGE_OFF, NO_CHECKS, usageCheck, warmChecks } from '../../scripts/bench/summary.js'

function target(name: string): PairedTarget {
  return { name, requests: 1, seconds: 1, perSecond: 1, statuses: { 200: 1 }, p50Ms: 1, p99Ms: 1, p999Ms: 1, maxMs: 1, cpuUsPerRequest: 1 }
}

function pair(second: string, throughputRatio: number, p99Ratio: number, first = BARE): Paired {
  return {
    sliceMs: 500,
    slices: 4,
    connections: 50,
    targets: [target(first), target(second)],
    groupRatios: [throughputRatio],
    throughputRatio,
    p99Ratio,
  }
}

const byName = (checks: ReturnType<typeof warmChecks>): Map<string, { value: string; met: boolean | null }> =>
  new Map(checks.map((check) => [check.name, check]))

t.test('the targets are met from the gateway pair, the ceiling only reported', async (t) => {
  const checks = byName(warmChecks(pair(GATEWAY, 1.02, 1.12), pair(NO_CHECKS, 1.43, 0.8), []))
  t.equal(checks.get('gateway / bare proxy throughput, paired at saturation')?.met, true)
  t.equal(checks.get('gateway / bare proxy p99 latency, paired at saturation')?.met, false, '1.12 × is past 1.1 ×')
  t.equal(checks.get('stretch: gateway / bare proxy throughput')?.met, false)
  const ceiling = checks.get('ceiling: forwarder with no checks / bare proxy throughput, paired at saturation')
  t.equal(ceiling?.value, '1.43 ×, p99 0.80 ×', 'the forwarder pair, not the gateway pair')
  t.equal(ceiling?.met, null)
})

t.test('below the throughput target, and past the stretch', async (t) => {
  t.equal(byName(warmChecks(pair(GATEWAY, 0.99, 1.0), pair(NO_CHECKS, 1.5, 1), [])).get('gateway / bare proxy throughput, paired at saturation')?.met, false)
  const past = byName(warmChecks(pair(GATEWAY, 1.5, 0.99), pair(NO_CHECKS, 2, 1), []))
  t.equal(past.get('stretch: gateway / bare proxy throughput')?.met, true)
  t.equal(past.get('stretch: gateway / bare proxy p99 latency')?.met, true)
})

t.test('usage counting: met at 0.97 × the gateway with USAGE=off, not below', async (t) => {
  const met = usageCheck(pair(GATEWAY, 0.97, 1.01, GATEWAY_USAGE_OFF))
  t.equal(met.met, true)
  t.equal(met.value, '0.97 ×, p99 1.01 ×')
  t.equal(met.target, '≥ 0.97 ×')
  t.equal(usageCheck(pair(GATEWAY, 0.96, 1, GATEWAY_USAGE_OFF)).met, false)
})
