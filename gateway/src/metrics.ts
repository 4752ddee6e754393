/**
 * Prometheus metrics, served by prom-client in its text format on the
 * operations listener. The request path only adds to plain numbers in
 * preallocated arrays (no label objects, no string keys); prom-client reads
 * them when /metrics is scraped. prom-client's own Histogram.observe builds a
 * label hash and converts the bucket bound to a string on every call, so the
 * upstream latency histogram is kept here and handed to the registry as a
 * metric whose get() answers in prom-client's histogram shape.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client'
import type { Histogram } from 'prom-client'
import type { Scope } from '@scoped/shared/scope'
import type { RequestOutcome } from './outcomes.js'
import { requestOutcomes } from './outcomes.js'
import type { Route, RouteMap } from './route-map.js'

const SCOPE_LABELS = ['none', 'AGENCY', 'SUB-ACCOUNT'] as const
const OUTCOME_INDEX = Object.fromEntries(requestOutcomes.map((outcome, index) => [outcome, index])) as Record<RequestOutcome, number>

export type CacheLayer = 'memory' | 'redis'
/** The gateway's listeners: the HTTPS API, the plain-HTTP refusal, the operations listener. */
export type ConnectionListener = 'api' | 'http' | 'admin'
/** Why a connection was closed as soon as it was accepted: the listener's cap, or the client's share of it. */
export type ConnectionRefusal = 'cap' | 'per-client'
export type CacheResult = 'hit' | 'miss' | 'error'
const CACHE_CELLS: ReadonlyArray<[CacheLayer, CacheResult]> = [
  ['memory', 'hit'],
  ['memory', 'miss'],
  ['redis', 'hit'],
  ['redis', 'miss'],
  ['redis', 'error'],
]

/** Upper bounds, in seconds, of the upstream latency buckets. */
export const UPSTREAM_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] as const

function scopeIndex(scope: Scope | null): number {
  return scope === null ? 0 : scope === 'AGENCY' ? 1 : 2
}

/** One sample line of a metric, as prom-client's registry formats it. */
interface Sample {
  metricName: string
  labels: Record<string, string | number>
  value: number
}

/** The upstream latency histogram by route: per route, a count per bucket (the last is +Inf) and a sum. */
class UpstreamLatency {
  readonly name = 'gateway_upstream_duration_seconds'
  readonly help = 'Time from forwarding a request to the upstream response headers, by route prefix.'
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  private readonly counts: Float64Array
  private readonly sums: Float64Array

  constructor(private readonly routes: RouteMap) {
    this.counts = new Float64Array(routes.routes.length * (UPSTREAM_BUCKETS.length + 1))
    this.sums = new Float64Array(routes.routes.length)
  }

  observe(routeIndex: number, seconds: number): void {
    let bucket = 0
    while (bucket < UPSTREAM_BUCKETS.length && seconds > UPSTREAM_BUCKETS[bucket]!) bucket++
    this.counts[routeIndex * (UPSTREAM_BUCKETS.length + 1) + bucket]! += 1
    this.sums[routeIndex]! += seconds
  }

  async get(): Promise<{ name: string; help: string; type: string; values: Sample[]; aggregator: string }> {
    const values: Sample[] = []
    this.routes.routes.forEach((route, index) => {
      let cumulative = 0
      const base = index * (UPSTREAM_BUCKETS.length + 1)
      UPSTREAM_BUCKETS.forEach((le, bucket) => {
        cumulative += this.counts[base + bucket]!
        values.push({ metricName: `${this.name}_bucket`, labels: { le, route: route.prefix }, value: cumulative })
      })
      cumulative += this.counts[base + UPSTREAM_BUCKETS.length]!
      values.push({ metricName: `${this.name}_bucket`, labels: { le: '+Inf', route: route.prefix }, value: cumulative })
      values.push({ metricName: `${this.name}_sum`, labels: { route: route.prefix }, value: this.sums[index]! })
      values.push({ metricName: `${this.name}_count`, labels: { route: route.prefix }, value: cumulative })
    })
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }
}

/** gateway_requests_total, read from the replica's array of counts when scraped. */
function registerRequestCounter(registry: Registry, requests: Float64Array, routes: RouteMap): void {
  new Counter({
    name: 'gateway_requests_total',
    help: 'Requests by outcome, key scope and route prefix.',
    labelNames: ['outcome', 'scope', 'route'] as const,
    registers: [registry],
    collect() {
      this.reset()
      requests.forEach((count, cell) => {
        if (count === 0) return
        const outcome = cell % requestOutcomes.length
        const scope = Math.floor(cell / requestOutcomes.length) % SCOPE_LABELS.length
        const route = Math.floor(cell / (requestOutcomes.length * SCOPE_LABELS.length))
        this.inc({ outcome: requestOutcomes[outcome]!, scope: SCOPE_LABELS[scope]!, route: route === 0 ? 'none' : routes.routes[route - 1]!.prefix }, count)
      })
    },
  })
}

