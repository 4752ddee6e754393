/**
 * A private `redis-server` for fault tests: its own process on a free port,
 * no persistence (`--save ''`, no append-only file, a throw-away working
 * directory), which a test may stop (as if Redis died), start again on the
 * same port (empty, as a restarted cache is), and reconfigure with CONFIG SET
 * (to make it refuse writes, say). Killed at teardown whatever state it is in.
 *
 * Nothing here touches the shared Redis on 6379.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { freePort } from './processes.js'
import type { Teardown } from './teardown.js'
import { spawnUntilReady } from './spawn.js'
import type { Spawned } from './spawn.js'

export interface PrivateRedis {
  /** redis://127.0.0.1:<port>, the same across stop and start. */
  readonly url: string
  readonly port: number
  /** Whether the server process is running now. */
  readonly running: boolean
  /** Stops the server (SIGKILL by default: Redis dies; SIGTERM: a clean shutdown) and waits until it has exited. */
  stop(signal?: NodeJS.Signals): Promise<void>
  /** Starts it again on the same port, empty; resolves once it accepts connections. */
  start(): Promise<void>
  /** CONFIG SET name value, through a short-lived connection. */
  configSet(name: string, value: string): Promise<void>
  /** INFO <section> as a map of its fields. */
  info(section: string): Promise<Record<string, string>>
  /** A command client of the test's own (ioredis), disconnected at teardown; it reconnects across stop and start. */
  client(): Redis
}

const READY = /Ready to accept connections/
const START_TIMEOUT_MS = 10_000

export async function startRedisServer(t: Teardown): Promise<PrivateRedis> {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'redis-fault-'))
  const url = `redis://127.0.0.1:${port}`
  const clients: Redis[] = []
  let server: Spawned | undefined

  async function launch(): Promise<void> {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]
    args.push('--daemonize', 'no', '--protected-mode', 'no', '--loglevel', 'notice')
    server = await spawnUntilReady({
      name: `redis-server on ${port}`,
      command: 'redis-server',
      args,
      env: process.env,
      cwd: dir,
      ready: READY,
      timeoutMs: START_TIMEOUT_MS,
      keepOutput: 16_384,
    })
  }

  async function stop(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const running = server
    if (running === undefined) return
    server = undefined
    await running.stop(signal)
  }

  async function control<T>(work: (client: Redis) => Promise<T>): Promise<T> {
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null })
    client.on('error', () => undefined)
    await client.connect()
    try {
      return await work(client)
    } finally {
      client.disconnect()
    }
  }

  t.teardown(async () => {
    for (const client of clients) client.disconnect()
    await stop('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  })

  await launch()

  return {
    url,
    port,
    get running() {
      return server !== undefined
    },
    stop,
    async start() {
      if (server !== undefined) return
      await launch()
    },
    async configSet(name, value) {
      await control((client) => client.config('SET', name, value))
    },
    async info(section) {
      const text = await control((client) => client.info(section))
      const fields: Record<string, string> = {}
      for (const line of text.split(/\r?\n/)) {
        const colon = line.indexOf(':')
        if (colon > 0 && !line.startsWith('#')) fields[line.slice(0, colon)] = line.slice(colon + 1)
      }
      return fields
    },
    client() {
      const client = new Redis(url, { maxRetriesPerRequest: 1, retryStrategy: (attempt) => Math.min(attempt * 100, 1_000) })
      client.on('error', () => undefined)
      clients.push(client)
      return client
    },
  }
}
