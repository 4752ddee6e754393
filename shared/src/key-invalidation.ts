/**
 * Cross-replica invalidation of cached API keys, over Redis.
 *
 * The promise: once a revoke or delete has returned, the very next request
 * with that key gets 401 on every gateway replica. The revoker, after its
 * Postgres transaction has committed:
 *   1. overwrites the key's Redis cache entry with a terminal marker (gateways
 *      fill that entry only with SET NX, so a lookup that raced the revoke can
 *      never put an "active" entry back);
 *   2. publishes the hashes on the invalidation channel; PUBLISH answers how
 *      many gateway replicas are subscribed;
 *   3. waits until that many replicas have acknowledged, each after dropping
 *      the key from its in-process cache.
 * A replica trusts its in-process cache only while its subscription is
 * healthy (see the gateway's key cache), so a replica that cannot hear the
 * channel never serves a stale entry. Without Redis there is one gateway
 * replica and it keeps no in-process cache of valid keys.
 */
import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import type { Tenant } from './tenant-signature.js'

/** How a key's state is cached in Redis (and in each gateway's memory). */
export type CachedKeyState =
  | { status: 'active'; tenant: Tenant }
  | { status: 'revoked' }
  | { status: 'deleted' }
  | { status: 'unknown' }

export type TerminalKeyState = 'revoked' | 'deleted'

export interface InvalidationMessage {
  id: string
  hashes: string[]
}

export interface KeyInvalidation {
  hash: string
  state: TerminalKeyState
}

export interface InvalidationReport {
  /** Gateway replicas that were subscribed when the invalidation was published. */
  subscribers: number
  acknowledged: number
}

/** Names of every Redis key and channel, under one prefix per deployment (or test run). */
export function redisNames(prefix: string) {
  return {
    cacheEntry: (hash: string) => `${prefix}key:${hash}`,
    channel: `${prefix}key-invalidation`,
    acknowledgements: (invalidationId: string) => `${prefix}key-invalidation-ack:${invalidationId}`,
  }
}

/** Terminal markers outlive any in-flight lookup by far; after they expire Postgres still answers the same. */
export const TERMINAL_MARKER_TTL_SECONDS = 24 * 60 * 60

export interface KeyInvalidator {
  invalidate(keys: readonly KeyInvalidation[]): Promise<InvalidationReport>
  close(): Promise<void>
}

/** Used when there is no Redis: the single gateway replica reads Postgres for every key check. */
export const localOnlyInvalidator: KeyInvalidator = {
  invalidate: () => Promise.resolve({ subscribers: 0, acknowledged: 0 }),
  close: () => Promise.resolve(),
}

export class InvalidationError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'InvalidationError'
  }
}

export class RedisKeyInvalidator implements KeyInvalidator {
  private readonly names: ReturnType<typeof redisNames>

  /**
   * @param commands a client for ordinary commands
   * @param blocking a client of its own for BLPOP, which holds its connection while it waits
   */
  constructor(
    private readonly commands: Redis,
    private readonly blocking: Redis,
    prefix: string,
    private readonly ackTimeoutMs = 3_000,
  ) {
    this.names = redisNames(prefix)
  }

  async invalidate(keys: readonly KeyInvalidation[]): Promise<InvalidationReport> {
    if (keys.length === 0) return { subscribers: 0, acknowledged: 0 }
    try {
      const markers = this.commands.multi()
      for (const key of keys) {
        markers.set(this.names.cacheEntry(key.hash), JSON.stringify({ status: key.state }), 'EX', TERMINAL_MARKER_TTL_SECONDS)
      }
      await markers.exec()
      const message: InvalidationMessage = { id: randomUUID(), hashes: keys.map((key) => key.hash) }
      const subscribers = await this.commands.publish(this.names.channel, JSON.stringify(message))
      const ackList = this.names.acknowledgements(message.id)
      let acknowledged = 0
      const deadline = Date.now() + this.ackTimeoutMs
      while (acknowledged < subscribers) {
        const remainingSeconds = (deadline - Date.now()) / 1000
        if (remainingSeconds <= 0) break
        const popped = await this.blocking.blpop(ackList, Math.max(remainingSeconds, 0.01))
        if (popped === null) break
        acknowledged++
      }
      await this.commands.del(ackList)
      return { subscribers, acknowledged }
    } catch (error) {
      throw new InvalidationError(`gateway caches could not be invalidated: ${error instanceof Error ? error.message : String(error)}`)
    }
  }

  async close(): Promise<void> {
    this.commands.disconnect()
    this.blocking.disconnect()
  }
}

/** Parses a message from the channel; anything malformed is ignored by the caller, never trusted. */
export function parseInvalidationMessage(text: string): InvalidationMessage | undefined {
  try {
    const value: unknown = JSON.parse(text)
    if (typeof value !== 'object' || value === null) return undefined
    const { id, hashes } = value as Record<string, unknown>
    if (typeof id !== 'string' || !Array.isArray(hashes) || !hashes.every((h) => typeof h === 'string')) return undefined
    return { id, hashes: hashes as string[] }
  } catch {
    return undefined
  }
}

/** A gateway replica's acknowledgement that it has dropped the message's keys. */
export async function acknowledgeInvalidation(commands: Redis, prefix: string, message: InvalidationMessage, replicaId: string): Promise<void> {
  const list = redisNames(prefix).acknowledgements(message.id)
  await commands.multi().rpush(list, replicaId).expire(list, 60).exec()
}