/** gateway_key_cache_lookups_total, from the array of cache counts. */
function registerCacheCounter(registry: Registry, cache: Float64Array): void {
  new Counter({
    name: 'gateway_key_cache_lookups_total',
    help: 'Key cache lookups by layer (memory, redis) and result (hit, miss, error).',
    labelNames: ['layer', 'result'] as const,
    registers: [registry],
    collect() {
      this.reset()
      CACHE_CELLS.forEach(([layer, result], cell) => this.inc({ layer, result }, cache[cell]!))
    },
  })
}

/** gateway_store_round_trips_total: [postgres, redis]. */
function registerRoundTrips(registry: Registry, roundTrips: Float64Array): void {
  new Counter({
    name: 'gateway_store_round_trips_total',
    help: 'Round trips to Postgres and Redis made by this replica (key lookups, cache reads and writes, log polls, last-use writes, throttling).',
    labelNames: ['store'] as const,
    registers: [registry],
    collect() {
      this.reset()
      this.inc({ store: 'postgres' }, roundTrips[0]!)
      this.inc({ store: 'redis' }, roundTrips[1]!)
    },
  })
}

export class GatewayMetrics {
  readonly registry = new Registry()
  /** [route index + 1 (0: none)][scope][outcome] */
  private readonly requests: Float64Array
  private readonly cache: Float64Array
  private readonly invalidationsBySource: Counter<'source'>
  private readonly logPolls: Counter<'result'>
  private readonly forged: Counter<'kind'>
  private readonly throttled: Counter<'limit'>
  private readonly usageDropped: Counter<'kind'>
  private readonly usageFlushes: Counter<'result'>
  private readonly usageRollups: Counter<'result'>
  /** [postgres, redis]: round trips made by this replica, for the benchmark's per-request figure. */
  private readonly roundTrips = new Float64Array(2)
  private readonly upstream: UpstreamLatency
  private readonly refusedConnections: Counter<'listener' | 'reason'>
  private readonly openConnections = new Map<ConnectionListener, () => number>()

  constructor(routes: RouteMap) {
    const requests = new Float64Array((routes.routes.length + 1) * SCOPE_LABELS.length * requestOutcomes.length)
    const cache = new Float64Array(CACHE_CELLS.length)
    this.requests = requests
    this.cache = cache
    collectDefaultMetrics({ register: this.registry, prefix: 'gateway_' })
    registerRequestCounter(this.registry, requests, routes)
    registerCacheCounter(this.registry, cache)
    this.invalidationsBySource = new Counter({
      name: 'gateway_key_invalidations_total',
      help: 'Keys invalidated in this replica, by where it heard of it (redis: the fast path; postgres: the invalidation log).',
      labelNames: ['source'] as const,
      registers: [this.registry],
    })
    this.logPolls = new Counter({
      name: 'gateway_invalidation_log_polls_total',
      help: 'Polls of the invalidation log in Postgres, by result (ok, error).',
      labelNames: ['result'] as const,
      registers: [this.registry],
    })
    this.forged = new Counter({
      name: 'gateway_key_cache_forged_total',
      help: 'Redis cache entries (entry) and invalidation messages (message) ignored because their MAC failed.',
      labelNames: ['kind'] as const,
      registers: [this.registry],
    })
    this.throttled = new Counter({
      name: 'gateway_throttled_requests_total',
      help: 'Requests refused 429 by the failed-authentication throttle (failed-auth), a rate limit (key, tenant, agency) or the documents budget (documents).',
      labelNames: ['limit'] as const,
      registers: [this.registry],
    })
    registerRoundTrips(this.registry, this.roundTrips)
    this.usageDropped = new Counter({
      name: 'gateway_usage_dropped_total',
      help: 'Usage counts (counts: answers) and request log rows (request-log) dropped because the memory bound was reached while Postgres could not be written, or left unwritten at stop.',
      labelNames: ['kind'] as const,
      registers: [this.registry],
    })
    this.usageFlushes = new Counter({
      name: 'gateway_usage_flushes_total',
      help: 'Batches of usage counts and request log rows written to Postgres, by result (ok, error: retried).',
      labelNames: ['result'] as const,
      registers: [this.registry],
    })
    this.usageRollups = new Counter({
      name: 'gateway_usage_rollups_total',
      help: 'Usage hours this replica rolled up from the minutes (rolled), and its turns at it that failed (error: tried again a minute later).',
      labelNames: ['result'] as const,
      registers: [this.registry],
    })
    this.refusedConnections = new Counter({
      name: 'gateway_connections_refused_total',
      help: 'TCP connections closed as soon as they were accepted, by listener (api, http, admin) and reason (cap: the listener was full; per-client: that client held its share).',
      labelNames: ['listener', 'reason'] as const,
      registers: [this.registry],
    })
    const open = this.openConnections
    new Gauge({
      name: 'gateway_connections_open',
      help: 'TCP connections open now, by listener (api, http, admin), TLS handshakes included.',
      labelNames: ['listener'] as const,
      registers: [this.registry],
      collect() {
        for (const [listener, read] of open) this.set({ listener }, read())
      },
    })
    this.upstream = new UpstreamLatency(routes)
    // The registry asks a metric only for get() (and its name); this one answers in Histogram's shape.
    this.registry.registerMetric(this.upstream as unknown as Histogram)
  }

