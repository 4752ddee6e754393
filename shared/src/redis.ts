/**
 * Redis clients. Commands fail fast instead of queueing while disconnected:
 * the gateway must fall back to Postgres (or answer 503) at once rather than
 * hold requests, and a revoker must learn at once that it could not reach Redis.
 */
import { Redis } from 'ioredis'

export type { Redis }

export function createRedis(url: string, name: string, options: { blocking?: boolean } = {}): Redis {
  const client = new Redis(url, {
    connectionName: name,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    // Blocking commands (BLPOP) wait on purpose; everything else has a deadline.
    ...(options.blocking ? {} : { commandTimeout: 2_000 }),
    retryStrategy: (attempt) => Math.min(attempt * 100, 2_000),
    lazyConnect: true,
  })
  // Errors surface through the commands that fail; an unhandled 'error' event would crash the process.
  client.on('error', () => undefined)
  return client
}

/** Connects and waits until the client can take commands. */
export async function connectRedis(client: Redis): Promise<void> {
  if (client.status === 'ready') return
  await client.connect()
}
