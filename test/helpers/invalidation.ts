/**
 * Both ends of the key-invalidation protocol for tests: a stand-in gateway
 * replica that records what it was told to drop (and acknowledges unless told
 * not to), and a revoker's RedisKeyInvalidator on a test Redis prefix.
 */
import { Redis } from 'ioredis'
import { acknowledgeInvalidation, parseInvalidationMessage, RedisKeyInvalidator, redisNames } from '@scoped/shared/key-invalidation'
import { connectRedis, createRedis } from '@scoped/shared/redis'

interface Teardown {
  teardown(fn: () => unknown): void
}

/** Subscribes like a gateway replica; resolves with the live list of hashes it has dropped. */
export async function standInReplica(t: Teardown, url: string, prefix: string, acknowledge = true): Promise<string[]> {
  const subscriber = new Redis(url)
  const commands = new Redis(url)
  t.teardown(() => {
    subscriber.disconnect()
    commands.disconnect()
  })
  const dropped: string[] = []
  subscriber.on('message', (_channel: string, text: string) => {
    const message = parseInvalidationMessage(text)
    if (message === undefined) return
    dropped.push(...message.hashes)
    if (acknowledge) void acknowledgeInvalidation(commands, prefix, message, 'stand-in-replica')
  })
  await subscriber.subscribe(redisNames(prefix).channel)
  return dropped
}

export async function testInvalidator(t: Teardown, url: string, prefix: string, ackTimeoutMs?: number): Promise<RedisKeyInvalidator> {
  const commands = createRedis(url, 'test-invalidator-commands')
  const blocking = createRedis(url, 'test-invalidator-blocking', { blocking: true })
  await Promise.all([connectRedis(commands), connectRedis(blocking)])
  const invalidator = new RedisKeyInvalidator(commands, blocking, prefix, ackTimeoutMs)
  t.teardown(() => invalidator.close())
  return invalidator
}