  countRequest(outcome: RequestOutcome, scope: Scope | null, route: Route | null): void {
    const routeIndex = route === null ? 0 : route.index + 1
    this.requests[(routeIndex * SCOPE_LABELS.length + scopeIndex(scope)) * requestOutcomes.length + OUTCOME_INDEX[outcome]]! += 1
  }

  countCache(layer: CacheLayer, result: CacheResult): void {
    const cell = layer === 'memory' ? (result === 'hit' ? 0 : 1) : result === 'hit' ? 2 : result === 'miss' ? 3 : 4
    this.cache[cell]! += 1
  }

  countInvalidations(source: 'redis' | 'postgres', keys: number): void {
    if (keys > 0) this.invalidationsBySource.inc({ source }, keys)
  }

  countLogPoll(ok: boolean): void {
    this.logPolls.inc({ result: ok ? 'ok' : 'error' })
  }

  countForged(kind: 'entry' | 'message'): void {
    this.forged.inc({ kind })
  }

  countRoundTrip(store: 'postgres' | 'redis'): void {
    this.roundTrips[store === 'postgres' ? 0 : 1]! += 1
  }

  /** Entries in the key caches by kind, read at each scrape: the negative caches are bounded, and this shows it. */
  cacheSizes(read: () => Record<string, number>): void {
    new Gauge({
      name: 'gateway_key_cache_entries',
      help: 'Entries in the in-process key cache by kind (active, unknown, ended); each kind is bounded.',
      labelNames: ['kind'] as const,
      registers: [this.registry],
      collect() {
        for (const [kind, count] of Object.entries(read())) this.set({ kind }, count)
      },
    })
  }

  countUsageDropped(kind: 'counts' | 'request-log', n: number): void {
    this.usageDropped.inc({ kind }, n)
  }

  countUsageFlush(ok: boolean): void {
    this.usageFlushes.inc({ result: ok ? 'ok' : 'error' })
  }

  countUsageRollup(result: 'rolled' | 'error', n = 1): void {
    this.usageRollups.inc({ result }, n)
  }

  countRefusedConnection(listener: ConnectionListener, reason: ConnectionRefusal): void {
    this.refusedConnections.inc({ listener, reason })
  }

  /** How many connections `listener` holds, read at each scrape. */
  connectionsOpen(listener: ConnectionListener, read: () => number): void {
    this.openConnections.set(listener, read)
  }

  countThrottled(limit: 'failed-auth' | 'key' | 'tenant' | 'agency' | 'documents'): void {
    this.throttled.inc({ limit })
  }

  /** Seconds since the replica was last current with the invalidation log, read at each scrape. */
  logAge(read: () => number): void {
    new Gauge({
      name: 'gateway_invalidation_log_age_seconds',
      help: 'Seconds since the last successful poll of the invalidation log (cached keys are trusted only while it is small).',
      registers: [this.registry],
      collect() {
        this.set(read())
      },
    })
  }

  private channelGauge: Gauge | undefined

  /**
   * 1 while this replica is subscribed to the Redis invalidation channel, 0 while not; set by the
   * listener (invalidation-listener.ts) whenever that changes, so absent on a replica without REDIS_URL.
   */
  channelSubscribed(subscribed: boolean): void {
    this.channelGauge ??= new Gauge({
      name: 'gateway_invalidation_channel_subscribed',
      help: 'Whether this replica is subscribed to the Redis key invalidation channel (1) or not (0: revocations reach it through Postgres only).',
      registers: [this.registry],
    })
    this.channelGauge.set(subscribed ? 1 : 0)
  }

  /** 1 while every readiness check of /readyz passes, 0 while not; evaluated at each scrape. */
  readiness(ready: () => Promise<boolean>): void {
    new Gauge({
      name: 'gateway_ready',
      help: 'Whether this replica is ready (1: every check of /readyz passes) or not (0: it is out of the load balancer).',
      registers: [this.registry],
      async collect() {
        this.set((await ready()) ? 1 : 0)
      },
    })
  }

  observeUpstream(route: Route, seconds: number): void {
    this.upstream.observe(route.index, seconds)
  }

  text(): Promise<string> {
    return this.registry.metrics()
  }
}
