/**
 * Both ends of the key-invalidation protocol for tests:
 *
 * - standInReplica: a stand-in gateway replica. On Redis it subscribes to the
 *   invalidation channel, decodes each message with a KeyStateCodec under the
 *   key-cache secret, records what it dropped (and what it rejected) and
 *   acknowledges with a MAC'd acknowledgement, unless told not to. Optionally
 *   it also registers in gateway_replicas and polls the invalidation log as a
 *   gateway replica does (or registers and then stops polling, or keeps
 *   polling without ever applying anything: a replica that is live but behind).
 * - testInvalidator: a revoker, KeyRevocationNotifier, whose Redis channel is
 *   on a test prefix (or on a Redis that is not there), with the options that
 *   shorten its windows.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import type { Pool } from '@scoped/shared/db'
import type { KeyInvalidator, RedisChannel } from '@scoped/shared/key-invalidation'
import { acknowledgeInvalidation, KeyRevocationNotifier, LIVE_WINDOW_MS } from '@scoped/shared/key-invalidation'
import type { InvalidationMessage } from '@scoped/shared/key-state'
import { KeyStateCodec, redisNames } from '@scoped/shared/key-state'
import { pollInvalidations, readRecentInvalidations, leaveRegistry } from '@scoped/shared/key-store'
import { connectRedis, createRedis } from '@scoped/shared/redis'
import type { Teardown } from './teardown.js'

/** A fresh key-cache secret (what KEY_CACHE_SECRET holds). */
export function newKeyCacheSecret(): Buffer {
  return randomBytes(32)
}

export interface RedisPlace {
  url: string
  prefix: string
}

export interface StandInOptions {
  /** The key-cache secret: messages are decoded and acknowledgements sealed under it… */
  secret?: Buffer
  /** …or the codec that holds it (of a revoker built elsewhere: see redisChannelOf). */
  codec?: KeyStateCodec
  /** Listen on this Redis and prefix; omitted or null: no Redis at all (a replica that hears only the log). */
  redis?: RedisPlace | null
  /** Acknowledge each message it decodes (default true). */
  acknowledge?: boolean
  /** This replica's id in acknowledgements and in the registry (default: a fresh one). */
  replicaId?: string
  /**
   * Register in gateway_replicas and poll the invalidation log like a gateway replica.
   * `mode`: `follow` (default) applies what each poll reads and reports it applied;
   * `stuck` keeps polling (so stays live) but always reports the snapshot it started from.
   */
  registry?: { pool: Pool; intervalMs?: number; mode?: 'follow' | 'stuck' }
}

export interface StandInReplica {
  readonly id: string
  /** Hashes dropped on a Redis message, in order. */
  readonly droppedByMessage: string[]
  /** Hashes dropped from the invalidation log, in order. */
  readonly droppedByLog: string[]
  /** Every hash dropped, by either path, once each, in the order first dropped. */
  dropped(): string[]
  /** The messages it decoded. */
  readonly messages: InvalidationMessage[]
  /** Texts on the channel that failed their check (forged, sealed under another secret, malformed). */
  readonly rejected: string[]
  /** Successful polls so far, and when (Date.now()) the last one was sent. */
  readonly polls: { count: number; lastSentAt: number }
  /** Stops polling, staying in the registry: a replica that hung or lost Postgres. */
  pause(): Promise<void>
  /** Stops everything and leaves the registry (done at teardown anyway). */
  stop(): Promise<void>
}

