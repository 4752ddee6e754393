/**
 * Memory over a soak: the gateway under the full warm-key load for
 * BENCH_SOAK_SECONDS, its RSS sampled every second. Target: growth from the
 * start to the end of the soak under 10 %. The soak starts after
 * SOAK_WARM_UP_SECONDS of the same load, without a pause (with wrk, a second
 * later, once its new connections are open): the heap grows to
 * its size under load in the first seconds (by a fifth or more after an idle
 * spell), which is not the growth a soak looks for.
 */
import type { Target } from './measure.js'
import { measure } from './measure.js'
import type { LoadResult } from './load-client.js'

export const SOAK_GROWTH_TARGET = 0.1
export const SOAK_WARM_UP_SECONDS = 15

export interface Soak {
  seconds: number
  warmUpSeconds: number
  connections: number
  requests: number
  perSecond: number
  statuses: LoadResult['statuses']
  p99Ms: number
  rssStartMiB: number
  rssEndMiB: number
  rssMaxMiB: number
  growth: number
  met: boolean
  rssSamples: Array<[number, number]>
}

export async function soak(gateway: Target, seconds: number, connections: number): Promise<Soak> {
  const measured = await measure(gateway, { connections, seconds, prime: true, warmUpSeconds: SOAK_WARM_UP_SECONDS })
  const growth = measured.rssEndMiB / measured.rssStartMiB - 1
  return {
    seconds,
    warmUpSeconds: SOAK_WARM_UP_SECONDS,
    connections,
    requests: measured.load.requests,
    perSecond: measured.load.perSecond,
    statuses: measured.load.statuses,
    p99Ms: measured.load.p99Ms,
    rssStartMiB: measured.rssStartMiB,
    rssEndMiB: measured.rssEndMiB,
    rssMaxMiB: measured.rssMaxMiB,
    growth,
    met: growth < SOAK_GROWTH_TARGET,
    rssSamples: measured.rssSamples,
  }
}
