/**
 * Builds the gateway from its configuration and dependencies: the HTTPS API
 * listener, the plain-HTTP refusal listener and the operations listener, with
 * the key verifier, the invalidation listener and the last-use recorder.
 * Usable in-process (tests) and by main.ts.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import type { IncomingMessage, Server } from 'node:http'
import { hostname } from 'node:os'
import type { Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import Fastify, { LogController } from 'fastify'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import { Agent } from 'undici'
import type { Redis } from 'ioredis'
import type { Pool } from '@scoped/shared/db'
import { createPool } from '@scoped/shared/db'
import { errorEnvelopePlugin } from '@scoped/shared/error-envelope-plugin'
import { errorCatalog, errorEnvelope } from '@scoped/shared/errors'
import { lookupKeyByHash } from '@scoped/shared/key-lookup'
import type { Logger } from '@scoped/shared/logger'
import { connectRedis, createRedis } from '@scoped/shared/redis'
import { buildAdminApp } from './admin.js'
import { createAuthenticate } from './authenticate.js'
import type { GatewayConfig } from './config.js'
import { InvalidationListener } from './invalidation-listener.js'
import { KeyCache } from './key-cache.js'
import { KeyVerifier } from './key-verifier.js'
import { LastUseRecorder } from './last-used.js'
import { GatewayMetrics } from './metrics.js'
import { createPlainHttpServer } from './plain-http.js'
import { registerProxy, STRICT_TRANSPORT_SECURITY } from './proxy.js'
import { RedisKeyCache } from './redis-key-cache.js'
import { logRequest } from './request-log.js'
import { decorateRequestState } from './request-state.js'
import { refuse } from './respond.js'
import type { TlsCredentials } from './tls.js'
import { loadTlsCredentials, MIN_TLS_VERSION } from './tls.js'

export interface GatewayDeps {
  config: GatewayConfig
  log: Logger
  /** The logger for the line per request (createRequestLogger), on the same destination as `log`. */
  requestLog: Logger
  pool: Pool
  /** Both clients, or null without REDIS_URL. */
  redis: { commands: Redis; subscriber: Redis } | null
  tls: TlsCredentials
  replicaId?: string
}

export interface Gateway {
  readonly api: FastifyInstance
  readonly admin: FastifyInstance
  readonly plain: Server
  readonly metrics: GatewayMetrics
  readonly cache: KeyCache
  readonly verifier: KeyVerifier
  readonly listener: InvalidationListener | null
  readonly lastUse: LastUseRecorder
  /** Subscribes, starts the last-use flush, and listens on every listener. */
  start(): Promise<void>
  /** The bound ports (useful with port 0). */
  ports(): { api: number; plain: number; admin: number }
  /** Stops accepting, finishes in-flight requests, flushes last use, closes every pool. */
  close(): Promise<void>
}

/**
 * x-request-id: the caller's when it is well formed (at most 128 of
 * [A-Za-z0-9._-], and not shaped like an API key, since it is logged), else a
 * new one: this process's random prefix and a counter, unique across replicas
 * and cheaper than a UUID per request.
 */
const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/
const idPrefix = randomUUID()
let idCounter = 0
export function requestId(request: IncomingMessage): string {
  const given = request.headers['x-request-id']
  if (typeof given === 'string' && REQUEST_ID.test(given) && !given.includes('_live_')) return given
  return `${idPrefix}-${(idCounter++).toString(36)}`
}

const CLIENT_ERROR = JSON.stringify(errorEnvelope(errorCatalog.badRequest.message))
const CLIENT_ERROR_RESPONSE = `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(CLIENT_ERROR)}\r\nConnection: close\r\n\r\n${CLIENT_ERROR}`
/** How long in-flight requests get at shutdown before their connections are cut. */
const DRAIN_DEADLINE_MS = 10_000
const POSTGRES_CHECK_TIMEOUT_MS = 1_000

async function postgresReachable(pool: Pool): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), POSTGRES_CHECK_TIMEOUT_MS)))
  const check = pool.query('SELECT 1').then(
    () => true,
    () => false,
  )
  const reachable = await Promise.race([check, timeout])
  clearTimeout(timer)
  return reachable
}

function portOf(server: Server | FastifyInstance['server']): number {
  return (server.address() as AddressInfo).port
}

