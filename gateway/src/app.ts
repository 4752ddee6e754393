/**
 * The gateway, composed: the key layer (key-layer.ts), the HTTPS API
 * listener (api-server.ts: the gate, then the forwarder), the plain-HTTP
 * refusal listener and the operations listener, with one lifecycle:
 * start (keys first, then the listeners), and close (drain the API, then
 * close the upstream connections, stop the keys, end the database pool).
 * Usable in-process (tests, on port 0) and by main.ts.
 */
import { randomBytes } from 'node:crypto'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { hostname } from 'node:os'
import type { FastifyInstance } from 'fastify'
import { withDeadline } from '@scoped/shared/deadline'
import type { Pool } from '@scoped/shared/db'
import { createPool } from '@scoped/shared/db'
import type { DestinationStream } from 'pino'
import type { Logger } from '@scoped/shared/logger'
import { createLogger } from '@scoped/shared/logger'
import { createRedis } from '@scoped/shared/redis'
import { buildApiServer } from './api-server.js'
import type { GatewayConfig } from './config.js'
import type { ForwarderOptions } from './forwarder.js'
import type { GateOptions } from './gate.js'
import { ConnectionGuard } from './connections.js'
import type { RequestLogger } from './request-log.js'
import { createRequestLogger } from './request-log.js'
import type { KeyLayer, RedisClients } from './key-layer.js'
import { createKeyLayer } from './key-layer.js'
import { GatewayMetrics } from './metrics.js'
import { buildOperationsApp } from './operations.js'
import { allReady, readinessChecks } from './readiness.js'
import { createPlainHttpServer } from './plain-http.js'
import type { TlsCredentials } from './tls.js'
import { loadTlsCredentials } from './tls.js'
import { Upstreams } from './upstream.js'
import { upstreamTls } from './route-map.js'
import { UsageRecorder } from './usage/usage-recorder.js'
import { GATEWAY_POOL_SIZE } from './usage/usage-config.js'

export interface GatewayDeps {
  config: GatewayConfig
  log: Logger
  /** The line per request (createRequestLogger), on the same destination as `log`. */
  requestLog: RequestLogger
  pool: Pool
  /** Both clients, or null without REDIS_URL. */
  redis: RedisClients | null
  tls: TlsCredentials
  replicaId: string
}

export interface Gateway {
  readonly api: FastifyInstance
  readonly keys: KeyLayer
  readonly usage: UsageRecorder
  /** Starts the key layer, then listens on every listener. */
  start(): Promise<void>
  /** The bound ports (useful with port 0). */
  ports(): { api: number; plain: number; admin: number }
  /** Stops accepting, finishes in-flight requests, writes usage and last use, closes every pool. */
  close(): Promise<void>
}

/** How long idle keep-alive connections (and TLS handshakes under way) are kept at shutdown, so a request already on its way is answered, not reset. */
const IDLE_GRACE_MS = 1_000
/**
 * How long past the drain deadline (counted from the signal) a stopping replica keeps trying to write its last usage
 * batch, and the least it gets after a drain that took it all (main.ts gives the whole stop STOP_MARGIN_MS past the
 * drain deadline). A drain that ends early leaves the rest of the deadline to the write: a replica stopped while
 * Postgres is away still writes its counts if Postgres is back within that time.
 */
const USAGE_STOP_MS = 3_000
/** The operations listener's connections: probes and a scraper need a few. */
const ADMIN_CONNECTIONS = { max: 64, perClient: 64 } as const
function portOf(server: Server | FastifyInstance['server']): number {
  return (server.address() as AddressInfo).port
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
}

/** What the gate and the forwarder work with. */
function requestPath(
  config: GatewayConfig,
  keys: KeyLayer,
  upstreams: Upstreams,
  metrics: GatewayMetrics,
  log: Logger,
  isDraining: () => boolean,
): { gate: GateOptions; forwarder: ForwarderOptions } {
  const { routes, trustedProxies, audienceSecrets, bodyLimit } = config
  const { verifier, lastUse, throttle, limiter, issuedKeys } = keys
  return {
    gate: { routes, verifier, lastUse, throttle, limiter, trustedProxies, metrics, log, isDraining, issuedKeys },
    forwarder: { upstreams, audienceSecrets, verifier, bodyLimit, bodyTimeoutMs: config.deadlines.body, metrics, log, isDraining },
  }
}

