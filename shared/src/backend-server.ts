/**
 * What the two backend services (agency-service, resource-service) share
 * about being a server: their Fastify options, the unsigned health probes,
 * and a listen that ends cleanly on SIGTERM.
 */
import { X509Certificate, randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createSecureContext } from 'node:tls'
import Fastify from 'fastify'
import type { FastifyBaseLogger, FastifyInstance, FastifyServerOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { Logger } from 'pino'
import type { Env } from './config.js'
import { ConfigError, readFilePath, readPort } from './config.js'
import type { Pool } from './db.js'
import { errorCatalog } from './errors.js'
import { errorEnvelopePlugin, sendError } from './error-envelope-plugin.js'
import { maskForLog } from './log-mask.js'
import { MIN_TLS_VERSION, TLS12_CIPHERS } from './tls-ciphers.js'

/** Query schema of a route that takes no query parameters: any is refused, like an unknown body field. */
export const NO_QUERY_SCHEMA = { type: 'object', properties: {}, additionalProperties: false } as const

/** Probes that are never signed; pass them to the tenant verifier's `unsignedRoutes`. */
export const HEALTH_ROUTES = ['/healthz', '/readyz'] as const

/** A request id from outside is used only when it looks like one, so log lines stay clean. */
const REQUEST_ID_PATTERN = /^[0-9A-Za-z._:-]{1,128}$/

/** What a request logs as `req`: method, path and id. */
export interface LoggedRequest {
  method: string | undefined
  path: string
  id: string | undefined
}

/**
 * The `req` log serializer of the backends: the method, the path WITHOUT its
 * query (a careless client may put a key in it: `?api_key=…`), cut and with
 * anything shaped like a key masked (log-mask.ts: a key can be in the path
 * too), and the request id; never a header. Takes a FastifyRequest or a raw
 * IncomingMessage.
 */
export function serializeRequest(request: { method?: string; url?: string; id?: unknown }): LoggedRequest {
  const url = request.url ?? ''
  const query = url.indexOf('?')
  return {
    method: request.method,
    path: maskForLog(query === -1 ? url : url.slice(0, query)),
    id: typeof request.id === 'string' ? request.id : undefined,
  }
}

export function backendServerOptions(logger: Logger): FastifyServerOptions {
  return {
    // Fastify keeps the serializers of the instance it is given, over its own `req` (which logs the query).
    loggerInstance: logger.child({}, { serializers: { req: serializeRequest } }),
    // The gateway passes the caller's request id (or one it made), so log lines of one request share it.
    requestIdHeader: false,
    genReqId: (request) => {
      const id = request.headers['x-request-id']
      // An id shaped like a key is never adopted: it would be logged.
      return typeof id === 'string' && REQUEST_ID_PATTERN.test(id) && !id.toLowerCase().includes('live_') ? id : randomUUID()
    },
    bodyLimit: 100 * 1024,
    // Validation never converts types: a body's `"name": 123` is refused, not read as "123"; an unknown
    // field is refused, not dropped. Query strings convert their own numbers (see pagination).
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false } },
    // Idle keep-alive connections are closed at shutdown; requests in flight are finished.
    forceCloseConnections: 'idle',
    // A request that arrives while the service stops is refused by closeConnectionsWhenStopping, in the envelope.
    return503OnClosing: false,
  }
}

/**
 * While the service is stopping, each answer closes its connection.
 * Otherwise a keep-alive connection whose request was in flight at SIGTERM
 * (the gateway's, say) would hold the process open until the keep-alive
 * timeout; idle connections are closed at once (`forceCloseConnections`).
 * A request that arrives meanwhile is refused with 503 in the envelope, with
 * Retry-After (Fastify's own refusal has neither), and never run.
 */
export const closeConnectionsWhenStopping = fp(
  async (app: FastifyInstance) => {
    let stopping = false
    app.addHook('preClose', async () => {
      stopping = true
    })
    app.addHook('onRequest', async (_request, reply) => {
      if (stopping) return sendError(reply, errorCatalog.serviceUnavailable.status, errorCatalog.serviceUnavailable.message)
    })
    app.addHook('onSend', async (_request, reply, payload) => {
      if (stopping) reply.header('connection', 'close')
      return payload
    })
  },
  { name: 'close-connections-when-stopping', fastify: '5.x' },
)

/**
 * A backend's own TLS listener: PEM certificate (chain) and private key, and
 * with `clientCa` mutual TLS: the handshake fails unless the client presents
 * a certificate for client authentication signed by that CA (the gateway's;
 * server certificates of the same CA lack the client-auth usage and are refused).
 */
export interface BackendTls {
  cert: string
  key: string
  clientCa?: string
}

/** Every PEM certificate of a CA bundle parses: a bad file is said at start, not at the first handshake. */
function readCaBundle(variable: string, file: string): string {
  const text = readFileSync(file, 'utf8')
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []
  if (blocks.length === 0) throw new ConfigError(variable, `${file} holds no PEM certificate`)
  for (const block of blocks) {
    try {
      new X509Certificate(block)
    } catch (error) {
      throw new ConfigError(variable, `${file} holds a certificate that does not parse (${error instanceof Error ? error.message : String(error)})`)
    }
  }
  return text
}

/**
 * `<PREFIX>_TLS_CERT_FILE` and `<PREFIX>_TLS_KEY_FILE` (both or neither),
 * read and checked to be a matching PEM certificate and key; undefined when
 * neither is set (the backend listens on plain HTTP: `npm start` on loopback).
 * `<PREFIX>_TLS_CLIENT_CA_FILE` (only with the other two) turns on mutual
 * TLS: the CA whose client certificates alone may connect.
 */
