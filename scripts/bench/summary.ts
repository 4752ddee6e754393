/**
 * From the round samples to the figures the targets are about: per target the
 * medians over rounds, and the gateway's ratios to the bare proxy, taken
 * round by round (both measured in the same round) and then the median.
 */
import type { Paired } from './paired.js'
import type { RoundSample } from './rounds.js'
import { median } from './stats.js'

export const GATEWAY = 'gateway'
export const BARE = 'bare proxy'
export const NO_CHECKS = 'forwarder, no checks'
/** The gateway again, with a restricted key (issue 30): the permission check should cost nothing measurable. */
export const GATEWAY_RESTRICTED = 'gateway, restricted key'
/** The gateway with USAGE=off (no usage counting, no request log): the baseline of the usage pair. */
export const GATEWAY_USAGE_OFF = 'gateway, usage off'
/** Issue 31: counting and the request log (default mode) keep at least this share of the throughput without them. */
export const USAGE_COST_TARGET = 0.97

export interface TargetSummary {
  target: string
  perSecond: number
  p50Ms: number
  p99Ms: number
  p999Ms: number
  cpuUsPerRequest: number
  rssMaxMiB: number
  postgresPerRequest?: number
  redisPerRequest?: number
  /** Answers other than 200 (or wrk's 2xx-3xx), and failed requests, over every round. */
  non200: number
}

export interface Check {
  name: string
  value: string
  target: string
  met: boolean | null
}

/** Statuses that count as served: 200, and wrk's `2xx-3xx` (it counts only answers of 400 or more apart: wrk-result.ts). */
const SERVED = new Set(['200', '2xx-3xx'])

/** Answers other than served ones, and requests that got no answer. */
export function non200(statuses: Record<string, number>): number {
  return Object.entries(statuses).reduce((sum, [status, count]) => (SERVED.has(status) ? sum : sum + count), 0)
}

export function summarize(samples: readonly RoundSample[]): TargetSummary[] {
  const names = [...new Set(samples.map((sample) => sample.target))]
  return names.map((target) => {
    const mine = samples.filter((sample) => sample.target === target)
    const of = (read: (sample: RoundSample) => number): number => median(mine.map(read))
    const trips = mine.every((sample) => sample.trips !== undefined)
    return {
      target,
      perSecond: of((s) => s.load.perSecond),
      p50Ms: of((s) => s.load.p50Ms),
      p99Ms: of((s) => s.load.p99Ms),
      p999Ms: of((s) => s.load.p999Ms),
      cpuUsPerRequest: of((s) => s.cpuUsPerRequest),
      rssMaxMiB: Math.max(...mine.map((s) => s.rssMaxMiB)),
      ...(trips ? { postgresPerRequest: of((s) => s.trips!.postgresPerRequest), redisPerRequest: of((s) => s.trips!.redisPerRequest) } : {}),
      non200: mine.reduce((sum, s) => sum + non200(s.load.statuses), 0),
    }
  })
}

/** Median over rounds of gateway ÷ other for a figure of the two samples of each round. */
export function pairedRatio(samples: readonly RoundSample[], other: string, read: (sample: RoundSample) => number): number {
  const rounds = [...new Set(samples.map((sample) => sample.round))]
  const ratios = rounds.flatMap((round) => {
    const gateway = samples.find((s) => s.round === round && s.target === GATEWAY)
    const base = samples.find((s) => s.round === round && s.target === other)
    return gateway === undefined || base === undefined || read(base) === 0 ? [] : [read(gateway) / read(base)]
  })
  return median(ratios)
}

const times = (ratio: number): string => `${ratio.toFixed(2)} ×`

/**
 * The warm-key targets, from the paired measurement (paired.ts: the two at
 * saturation in turn, half a second at a time), and the same ratios as the
 * median over rounds, reported beside them. `ceiling` is the no-check
 * forwarder paired with the bare proxy the same way: the gateway's own
 * transport with nothing on it, which the gateway, doing all of that and its
 * checks too, cannot outrun; reported beside the stretch target.
 */
export function warmChecks(paired: Paired, ceiling: Paired, samples: readonly RoundSample[]): Check[] {
  const throughput = paired.throughputRatio
  const p99 = paired.p99Ratio
  return [
    { name: 'gateway / bare proxy throughput, paired at saturation', value: times(throughput), target: '≥ 1.0 ×', met: throughput >= 1.0 },
    { name: 'gateway / bare proxy p99 latency, paired at saturation', value: times(p99), target: '≤ 1.1 ×', met: p99 <= 1.1 },
    { name: 'stretch: gateway / bare proxy throughput', value: times(throughput), target: '≥ 1.5 ×', met: throughput >= 1.5 },
    { name: 'stretch: gateway / bare proxy p99 latency', value: times(p99), target: '< 1.0 × (below the bare proxy)', met: p99 < 1.0 },
    {
      name: 'ceiling: forwarder with no checks / bare proxy throughput, paired at saturation',
      value: `${times(ceiling.throughputRatio)}, p99 ${times(ceiling.p99Ratio)}`,
      target: "reported (the gateway's transport alone: the gateway cannot pass it)",
      met: null,
    },
    {
      name: 'the same ratios, median over rounds (each alone for seconds at a time)',
      value: `${times(pairedRatio(samples, BARE, (s) => s.load.perSecond))}, p99 ${times(pairedRatio(samples, BARE, (s) => s.load.p99Ms))}`,
      target: 'reported',
      met: null,
    },
  ]
}

/** The usage pair (paired.ts, the gateway with USAGE=off first, the default gateway second): what counting costs. */
export function usageCheck(usage: Paired): Check {
  const ratio = usage.throughputRatio
  return {
    name: 'gateway with usage counting and the request log / the same with both off, paired at saturation',
    value: `${times(ratio)}, p99 ${times(usage.p99Ratio)}`,
    target: `≥ ${times(USAGE_COST_TARGET)}`,
    met: ratio >= USAGE_COST_TARGET,
  }
}
