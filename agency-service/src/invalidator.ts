/**
 * The key invalidator for this process (agency-service, ctl). It always
 * confirms through Postgres; with REDIS_URL and the key-cache secret it also
 * takes the fast path through Redis. Redis is connected in the background:
 * a revoke commits to Postgres first and never waits for Redis to come up.
 */
import type { Pool } from '@scoped/shared/db'
import type { KeyInvalidator, RedisChannel } from '@scoped/shared/key-invalidation'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KeyStateCodec } from '@scoped/shared/key-state'
import { connectRedis, createRedis } from '@scoped/shared/redis'

export interface InvalidatorSettings {
  redisUrl: string | undefined
  redisKeyPrefix: string
  /** KEY_CACHE_SECRET (or derived); without it the Redis fast path is skipped. */
  keyCacheSecret: Buffer | undefined
}

export function createKeyInvalidator(pool: Pool, settings: InvalidatorSettings, name: string): KeyInvalidator {
  let channel: RedisChannel | null = null
  if (settings.redisUrl !== undefined && settings.keyCacheSecret !== undefined) {
    const commands = createRedis(settings.redisUrl, `${name}-commands`)
    const blocking = createRedis(settings.redisUrl, `${name}-blocking`, { blocking: true })
    const connected = Promise.all([connectRedis(commands), connectRedis(blocking)]).then(() => undefined)
    // Reported by the revoke that needs it; never an unhandled rejection.
    connected.catch(() => undefined)
    channel = { commands, blocking, prefix: settings.redisKeyPrefix, codec: new KeyStateCodec(settings.keyCacheSecret), connected }
  }
  return new KeyRevocationNotifier(pool, channel)
}
