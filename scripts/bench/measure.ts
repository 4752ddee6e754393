/**
 * One measured load against one target: the generator's result, plus what
 * the target process spent meanwhile (CPU from /proc/<pid>/stat between the
 * generator's `running` and `done`, RSS then and every second in between)
 * and, for a gateway, its store round trips per request (/metrics deltas).
 */
import type { StoreTrips } from './gateway-metrics.js'
import { readCounters, storeTrips } from './gateway-metrics.js'
import type { LoadResult, LoadSpec } from './load-client.js'
import { runLoad } from './load-client.js'
import { cpuMicros, rssMiB } from './proc-stats.js'

export interface Target {
  name: string
  /** Origin (https://127.0.0.1:port); requests go to `${origin}${PATH}`. */
  origin: string
  headers: Record<string, string>
  pid: number
  /** The gateway's operations /metrics. */
  metricsUrl?: string
}

export const PATH = '/v1/agents'

export interface Measured {
  load: LoadResult
  cpuUsPerRequest: number
  rssStartMiB: number
  rssEndMiB: number
  rssMaxMiB: number
  /** [seconds since start, MiB], one a second. */
  rssSamples: Array<[number, number]>
  trips?: StoreTrips
}

export async function measure(target: Target, load: Omit<LoadSpec, 'url' | 'headers'> & { headers?: Record<string, string> }): Promise<Measured> {
  const before = target.metricsUrl === undefined ? undefined : await readCounters(target.metricsUrl)
  let cpuStart = 0
  let cpuEnd = 0
  let startedAt = 0
  const rssSamples: Array<[number, number]> = []
  let timer: NodeJS.Timeout | undefined
  const sample = (): void => {
    rssSamples.push([(performance.now() - startedAt) / 1000, rssMiB(target.pid)])
  }
  const result = await runLoad(
    { ...load, url: `${target.origin}${PATH}`, headers: load.headers ?? target.headers },
    {
      running() {
        startedAt = performance.now()
        cpuStart = cpuMicros(target.pid)
        sample()
        timer = setInterval(sample, 1_000)
      },
      done() {
        cpuEnd = cpuMicros(target.pid)
        clearInterval(timer)
        sample()
      },
    },
  ).finally(() => clearInterval(timer))
  const after = target.metricsUrl === undefined ? undefined : await readCounters(target.metricsUrl)
  const rss = rssSamples.map(([, mib]) => mib)
  return {
    load: result,
    cpuUsPerRequest: result.requests === 0 ? 0 : (cpuEnd - cpuStart) / result.requests,
    rssStartMiB: rss[0] ?? 0,
    rssEndMiB: rss[rss.length - 1] ?? 0,
    rssMaxMiB: Math.max(0, ...rss),
    rssSamples,
    ...(before !== undefined && after !== undefined ? { trips: storeTrips(before, after) } : {}),
  }
}
