/**
 * Cold paths: the first request with a key the main gateway replica has never
 * seen, one request at a time (one keep-alive connection, opened before
 * timing), COLD_KEYS keys each used once:
 * - Redis only: keys first sent through a second, short-lived replica sharing
 *   the Redis prefix (which writes them to the Redis key cache), so the main
 *   replica finds them in Redis, not in its memory;
 * - Postgres only: keys no replica has seen, found only in Postgres.
 * The key cache lookups and round trips between /metrics readings show which
 * layer answered.
 */
import { generateKey } from '@scoped/shared/keys'
import type { Pool } from '@scoped/shared/db'
import type { Tenant } from './fixtures.js'
import { insertKeys } from './fixtures.js'
import type { Gateway } from './gateway.js'
import type { Target } from './measure.js'
import { measure } from './measure.js'
import type { LoadResult } from './load-client.js'
import type { Latency } from './stats.js'

export const COLD_KEYS = 200

export interface ColdPath extends Latency {
  keys: number
  statuses: LoadResult['statuses']
  /** Store round trips and cache lookups per cold key (background polls and last-use writes included). */
  postgresPerKey: number
  redisPerKey: number
  lookups: Record<string, number>
}

export interface ColdPaths {
  redisOnly: ColdPath
  postgresOnly: ColdPath
}

async function firstUses(main: Target, keys: string[]): Promise<ColdPath> {
  const measured = await measure(main, { keys, connections: 1, prime: true })
  const trips = measured.trips!
  const { p50Ms, p99Ms, p999Ms, maxMs } = measured.load
  return {
    keys: keys.length,
    p50Ms,
    p99Ms,
    p999Ms,
    maxMs,
    statuses: measured.load.statuses,
    postgresPerKey: (trips.postgresPerRequest * trips.requests) / keys.length,
    redisPerKey: (trips.redisPerRequest * trips.requests) / keys.length,
    lookups: trips.lookups,
  }
}

export async function coldPaths(pool: Pool, tenant: Tenant, main: Target, startReplica: () => Promise<Gateway>): Promise<ColdPaths> {
  const redisKeys = Array.from({ length: COLD_KEYS }, generateKey)
  const postgresKeys = Array.from({ length: COLD_KEYS }, generateKey)
  await insertKeys(pool, tenant, [...redisKeys, ...postgresKeys], 'bench cold')

  const replica = await startReplica()
  try {
    const warming = await measure(
      { ...main, name: 'warming replica', origin: replica.apiUrl, pid: replica.pid, metricsUrl: replica.metricsUrl },
      { keys: redisKeys, connections: 4 },
    )
    if ((warming.load.statuses['200'] ?? 0) !== COLD_KEYS)
      throw new Error(`warming the Redis-only keys through a second replica: ${JSON.stringify(warming.load.statuses)}`)
    await new Promise((resolve) => setTimeout(resolve, 500)) // its Redis writes are not awaited by the requests
  } finally {
    await replica.stop()
  }
  return { redisOnly: await firstUses(main, redisKeys), postgresOnly: await firstUses(main, postgresKeys) }
}