export async function buildGateway(deps: GatewayDeps): Promise<Gateway> {
  const { config, log, pool, redis } = deps
  const replicaId = deps.replicaId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`
  const metrics = new GatewayMetrics(config.routes)
  const cache = new KeyCache()
  const listener =
    redis === null ? null : new InvalidationListener({ subscriber: redis.subscriber, commands: redis.commands, prefix: config.redis!.keyPrefix, cache, replicaId, log, metrics })
  const shared = redis === null ? null : new RedisKeyCache(redis.commands, config.redis!.keyPrefix, (error) => log.debug({ err: error }, 'redis key cache write failed'))
  const verifier = new KeyVerifier({ store: { lookup: (hash) => lookupKeyByHash(pool, hash) }, shared, cache, metrics, log })
  const lastUse = new LastUseRecorder(pool, log)
  const dispatcher = new Agent({
    connections: 128,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    headersTimeout: config.upstreamTimeoutMs,
    bodyTimeout: config.upstreamTimeoutMs,
  })
  let draining = false
  const isDraining = (): boolean => draining
  const { requestLog } = deps

  const api = Fastify({
    https: { cert: deps.tls.cert, key: deps.tls.key, minVersion: MIN_TLS_VERSION },
    loggerInstance: log as FastifyBaseLogger,
    // One line per request comes from logRequest; the request's logger is the gateway's own (no child per request).
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: (logger) => logger,
    genReqId: requestId,
    bodyLimit: config.bodyLimit,
    exposeHeadRoutes: false,
    // Draining is answered by the gate, in the envelope.
    return503OnClosing: false,
    // The router only fails on percent-encoding it cannot decode, which the path rules refuse too.
    // Such a request passes no hook, so its log line is written here.
    frameworkErrors: (_error, request, reply) => {
      reply.header('strict-transport-security', STRICT_TRANSPORT_SECURITY).header('x-request-id', request.id)
      refuse(request, reply, 'bad-path')
      logRequest(requestLog, metrics, request, reply)
    },
    clientErrorHandler: (error: NodeJS.ErrnoException, socket: Socket) => {
      if (error.code !== 'ECONNRESET' && socket.writable) socket.end(CLIENT_ERROR_RESPONSE)
      else socket.destroy(error)
    },
  })
  decorateRequestState(api)
  await api.register(errorEnvelopePlugin)
  const authenticate = createAuthenticate({ routes: config.routes, verifier, lastUse, log })
  api.addHook('onRequest', (request, reply, done) => {
    reply.header('strict-transport-security', STRICT_TRANSPORT_SECURITY).header('x-request-id', request.id)
    if (draining) {
      refuse(request, reply, 'draining')
      return
    }
    authenticate(request, reply, done)
  })
  api.addHook('onResponse', (request, reply, done) => {
    logRequest(requestLog, metrics, request, reply)
    done()
  })
  await registerProxy(api, {
    dispatcher,
    tenantSigningSecret: config.tenantSigningSecret,
    bodyLimit: config.bodyLimit,
    metrics,
    log,
    isDraining,
  })

  const plain = createPlainHttpServer(log, metrics)
  const admin = buildAdminApp(log, metrics, async () => ({
    postgres: await postgresReachable(pool),
    cache: redis === null || (redis.commands.status === 'ready' && listener!.healthy),
    routes: config.routes.routes.length > 0,
    accepting: !draining,
  }))

  return {
    api,
    admin,
    plain,
    metrics,
    cache,
    verifier,
    listener,
    lastUse,
    async start() {
      if (redis !== null) {
        await connectRedis(redis.commands).catch((error: unknown) => log.warn({ err: error }, 'redis unavailable at start; keys are read from Postgres until it is back'))
        await listener!.start()
      }
      if (!(await postgresReachable(pool))) log.warn('Postgres unreachable at start; key checks answer 503 until it is back')
      lastUse.start()
      await api.listen({ host: config.api.host, port: config.api.port })
      await new Promise<void>((resolve, reject) => {
        plain.once('error', reject)
        plain.listen(config.plainHttp.port, config.plainHttp.host, () => {
          plain.off('error', reject)
          resolve()
        })
      })
      await admin.listen({ host: config.admin.host, port: config.admin.port })
    },
    ports() {
      return { api: portOf(api.server), plain: portOf(plain), admin: portOf(admin.server) }
    },
    async close() {
      draining = true
      const deadline = setTimeout(() => {
        log.warn('in-flight requests did not finish in time; closing their connections')
        api.server.closeAllConnections()
      }, DRAIN_DEADLINE_MS)
      deadline.unref()
      plain.closeAllConnections()
      await Promise.all([api.close(), new Promise<void>((resolve) => plain.close(() => resolve()))])
      clearTimeout(deadline)
      await dispatcher.close()
      await lastUse.stop()
      await listener?.stop()
      redis?.commands.disconnect()
      await pool.end()
      await admin.close()
    },
  }
}

/** Creates the dependencies from the configuration and builds the gateway (not yet listening). */
export async function createGateway(config: GatewayConfig, log: Logger, requestLog: Logger): Promise<Gateway> {
  const tls = await loadTlsCredentials(config.tls, config.dataDir)
  log.info({ certificate: tls.source }, 'TLS certificate loaded')
  const replicaId = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`
  const pool = createPool(config.databaseUrl, { max: 10, applicationName: 'gateway' })
  const redis =
    config.redis === null
      ? null
      : { commands: createRedis(config.redis.url, `gateway-commands-${replicaId}`), subscriber: createRedis(config.redis.url, `gateway-subscriber-${replicaId}`) }
  return buildGateway({ config, log, requestLog, pool, redis, tls, replicaId })
}