export async function standInReplica(t: Teardown, options: StandInOptions): Promise<StandInReplica> {
  const id = options.replicaId ?? `stand-in-${randomUUID()}`
  const codec = options.codec ?? (options.secret === undefined ? undefined : new KeyStateCodec(options.secret))
  if (codec === undefined) throw new Error('a stand-in replica needs the key-cache secret or its codec')
  const acknowledge = options.acknowledge ?? true
  const droppedByMessage: string[] = []
  const droppedByLog: string[] = []
  const messages: InvalidationMessage[] = []
  const rejected: string[] = []
  const polls = { count: 0, lastSentAt: -Infinity }

  let subscriber: Redis | undefined
  let commands: Redis | undefined
  if (options.redis) {
    const { url, prefix } = options.redis
    subscriber = new Redis(url)
    commands = new Redis(url)
    const acks = commands
    subscriber.on('message', (_channel: string, text: string) => {
      const message = codec.decodeMessage(text)
      if (message === undefined) {
        rejected.push(text)
        return
      }
      messages.push(message)
      // A creation drops nothing (it adds to the issued-key filter): only what a gateway forgets is recorded.
      droppedByMessage.push(...message.keys.filter((key) => key.state !== 'created').map((key) => key.hash))
      if (acknowledge) void acknowledgeInvalidation(acks, prefix, codec, message.id, id).catch(() => undefined)
    })
    await subscriber.subscribe(redisNames(prefix).channel)
  }

  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> = Promise.resolve()
  let polling = false
  let left = false
  const registry = options.registry
  if (registry !== undefined) {
    const intervalMs = registry.intervalMs ?? 50
    // Only what is committed from now on: recentSeconds 0 reads no old rows, just the snapshot.
    const start = await readRecentInvalidations(registry.pool, 0)
    let applied = start.snapshot
    const poll = async (): Promise<void> => {
      const sentAt = Date.now()
      const result = await pollInvalidations(registry.pool, id, applied, LIVE_WINDOW_MS)
      if (registry.mode !== 'stuck') {
        droppedByLog.push(...result.changes.filter((change) => change.state !== 'created').map((change) => change.hash))
        applied = result.snapshot
      }
      polls.count++
      polls.lastSentAt = sentAt
    }
    const schedule = (): void => {
      if (!polling) return
      timer = setTimeout(() => {
        running = poll()
          .catch(() => undefined)
          .finally(schedule)
      }, intervalMs)
    }
    await poll()
    polling = true
    schedule()
  }

  const pause = async (): Promise<void> => {
    polling = false
    clearTimeout(timer)
    await running
  }
  const stop = async (): Promise<void> => {
    await pause()
    subscriber?.disconnect()
    commands?.disconnect()
    if (registry !== undefined && !left) {
      left = true
      await leaveRegistry(registry.pool, id).catch(() => undefined)
    }
  }
  t.teardown(stop)

  return {
    id,
    droppedByMessage,
    droppedByLog,
    dropped: () => [...new Set([...droppedByMessage, ...droppedByLog])],
    messages,
    rejected,
    polls,
    pause,
    stop,
  }
}

export interface TestRevokerOptions {
  /** The Redis fast path's place; null: Postgres alone. */
  redis: RedisPlace | null
  secret: Buffer
  deadlineMs?: number
  ackWaitMs?: number
  liveWindowMs?: number
}

/**
 * A revoker as agency-service builds one (createKeyInvalidator), with the
 * windows a test may shorten. Redis is connected in the background, so one
 * that is not there is found out by the revoke itself.
 */
export function testInvalidator(t: Teardown, pool: Pool, options: TestRevokerOptions): KeyRevocationNotifier {
  let channel: RedisChannel | null = null
  if (options.redis !== null) {
    const commands = createRedis(options.redis.url, 'test-revoker-commands')
    const blocking = createRedis(options.redis.url, 'test-revoker-blocking', { blocking: true })
    const connected = Promise.all([connectRedis(commands), connectRedis(blocking)]).then(() => undefined)
    connected.catch(() => undefined)
    channel = { commands, blocking, prefix: options.redis.prefix, codec: new KeyStateCodec(options.secret), connected }
  }
  const { deadlineMs, ackWaitMs, liveWindowMs } = options
  const invalidator = new KeyRevocationNotifier(pool, channel, {
    ...(deadlineMs === undefined ? {} : { deadlineMs }),
    ...(ackWaitMs === undefined ? {} : { ackWaitMs }),
    ...(liveWindowMs === undefined ? {} : { liveWindowMs }),
  })
  t.teardown(() => invalidator.close())
  return invalidator
}

/**
 * The Redis channel of a revoker built elsewhere (the agency-service test
 * fixture makes its own key-cache secret and does not expose it): read from
 * KeyRevocationNotifier's private field, checked so that a change of that
 * class fails here loudly rather than making a test pass vacuously.
 */
export function redisChannelOf(invalidator: KeyInvalidator): RedisChannel {
  const channel: unknown = invalidator instanceof KeyRevocationNotifier ? (invalidator as unknown as { redis: unknown }).redis : undefined
  if (typeof channel !== 'object' || channel === null || !('codec' in channel) || !(channel.codec instanceof KeyStateCodec)) {
    throw new Error('not a KeyRevocationNotifier with a Redis channel')
  }
  return channel as RedisChannel
}
