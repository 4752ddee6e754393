/**
 * The gateway side of cross-replica key invalidation (the protocol is in
 * @scoped/shared/key-invalidation). A dedicated subscriber connection listens
 * on the invalidation channel; on a message the keys are dropped from the
 * in-process cache and only then acknowledged, so a revoke that has returned
 * has been seen by every replica that was listening.
 *
 * The in-process cache is trusted only while this subscription is healthy:
 * subscribed, and a PING on the subscriber connection answered recently (a
 * PONG proves every message published before the PING has arrived, since Redis
 * answers one connection in order). A disconnect, a reconnect, a failed PING
 * or a missed heartbeat distrusts (and empties) the cache; a (re)subscription
 * empties it, then trusts it again.
 */
import type { Redis } from 'ioredis'
import type { Logger } from '@scoped/shared/logger'
import { acknowledgeInvalidation, parseInvalidationMessage, redisNames } from '@scoped/shared/key-invalidation'
import type { KeyCache } from './key-cache.js'
import type { GatewayMetrics } from './metrics.js'

export const HEARTBEAT_INTERVAL_MS = 1_000

export interface InvalidationListenerDeps {
  subscriber: Redis
  commands: Redis
  prefix: string
  cache: KeyCache
  replicaId: string
  log: Logger
  metrics: GatewayMetrics
  /** Monotonic milliseconds, the clock of the cache. */
  now?: () => number
  heartbeatIntervalMs?: number
}

export class InvalidationListener {
  private readonly channel: string
  private readonly now: () => number
  private subscribed = false
  private pingInFlight = false
  private timer: NodeJS.Timeout | undefined
  private stopped = false

  constructor(private readonly deps: InvalidationListenerDeps) {
    this.channel = redisNames(deps.prefix).channel
    this.now = deps.now ?? (() => performance.now())
  }

  /** Whether the subscription is healthy now (the cache's own view, which also notices a missed heartbeat). */
  get healthy(): boolean {
    return this.subscribed && this.deps.cache.isTrusted(this.now())
  }

  /** Starts listening; resolves once subscribed, or once the first attempt failed (it keeps retrying). */
  async start(): Promise<void> {
    const { subscriber } = this.deps
    subscriber.on('message', (channel: string, text: string) => this.onMessage(channel, text))
    subscriber.on('ready', () => void this.subscribe())
    for (const event of ['close', 'reconnecting', 'end']) subscriber.on(event, () => this.lost(event))
    this.timer = setInterval(() => this.ping(), this.deps.heartbeatIntervalMs ?? HEARTBEAT_INTERVAL_MS)
    this.timer.unref()
    try {
      await subscriber.connect()
    } catch (error) {
      this.deps.log.warn({ err: error }, 'key invalidation channel unavailable; the in-process key cache stays off until it is back')
      return
    }
    await this.subscribe()
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearInterval(this.timer)
    this.lost('stop')
    this.deps.subscriber.disconnect()
  }

  private async subscribe(): Promise<void> {
    if (this.stopped) return
    try {
      await this.deps.subscriber.subscribe(this.channel)
    } catch (error) {
      this.lost('subscribe failed')
      this.deps.log.warn({ err: error }, 'could not subscribe to the key invalidation channel')
      return
    }
    if (!this.subscribed) this.deps.log.info({ channel: this.channel }, 'key invalidation channel subscribed')
    this.subscribed = true
    this.deps.cache.trust(this.now())
  }

  private lost(reason: string): void {
    if (this.subscribed && !this.stopped) this.deps.log.warn({ reason }, 'key invalidation channel lost; in-process key cache off')
    this.subscribed = false
    this.deps.cache.distrust()
  }

  private ping(): void {
    const { subscriber, cache } = this.deps
    // Noticing a missed heartbeat here too, not only when a request reads the cache.
    cache.isTrusted(this.now())
    if (this.pingInFlight || subscriber.status !== 'ready') return
    this.pingInFlight = true
    const sentAt = this.now()
    subscriber.ping().then(
      () => {
        this.pingInFlight = false
        if (this.subscribed) cache.heartbeat(sentAt)
      },
      (error: unknown) => {
        this.pingInFlight = false
        this.lost('heartbeat failed')
        this.deps.log.warn({ err: error }, 'key invalidation heartbeat failed; reconnecting')
        // A connection that cannot answer PING may be half open: start a fresh one.
        if (!this.stopped) subscriber.disconnect(true)
      },
    )
  }

  private onMessage(channel: string, text: string): void {
    if (channel !== this.channel) return
    const message = parseInvalidationMessage(text)
    if (message === undefined) {
      this.deps.log.warn('ignored a malformed key invalidation message')
      return
    }
    this.deps.cache.drop(message.hashes)
    this.deps.metrics.countInvalidation()
    acknowledgeInvalidation(this.deps.commands, this.deps.prefix, message, this.deps.replicaId).catch((error: unknown) => {
      this.deps.log.warn({ err: error }, 'could not acknowledge a key invalidation')
    })
  }
}