export function readBackendTls(env: Env, prefix: string): BackendTls | undefined {
  const certVariable = `${prefix}_TLS_CERT_FILE`
  const keyVariable = `${prefix}_TLS_KEY_FILE`
  const clientCaVariable = `${prefix}_TLS_CLIENT_CA_FILE`
  const certFile = readFilePath(env, certVariable)
  const keyFile = readFilePath(env, keyVariable)
  const clientCaFile = readFilePath(env, clientCaVariable)
  if (certFile === undefined && keyFile === undefined) {
    if (clientCaFile !== undefined) throw new ConfigError(clientCaVariable, `needs ${certVariable} and ${keyVariable}: mutual TLS is TLS first`)
    return undefined
  }
  if (certFile === undefined) throw new ConfigError(certVariable, `is required when ${keyVariable} is set (give both or neither)`)
  if (keyFile === undefined) throw new ConfigError(keyVariable, `is required when ${certVariable} is set (give both or neither)`)
  const tls = { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') }
  try {
    createSecureContext(tls)
  } catch (error) {
    throw new ConfigError(
      certVariable,
      `and ${keyVariable} are not a matching PEM certificate and key (${error instanceof Error ? error.message : String(error)})`,
    )
  }
  return clientCaFile === undefined ? tls : { ...tls, clientCa: readCaBundle(clientCaVariable, clientCaFile) }
}

/** How a backend listens, for its start-up line: plain HTTP, TLS, or TLS that admits only the gateway's certificate. */
export function transportOf(tls: BackendTls | undefined): 'http' | 'tls' | 'mutual-tls' {
  return tls === undefined ? 'http' : tls.clientCa === undefined ? 'tls' : 'mutual-tls'
}

/**
 * The Fastify options of a backend that listens with TLS when `tls` is given:
 * TLS 1.2 or newer with the stack's forward-secret suites (tls-ciphers.ts),
 * and with a client CA, mutual TLS (a client without a certificate of that CA
 * fails the handshake). The instance's type stays the plain one: routes and
 * hooks are the same either way.
 */
export function withTls(options: FastifyServerOptions, tls: BackendTls | undefined): FastifyServerOptions {
  if (tls === undefined) return options
  const mutual = tls.clientCa === undefined ? {} : { ca: tls.clientCa, requestCert: true, rejectUnauthorized: true }
  return { ...options, https: { cert: tls.cert, key: tls.key, minVersion: MIN_TLS_VERSION, ciphers: TLS12_CIPHERS, ...mutual } } as FastifyServerOptions
}

/**
 * `<PREFIX>_HEALTH_PORT`: a plain-HTTP listener of its own (same host) that
 * answers /healthz and /readyz only, for probes that cannot present the
 * gateway's certificate (the kubelet's, compose's); undefined: the probes use
 * the service's own listener.
 */
export function readHealthPort(env: Env, prefix: string, servicePort: number): number | undefined {
  const variable = `${prefix}_HEALTH_PORT`
  if ((env[variable] ?? '').trim() === '') return undefined
  const port = readPort(env, variable, 0)
  if (port === servicePort) throw new ConfigError(variable, `must differ from ${prefix}_PORT (${servicePort})`)
  return port
}

/** The health listener: /healthz and /readyz, nothing else; the caller closes it when the service stops. */
export async function serveHealth(options: { pool: Pool; logger: FastifyBaseLogger; host: string; port: number }): Promise<FastifyInstance> {
  const health = Fastify({ loggerInstance: options.logger.child({ listener: 'health' }) })
  await health.register(errorEnvelopePlugin)
  await health.register(healthRoutes, { pool: options.pool })
  await health.listen({ host: options.host, port: options.port })
  return health
}

/** GET /healthz (the process is up) and GET /readyz (Postgres answers). */
export async function healthRoutes(app: FastifyInstance, options: { pool: Pool }): Promise<void> {
  app.get('/healthz', async () => ({ success: true, data: { status: 'live' } }))
  app.get('/readyz', async (request, reply) => {
    try {
      await options.pool.query('SELECT 1')
      return { success: true, data: { status: 'ready' } }
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check: Postgres unreachable')
      return sendError(reply, errorCatalog.serviceUnavailable.status, errorCatalog.serviceUnavailable.message)
    }
  })
}

export interface ServeOptions {
  name: string
  host: string
  port: number
  /** How the service listens (transportOf), said in its start-up line. */
  transport: ReturnType<typeof transportOf>
  /** A health listener of its own (readHealthPort), started after the service's and closed with it. */
  health?: { port: number; pool: Pool }
  /** Runs after the server has stopped taking and finished its requests (close pools, Redis clients). */
  release: () => Promise<void>
}

/**
 * Listens (and its health listener, if any), logs "<name> ready" with how
 * it listens, and on SIGTERM (or SIGINT) finishes the
 * requests in flight, releases what the service holds and exits 0.
 */
export async function serveUntilTerminated(app: FastifyInstance, options: ServeOptions): Promise<void> {
  const address = await app.listen({ host: options.host, port: options.port })
  const health = options.health === undefined ? undefined : await serveHealth({ ...options.health, logger: app.log, host: options.host })
  app.log.info({ address, transport: options.transport, ...(health === undefined ? {} : { health: health.addresses()[0] }) }, `${options.name} ready`)
  let stopping = false
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return
    stopping = true
    app.log.info({ signal }, `${options.name} stopping`)
    app
      .close()
      .then(() => health?.close())
      .then(options.release)
      .then(
        () => process.exit(0),
        (error: unknown) => {
          app.log.error({ err: error }, `${options.name} did not stop cleanly`)
          process.exit(1)
        },
      )
  }
  // `on`, not `once`: a second signal (Ctrl-C reaches the whole process group, then a supervisor may
  // forward its own) must not kill the process while it finishes its requests.
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}
