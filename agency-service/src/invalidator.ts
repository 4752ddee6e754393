/** The key invalidator for this process: over Redis when REDIS_URL is set, local-only otherwise. */
import { createRedis, connectRedis } from '@scoped/shared/redis'
import type { KeyInvalidator } from '@scoped/shared/key-invalidation'
import { localOnlyInvalidator, RedisKeyInvalidator } from '@scoped/shared/key-invalidation'

export async function createKeyInvalidator(redisUrl: string | undefined, prefix: string, name: string): Promise<KeyInvalidator> {
  if (redisUrl === undefined) return localOnlyInvalidator
  const commands = createRedis(redisUrl, `${name}-commands`)
  const blocking = createRedis(redisUrl, `${name}-blocking`, { blocking: true })
  await Promise.all([connectRedis(commands), connectRedis(blocking)])
  return new RedisKeyInvalidator(commands, blocking, prefix)
}
