/**
 * Redis clients. Commands fail fast instead of queueing while disconnected:
 * the gateway must fall back to Postgres (or answer 503) at once rather than
 * hold requests, and a revoker must learn at once that it could not reach Redis.
 *
 * REDIS_URL names one server (`redis://`, `rediss://`) or a Sentinel
 * deployment (`redis+sentinel://`, see RedisSentinelSettings in config.ts).
 * A Sentinel client asks the Sentinels for the current primary whenever it
 * (re)connects, and checks that it is one; while it reconnects, commands fail
 * fast as above. A primary that crashed closes its connections, so clients
 * reconnect by themselves. A primary demoted by a planned failover stays up,
 * and the Sentinels reconfigure it only seconds later: meanwhile clients
 * would keep using it, and miss what is published on the new one. So each
 * client also listens to the Sentinels' announcements of a new primary
 * (watchFailovers) and reconnects at once; and a write answered READONLY
 * makes it reconnect too. (ioredis' own `failoverDetector` is not used: when
 * it fires while the client is already reconnecting after a crash, the client
 * stops reconnecting for good.)
 */
import { Redis } from 'ioredis'
import type { RedisOptions } from 'ioredis'
import { isRedisSentinelUrl, parseRedisSentinelUrl } from './config.js'
import type { RedisSentinelSettings } from './config.js'

export type { Redis }

const retry = (attempt: number): number => Math.min(attempt * 100, 2_000)

/** ioredis options for the Sentinel form of REDIS_URL. */
export function sentinelOptions(url: string): RedisOptions {
  const settings = parseRedisSentinelUrl(url)
  return {
    sentinels: settings.sentinels.map(({ host, port }) => ({ host, port })),
    name: settings.masterName,
    role: 'master',
    username: settings.username,
    password: settings.password,
    sentinelUsername: settings.sentinelUsername,
    sentinelPassword: settings.sentinelPassword,
    db: settings.db,
    sentinelRetryStrategy: retry,
    // A demoted primary: reconnect (to the one the Sentinels name now); the command that failed is not retried.
    reconnectOnError: (error) => error.message.startsWith('READONLY'),
    ...(settings.tls ? { tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
  }
}

/**
 * What the Sentinels announce when a master moves, and where in each message
 * the master's name and the new primary's address are:
 *   +promoted-slave slave <ip>:<port> <ip> <port> @ <master-name> <old ip> <old port>   (the replica is primary now)
 *   +switch-master <master-name> <old ip> <old port> <new ip> <new port>                (the failover is complete)
 */
function announcedPrimary(channel: string, message: string): { master: string; host: string; port: number } | undefined {
  const words = message.split(' ')
  if (channel === '+switch-master') return { master: words[0] ?? '', host: words[3] ?? '', port: Number(words[4]) }
  if (channel === '+promoted-slave') return { master: words[words.indexOf('@') + 1] ?? '', host: words[2] ?? '', port: Number(words[3]) }
  return undefined
}

/**
 * Reconnects `client` as soon as a Sentinel announces that its master moved,
 * when it is not connected to the new primary already. Only a ready client is
 * told to reconnect: one that is reconnecting asks the Sentinels anyway, and
 * interrupting its attempt would end it for good. One subscription per
 * Sentinel, from the client's first connection until it is closed.
 */
function watchFailovers(client: Redis, settings: RedisSentinelSettings): void {
  let watchers: Redis[] | undefined
  client.once('ready', () => {
    watchers = settings.sentinels.map(({ host, port }) => {
      const watcher = new Redis({
        host,
        port,
        username: settings.sentinelUsername,
        password: settings.sentinelPassword,
        connectionName: `${client.options.connectionName ?? 'redis'}-failover-watch`,
        lazyConnect: true,
        maxRetriesPerRequest: null,
        retryStrategy: retry,
        ...(settings.tls ? { tls: {} } : {}),
      })
      watcher.on('error', () => undefined)
      watcher.on('message', (channel: string, message: string) => {
        const primary = announcedPrimary(channel, message)
        if (primary === undefined || primary.master !== settings.masterName || client.status !== 'ready') return
        const stream = client.stream
        if (stream.remotePort === primary.port && stream.remoteAddress?.replace(/^::ffff:/, '') === primary.host) return
        client.disconnect(true)
      })
      watcher.subscribe('+promoted-slave', '+switch-master').catch(() => undefined)
      return watcher
    })
  })
  client.once('end', () => {
    for (const watcher of watchers ?? []) watcher.disconnect()
  })
}

export function createRedis(url: string, name: string, options: { blocking?: boolean } = {}): Redis {
  const common: RedisOptions = {
    connectionName: name,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    // Blocking commands (BLPOP) wait on purpose; everything else has a deadline.
    ...(options.blocking ? {} : { commandTimeout: 2_000 }),
    retryStrategy: retry,
    lazyConnect: true,
  }
  const sentinel = isRedisSentinelUrl(url)
  const client = sentinel ? new Redis({ ...sentinelOptions(url), ...common }) : new Redis(url, common)
  if (sentinel) watchFailovers(client, parseRedisSentinelUrl(url))
  // Errors surface through the commands that fail; an unhandled 'error' event would crash the process.
  client.on('error', () => undefined)
  return client
}

/** Connects and waits until the client can take commands. */
export async function connectRedis(client: Redis): Promise<void> {
  if (client.status === 'ready') return
  await client.connect()
}
