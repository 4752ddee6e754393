/**
 * The gateway's counters the benchmark reads from its operations listener
 * (/metrics, Prometheus text): requests, store round trips, key cache
 * entries and lookups. Deltas between two readings give per-request figures.
 */

export interface GatewayCounters {
  /** gateway_requests_total, every label summed. */
  requests: number
  /** gateway_store_round_trips_total{store}. */
  postgres: number
  redis: number
  /** gateway_key_cache_entries{kind}. */
  entries: Record<string, number>
  /** gateway_key_cache_lookups_total{layer,result}, keyed `layer:result`. */
  lookups: Record<string, number>
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g

export async function readCounters(metricsUrl: string): Promise<GatewayCounters> {
  const response = await fetch(metricsUrl)
  if (!response.ok) throw new Error(`${metricsUrl} answered ${response.status}`)
  const counters: GatewayCounters = { requests: 0, postgres: 0, redis: 0, entries: {}, lookups: {} }
  for (const line of (await response.text()).split('\n')) {
    const sample = SAMPLE.exec(line)
    if (sample === null) continue
    const [, name, labelText = '', text] = sample
    const labels = Object.fromEntries([...labelText.matchAll(LABEL)].map((match) => [match[1]!, match[2]!]))
    const value = Number(text)
    if (name === 'gateway_requests_total') counters.requests += value
    else if (name === 'gateway_store_round_trips_total' && labels['store'] === 'postgres') counters.postgres += value
    else if (name === 'gateway_store_round_trips_total' && labels['store'] === 'redis') counters.redis += value
    else if (name === 'gateway_key_cache_entries') counters.entries[labels['kind'] ?? ''] = value
    else if (name === 'gateway_key_cache_lookups_total') counters.lookups[`${labels['layer']}:${labels['result']}`] = value
  }
  return counters
}

export interface StoreTrips {
  requests: number
  postgresPerRequest: number
  redisPerRequest: number
  /** Key cache lookups between the readings, keyed `layer:result`. */
  lookups: Record<string, number>
}

export function storeTrips(before: GatewayCounters, after: GatewayCounters): StoreTrips {
  const requests = after.requests - before.requests
  const per = (delta: number): number => (requests === 0 ? 0 : delta / requests)
  const lookups = Object.fromEntries(Object.entries(after.lookups).map(([cell, value]) => [cell, value - (before.lookups[cell] ?? 0)]))
  return { requests, postgresPerRequest: per(after.postgres - before.postgres), redisPerRequest: per(after.redis - before.redis), lookups }
}
