/**
 * The fast path of revocation: a dedicated subscriber connection listens on
 * the invalidation channel; a message whose MAC verifies ends (or forgets)
 * its keys in the cache and only then is acknowledged, with a MAC'd
 * acknowledgement naming this replica, so a revoke that has collected it
 * knows this replica has dropped the keys. A forged or malformed message is
 * ignored. Nothing here decides trust: the invalidation log follower does,
 * so a replica whose subscription is lost still refuses revoked keys within
 * the log's bound, and revokers confirm it through Postgres.
 */
import type { Redis } from 'ioredis'
import { acknowledgeInvalidation } from '@scoped/shared/key-invalidation'
import type { KeyStateCodec } from '@scoped/shared/key-state'
import { redisNames } from '@scoped/shared/key-state'
import type { Logger } from '@scoped/shared/logger'
import type { KnownKeys } from './invalidation-follower.js'
import { applyInvalidations } from './invalidation-follower.js'
import type { KeyCache } from './key-cache.js'
import type { GatewayMetrics } from './metrics.js'

export interface InvalidationListenerDeps {
  subscriber: Redis
  commands: Redis
  prefix: string
  codec: KeyStateCodec
  cache: KeyCache
  replicaId: string
  log: Logger
  metrics: GatewayMetrics
  now?: () => number
  /** The issued-key filter, told of every key a message names before the message is acknowledged. */
  known?: KnownKeys
}

export class InvalidationListener {
  private readonly channel: string
  private readonly now: () => number
  private stopped = false
  private subscribing: Promise<void> | null = null
  private isSubscribed = false

  constructor(private readonly deps: InvalidationListenerDeps) {
    this.channel = redisNames(deps.prefix).channel
    this.now = deps.now ?? (() => performance.now())
    deps.metrics.channelSubscribed(false)
  }

  /** Subscribed now (for readiness details and metrics only): every change sets gateway_invalidation_channel_subscribed. */
  get subscribed(): boolean {
    return this.isSubscribed
  }

  set subscribed(value: boolean) {
    this.isSubscribed = value
    this.deps.metrics.channelSubscribed(value)
  }

  /** Starts listening; resolves once subscribed, or once the first attempt failed (ioredis keeps reconnecting). */
  async start(): Promise<void> {
    const { subscriber, log } = this.deps
    subscriber.on('message', (channel: string, text: string) => this.onMessage(channel, text))
    subscriber.on('ready', () => void this.subscribe())
    for (const event of ['close', 'end']) {
      subscriber.on(event, () => {
        if (this.subscribed && !this.stopped) log.warn('key invalidation channel lost; revocations reach this replica through Postgres until it is back')
        this.subscribed = false
      })
    }
    try {
      await subscriber.connect()
    } catch (error) {
      log.warn({ err: error }, 'key invalidation channel unavailable; revocations reach this replica through Postgres until it is back')
      return
    }
    await this.subscribe()
  }

  async stop(): Promise<void> {
    this.stopped = true
    this.subscribed = false
    this.deps.subscriber.disconnect()
  }

  /** Subscribes once: the connection's 'ready' event and start() may both ask at the same moment. */
  private subscribe(): Promise<void> {
    if (this.stopped || this.subscribed) return Promise.resolve()
    this.subscribing ??= this.deps.subscriber
      .subscribe(this.channel)
      .then(
        () => {
          this.subscribed = true
          this.deps.log.info({ channel: this.channel }, 'key invalidation channel subscribed')
        },
        (error: unknown) => this.deps.log.warn({ err: error }, 'could not subscribe to the key invalidation channel'),
      )
      .finally(() => (this.subscribing = null))
    return this.subscribing
  }

  private onMessage(channel: string, text: string): void {
    if (channel !== this.channel) return
    const { codec, cache, commands, prefix, replicaId, log, metrics } = this.deps
    const message = codec.decodeMessage(text)
    if (message === undefined) {
      metrics.countForged('message')
      log.warn('ignored a key invalidation message that failed its check (forged or malformed)')
      return
    }
    applyInvalidations(cache, message.keys, this.now(), this.deps.known)
    metrics.countInvalidations('redis', message.keys.length)
    acknowledgeInvalidation(commands, prefix, codec, message.id, replicaId).catch((error: unknown) => {
      log.warn({ err: error }, 'could not acknowledge a key invalidation; the revoker confirms through Postgres')
    })
  }
}
