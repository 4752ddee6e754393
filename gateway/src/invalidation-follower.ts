/**
 * The backstop of revocation, which does not depend on Redis: this replica
 * follows the invalidation log in Postgres (see
 * @scoped/shared/key-invalidation for the protocol and its bound). Every
 * POLL_INTERVAL_MS one statement reports the snapshot this replica has
 * applied (so revokers can confirm without Redis) and reads what was
 * committed since; each ended key is ended in the cache, and the cache is
 * current for STALE_AFTER_MS counted from when that poll was SENT, so a
 * replica that cannot reach Postgres stops believing cached active states
 * before any revoker stops waiting for it.
 *
 * At start it reads the keys ended in the last ENDED_TTL_MS, so a replica
 * started after a revoke still refuses a Redis entry written before it; it
 * is current only after its first registering poll.
 */
import { withDeadline } from '@scoped/shared/deadline'
import type { Pool } from '@scoped/shared/db'
import { LIVE_WINDOW_MS, POLL_INTERVAL_MS, STALE_AFTER_MS } from '@scoped/shared/key-invalidation'
import type { KeyInvalidation } from '@scoped/shared/key-state'
import { isTerminal } from '@scoped/shared/key-state'
import type { LogPoll } from '@scoped/shared/key-store'
import { leaveRegistry, pollInvalidations, readRecentInvalidations } from '@scoped/shared/key-store'
import type { Logger } from '@scoped/shared/logger'
import type { KeyCache } from './key-cache.js'
import { ENDED_TTL_MS } from './key-cache.js'
import type { GatewayMetrics } from './metrics.js'

export interface FollowerDeps {
  pool: Pool
  cache: KeyCache
  replicaId: string
  log: Logger
  metrics: GatewayMetrics
  /** Monotonic milliseconds, the clock of the cache. */
  now?: () => number
  intervalMs?: number
  staleAfterMs?: number
  /** The issued-key filter, told of every key the log names. */
  known?: KnownKeys
}

/** A poll slower than this failed: it could not make the cache current for long anyway. */
const POLL_TIMEOUT_MS = 1_500

/** What learns of every key an invalidation names, created or not: the issued-key filter. */
export interface KnownKeys {
  add(hash: string): void
}

/** Applies invalidations, from the log or from Redis messages, to the cache (and every key named to the issued-key filter). */
export function applyInvalidations(cache: KeyCache, keys: readonly KeyInvalidation[], now: number, known?: KnownKeys): void {
  for (const key of keys) {
    known?.add(key.hash)
    if (isTerminal(key.state)) cache.end(key.hash, key.state, now, key.tenant)
    else cache.changed(key.hash, key.version, now)
  }
}

export class InvalidationFollower {
  private readonly now: () => number
  private readonly intervalMs: number
  private readonly staleAfterMs: number
  /** The snapshot of the log applied so far; undefined until the first read. */
  private applied: string | undefined
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> = Promise.resolve()
  private stopped = false
  private failing = false
  /** Monotonic time of the last successful poll, for metrics and readiness. */
  lastSuccessAt = -Infinity
  /** Gateway replicas seen recently, per the registry (the rate limiter's fallback shares limits among them). */
  liveReplicas = 1

  constructor(private readonly deps: FollowerDeps) {
    this.now = deps.now ?? (() => performance.now())
    this.intervalMs = deps.intervalMs ?? POLL_INTERVAL_MS
    this.staleAfterMs = deps.staleAfterMs ?? STALE_AFTER_MS
  }

  /** Whether the first read of the log has taken its snapshot: whatever commits later reaches this replica through the log. */
  get following(): boolean {
    return this.applied !== undefined
  }

  /** Whether this replica is current with the log now. */
  get current(): boolean {
    return this.deps.cache.isCurrent(this.now())
  }

  /** The first read and poll (failures are logged, not thrown: polling goes on), then polls on a timer. */
  async start(): Promise<void> {
    await this.tick()
    await this.tick()
    this.schedule()
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.running
    this.deps.cache.lose()
    await withDeadline(leaveRegistry(this.deps.pool, this.deps.replicaId), POLL_TIMEOUT_MS, 'leaving the replica registry').catch(() => undefined)
  }

  private schedule(): void {
    if (this.stopped) return
    this.timer = setTimeout(() => {
      this.running = this.tick().finally(() => this.schedule())
    }, this.intervalMs)
    this.timer.unref()
  }

  private async tick(): Promise<void> {
    const { pool, cache, replicaId, log, metrics } = this.deps
    const sentAt = this.now()
    const first = this.applied === undefined
    let poll: LogPoll
    metrics.countRoundTrip('postgres')
    try {
      poll = await withDeadline(
        first ? readRecentInvalidations(pool, ENDED_TTL_MS / 1000) : pollInvalidations(pool, replicaId, this.applied!, LIVE_WINDOW_MS),
        POLL_TIMEOUT_MS,
        'invalidation log poll',
      )
    } catch (error) {
      metrics.countLogPoll(false)
      if (!this.failing) log.warn({ err: error }, 'invalidation log unreachable; cached keys stop being trusted until it answers')
      this.failing = true
      return
    }
    metrics.countLogPoll(true)
    if (this.failing) log.info('invalidation log reachable again')
    this.failing = false
    applyInvalidations(cache, poll.changes, this.now(), this.deps.known)
    metrics.countInvalidations('postgres', poll.changes.length)
    this.applied = poll.snapshot
    this.lastSuccessAt = sentAt
    this.liveReplicas = poll.live
    // Current only once registered: a revoker waits for this replica from then on.
    if (!first) cache.currentUntilTime(sentAt + this.staleAfterMs)
  }
}
