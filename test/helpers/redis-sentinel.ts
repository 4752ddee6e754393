/**
 * A Redis Sentinel deployment of the test's own, from Debian's redis-server
 * package: a primary, two replicas of it and one Sentinel that monitors them
 * (quorum 1, the primary judged down after 1 s), each a process on a free
 * port with a throw-away directory and no persistence. The Sentinel is
 * `redis-sentinel` when that package is installed, else the same binary as
 * `redis-server --sentinel` (which is what redis-sentinel is). Every process
 * is killed and every directory removed at teardown.
 *
 * Nothing here touches the shared Redis on 6379.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { freePort } from './processes.js'
import type { Teardown } from './teardown.js'
import { spawnUntilReady } from './spawn.js'
import type { Spawned } from './spawn.js'
import { waitFor } from './wait-for.js'

export interface SentinelDeployment {
  /** redis+sentinel://127.0.0.1:<sentinel port>/<master name>: REDIS_URL for every process. */
  readonly url: string
  readonly masterName: string
  /** The port of the node the Sentinel names as primary now. */
  primaryPort(): Promise<number>
  /** SIGKILLs the current primary, as a crash; resolves with its port once it has exited. */
  killPrimary(): Promise<number>
  /**
   * A planned failover (SENTINEL FAILOVER) once the Sentinel has a healthy replica to promote: the
   * primary is demoted to a replica of the new one and stays up. Resolves with its port.
   */
  demotePrimary(): Promise<number>
  /** The names (CLIENT SETNAME) of the clients connected to the node on `port` now. */
  clientNames(port: number): Promise<string[]>
  /** Resolves with the new primary's port once the Sentinel names another node than `oldPort` and that node is a primary. */
  waitForFailover(oldPort: number, timeoutMs?: number): Promise<number>
}

const START_TIMEOUT_MS = 10_000
interface Node {
  port: number
  process: Spawned
}

function launch(command: string, args: string[], ready: RegExp, name: string, cwd: string): Promise<Spawned> {
  return spawnUntilReady({ name, command, args, env: process.env, cwd, ready, timeoutMs: START_TIMEOUT_MS, keepOutput: 16_384 })
}

async function withClient<T>(port: number, work: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null })
  client.on('error', () => undefined)
  try {
    await client.connect()
    return await work(client)
  } finally {
    client.disconnect()
  }
}

/** waitFor, where a probe that throws (a node restarting) counts as not yet. */
function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  return waitFor(() => probe().catch(() => undefined), what, timeoutMs, 100)
}

export async function startSentinelDeployment(t: Teardown, masterName = 'scoped-test'): Promise<SentinelDeployment> {
  const dir = mkdtempSync(join(tmpdir(), 'redis-sentinel-'))
  const nodes: Node[] = []
  t.teardown(async () => {
    await Promise.all(nodes.map((node) => node.process.stop('SIGKILL')))
    rmSync(dir, { recursive: true, force: true })
  })

  async function dataNode(name: string, extra: string[]): Promise<Node> {
    const port = await freePort()
    const args = [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      '--dbfilename',
      `${name}.rdb`,
      '--protected-mode',
      'no',
      ...extra,
    ]
    const node = { port, process: await launch('redis-server', args, /Ready to accept connections/, `redis-server ${name}`, dir) }
    nodes.push(node)
    return node
  }

  const primary = await dataNode('primary', [])
  const replicas = [
    await dataNode('replica-1', ['--replicaof', '127.0.0.1', String(primary.port)]),
    await dataNode('replica-2', ['--replicaof', '127.0.0.1', String(primary.port)]),
  ]
  for (const replica of replicas) {
    await until('the replicas in sync with the primary', START_TIMEOUT_MS, () =>
      withClient(replica.port, async (client) => ((await client.info('replication')).includes('master_link_status:up') ? true : undefined)),
    )
  }

  const sentinelPort = await freePort()
  const config = join(dir, 'sentinel.conf')
  writeFileSync(
    config,
    [
      `port ${sentinelPort}`,
      'bind 127.0.0.1',
      'protected-mode no',
      `dir ${dir}`,
      `sentinel monitor ${masterName} 127.0.0.1 ${primary.port} 1`,
      `sentinel down-after-milliseconds ${masterName} 1000`,
      `sentinel failover-timeout ${masterName} 10000`,
      `sentinel parallel-syncs ${masterName} 1`,
      '',
    ].join('\n'),
  )
  const [command, args] = existsSync('/usr/bin/redis-sentinel') ? ['redis-sentinel', [config]] : ['redis-server', [config, '--sentinel']]
  const sentinel = { port: sentinelPort, process: await launch(command, args, /\+monitor master/, 'redis sentinel', dir) }
  nodes.push(sentinel)
  // The Sentinel learns of the replicas from the primary's INFO; it can fail over only to a replica it knows, in sync.
  async function healthyReplicas(): Promise<number> {
    return withClient(sentinelPort, async (client) => {
      const known = (await client.call('SENTINEL', 'REPLICAS', masterName)) as string[][]
      return known.filter((fields) => {
        const field = (name: string): string | undefined => fields[fields.indexOf(name) + 1]
        return !/s_down|o_down|disconnected/.test(field('flags') ?? '') && field('master-link-status') === 'ok'
      }).length
    })
  }
  await until('the Sentinel to know both replicas', 30_000, async () => ((await healthyReplicas()) === replicas.length ? true : undefined))

  async function primaryPort(): Promise<number> {
    return withClient(sentinelPort, async (client) => {
      const address = (await client.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', masterName)) as [string, string]
      return Number(address[1])
    })
  }

  return {
    url: `redis+sentinel://127.0.0.1:${sentinelPort}/${masterName}`,
    masterName,
    primaryPort,
    async killPrimary() {
      const port = await primaryPort()
      const node = nodes.find((candidate) => candidate.port === port)
      if (node === undefined) throw new Error(`no node on ${port}`)
      await node.process.stop('SIGKILL')
      return port
    },
    clientNames(port) {
      return withClient(port, async (client) => {
        const list = (await client.call('CLIENT', 'LIST')) as string
        return [...list.matchAll(/ name=(\S*)/g)].map((match) => match[1]!).filter((name) => name !== '')
      })
    },
    async demotePrimary() {
      await until('a healthy replica to promote', 30_000, async () => ((await healthyReplicas()) > 0 ? true : undefined))
      // Right after another failover the Sentinel may still be reconfiguring the replicas and answer
      // INPROG (or NOGOODSLAVE while they resync): asked again until it takes this one on.
      let port = 0
      await until('the Sentinel to start a planned failover', 60_000, async () => {
        port = await primaryPort()
        return withClient(sentinelPort, (client) => client.call('SENTINEL', 'FAILOVER', masterName))
      })
      return port
    },
    waitForFailover(oldPort, timeoutMs = 30_000) {
      return until('a failover', timeoutMs, async () => {
        const port = await primaryPort()
        if (port === oldPort) return undefined
        const role = await withClient(port, async (client) => ((await client.call('ROLE')) as [string])[0])
        return role === 'master' ? port : undefined
      })
    },
  }
}
