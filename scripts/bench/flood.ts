/**
 * Memory under a flood of distinct unknown keys: BENCH_FLOOD_KEYS well-formed
 * random keys, each sent once over many connections, each request with a
 * random X-Forwarded-For (the gateway trusts 127.0.0.1 and allows a very high
 * failure count, so the failed-auth throttle does not stop the flood). Every
 * key misses memory and Redis and is looked up in Postgres. Reported: RSS
 * before, after and at most, and gateway_key_cache_entries{kind="unknown"},
 * which must stay within the negative cache's bound (100 000).
 */
import { readCounters } from './gateway-metrics.js'
import type { StoreTrips } from './gateway-metrics.js'
import type { LoadResult } from './load-client.js'
import type { Target } from './measure.js'
import { measure } from './measure.js'

/** The in-process cache's bound per kind (gateway/src/key-cache.ts maxEntries). */
export const UNKNOWN_ENTRIES_BOUND = 100_000

export interface Flood {
  keys: number
  connections: number
  seconds: number
  perSecond: number
  statuses: LoadResult['statuses']
  p99Ms: number
  rssBeforeMiB: number
  rssAfterMiB: number
  rssMaxMiB: number
  unknownEntriesBefore: number
  unknownEntriesAfter: number
  /** The largest count read during the flood (every 2 s) and after it. */
  unknownEntriesMax: number
  bounded: boolean
  trips: StoreTrips
}

export async function flood(gateway: Target, keys: number, connections: number): Promise<Flood> {
  const metricsUrl = gateway.metricsUrl!
  const unknownEntries = async (): Promise<number> => (await readCounters(metricsUrl)).entries['unknown'] ?? 0
  const unknownEntriesBefore = await unknownEntries()
  let unknownEntriesMax = unknownEntriesBefore
  let reading = false
  const watch = setInterval(() => {
    if (reading) return
    reading = true
    unknownEntries()
      .then((count) => (unknownEntriesMax = Math.max(unknownEntriesMax, count)))
      .catch(() => undefined)
      .finally(() => (reading = false))
  }, 2_000)
  try {
    const measured = await measure(gateway, { connections, unknownKeys: keys, randomForwardedFor: true, prime: true })
    const unknownEntriesAfter = await unknownEntries()
    unknownEntriesMax = Math.max(unknownEntriesMax, unknownEntriesAfter)
    return {
      keys,
      connections,
      seconds: measured.load.seconds,
      perSecond: measured.load.perSecond,
      statuses: measured.load.statuses,
      p99Ms: measured.load.p99Ms,
      rssBeforeMiB: measured.rssStartMiB,
      rssAfterMiB: measured.rssEndMiB,
      rssMaxMiB: measured.rssMaxMiB,
      unknownEntriesBefore,
      unknownEntriesAfter,
      unknownEntriesMax,
      bounded: unknownEntriesMax <= UNKNOWN_ENTRIES_BOUND,
      trips: measured.trips!,
    }
  } finally {
    clearInterval(watch)
  }
}