export async function buildGateway(deps: GatewayDeps): Promise<Gateway> {
  const { config, log, pool, redis } = deps
  const metrics = new GatewayMetrics(config.routes)
  const keys = createKeyLayer(config, pool, redis, deps.replicaId, metrics, log)
  const usage = new UsageRecorder(pool, log, metrics, config.routes.routes, deps.replicaId, config.usage)
  const upstreams = new Upstreams({ ...config.upstreamPool, timeoutMs: config.deadlines.upstream }, upstreamTls(config.routes))
  let draining = false
  const isDraining = (): boolean => draining

  const api = await buildApiServer({
    config,
    tls: deps.tls,
    log,
    requestLog: deps.requestLog,
    metrics,
    usage,
    ...requestPath(config, keys, upstreams, metrics, log, isDraining),
  })
  const plain = createPlainHttpServer(log, metrics, config.deadlines)
  const readiness = readinessChecks(config, pool, keys, isDraining)
  const operations = buildOperationsApp(log, metrics, readiness, config.deadlines)
  const guards: ListenerGuards = {
    api: new ConnectionGuard(api.server, { listener: 'api', limits: config.connections, metrics, trustedProxies: config.trustedProxies }),
    plain: new ConnectionGuard(plain, { listener: 'http', limits: config.connections, metrics, trustedProxies: config.trustedProxies }),
    admin: new ConnectionGuard(operations.server, { listener: 'admin', limits: ADMIN_CONNECTIONS, metrics }),
  }
  // The same checks as gateway_ready, so an alert sees what the load balancer sees.
  metrics.readiness(async () => allReady(await readiness()))

  return {
    api,
    keys,
    usage,
    async start() {
      await keys.start()
      usage.start()
      await api.listen({ host: config.api.host, port: config.api.port })
      await listen(plain, config.plainHttp.port, config.plainHttp.host)
      await operations.listen({ host: config.admin.host, port: config.admin.port })
    },
    ports() {
      return { api: portOf(api.server), plain: portOf(plain), admin: portOf(operations.server) }
    },
    async close() {
      const stopAt = Date.now()
      draining = true
      await drainListeners(api, plain, guards, config.deadlines.drain, log)
      await upstreams.close()
      // Every answer is sent: its count is written before the pool ends (retried while Postgres is away, for a bounded time).
      await usage.stop(Math.max(USAGE_STOP_MS, stopAt + config.deadlines.drain + USAGE_STOP_MS - Date.now()))
      await keys.stop()
      await pool.end()
      guards.admin.cutAll()
      await operations.close()
    },
  }
}

/**
 * Stops the API and plain-HTTP listeners, letting in-flight requests finish
 * within GATEWAY_DRAIN_TIMEOUT_MS. An idle keep-alive connection may already carry a
 * request not yet read (a busy event loop, a request sent as the signal
 * came): Node's server.close() (and Fastify's) would destroy it at once, and
 * its client would see a reset. Idle connections get IDLE_GRACE_MS instead: a
 * request arriving meanwhile is answered (503 draining, `Connection: close`);
 * only those still idle after it are closed.
 */
async function drainListeners(api: FastifyInstance, plain: Server, guards: ListenerGuards, drainMs: number, log: Logger): Promise<void> {
  const closeIdleConnections = api.server.closeIdleConnections.bind(api.server)
  api.server.closeIdleConnections = () => undefined
  // Connections still in their TLS handshake are unknown to Node's HTTP server (and would hold its close): they go with the idle ones.
  const idleGrace = setTimeout(() => {
    closeIdleConnections()
    guards.api.cutHandshaking()
  }, IDLE_GRACE_MS)
  idleGrace.unref()
  const deadline = setTimeout(() => {
    log.warn('in-flight requests did not finish in time; closing their connections')
    api.server.closeAllConnections()
    guards.api.cutAll()
  }, drainMs)
  deadline.unref()
  plain.closeAllConnections()
  guards.plain.cutAll()
  await Promise.all([api.close(), new Promise<void>((resolve) => plain.close(() => resolve()))])
  clearTimeout(idleGrace)
  clearTimeout(deadline)
}

/** Each listener's connection guard (connections.ts). */
interface ListenerGuards {
  api: ConnectionGuard
  plain: ConnectionGuard
  admin: ConnectionGuard
}

/** Creates the dependencies from the configuration and builds the gateway (not yet listening). */
async function createGateway(config: GatewayConfig, log: Logger, requestLog: RequestLogger): Promise<Gateway> {
  const tls = await loadTlsCredentials(config.tls, config.dataDir)
  log.info({ certificate: tls.source }, 'TLS certificate loaded')
  const replicaId = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`
  const pool = createPool(config.databaseUrl, { max: GATEWAY_POOL_SIZE, applicationName: 'gateway' })
  const redis =
    config.redis === null
      ? null
      : {
          commands: createRedis(config.redis.url, `gateway-commands-${replicaId}`),
          subscriber: createRedis(config.redis.url, `gateway-subscriber-${replicaId}`),
        }
  return buildGateway({ config, log, requestLog, pool, redis, tls, replicaId })
}

/** A started gateway and its logger. */
export interface LaunchedGateway {
  gateway: Gateway
  log: Logger
}

/**
 * One replica as main.ts runs it, and as the tests start one in their own
 * process: its log lines and its line per request on `destination`, the
 * gateway built from `config` and started, then "gateway ready" logged with
 * the bound ports. A start that fails half way closes what it had opened
 * (within the drain deadline) before the error goes on.
 */
export async function launchGateway(config: GatewayConfig, destination: DestinationStream): Promise<LaunchedGateway> {
  const log = createLogger('gateway', config.logLevel, destination)
  const gateway = await createGateway(config, log, createRequestLogger(config.logLevel, destination))
  try {
    await gateway.start()
  } catch (error) {
    await withDeadline(gateway.close(), config.deadlines.drain, 'closing after a failed start').catch(() => undefined)
    throw error
  }
  const ports = gateway.ports()
  log.info({ https: ports.api, http: ports.plain, admin: ports.admin, routes: config.routesFile, redis: config.redis !== null }, 'gateway ready')
  return { gateway, log }
}
