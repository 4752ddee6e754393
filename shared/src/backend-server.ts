/**
 * What the two backend services (agency-service, resource-service) share
 * about being a server: their Fastify options, the unsigned health probes,
 * and a listen that ends cleanly on SIGTERM.
 */
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createSecureContext } from 'node:tls'
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { Logger } from 'pino'
import type { Env } from './config.js'
import { ConfigError, readFilePath } from './config.js'
import type { Pool } from './db.js'
import { errorCatalog } from './errors.js'
import { sendError } from './error-envelope-plugin.js'
import { maskForLog } from './log-mask.js'

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

/** A backend's own TLS listener: PEM certificate (chain) and private key. */
export interface BackendTls {
  cert: string
  key: string
}

/**
 * `<PREFIX>_TLS_CERT_FILE` and `<PREFIX>_TLS_KEY_FILE` (both or neither),
 * read and checked to be a matching PEM certificate and key; undefined when
 * neither is set (the backend listens on plain HTTP, for a private network).
 */
export function readBackendTls(env: Env, prefix: string): BackendTls | undefined {
  const certVariable = `${prefix}_TLS_CERT_FILE`
  const keyVariable = `${prefix}_TLS_KEY_FILE`
  const certFile = readFilePath(env, certVariable)
  const keyFile = readFilePath(env, keyVariable)
  if (certFile === undefined && keyFile === undefined) return undefined
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
  return tls
}

/**
 * The Fastify options of a backend that listens with TLS when `tls` is given
 * (TLS 1.2 or newer). The instance's type stays the plain one: routes and
 * hooks are the same either way.
 */
export function withTls(options: FastifyServerOptions, tls: BackendTls | undefined): FastifyServerOptions {
  if (tls === undefined) return options
  return { ...options, https: { cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' } } as FastifyServerOptions
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
  /** Runs after the server has stopped taking and finished its requests (close pools, Redis clients). */
  release: () => Promise<void>
}

/**
 * Listens, logs "<name> ready", and on SIGTERM (or SIGINT) finishes the
 * requests in flight, releases what the service holds and exits 0.
 */
export async function serveUntilTerminated(app: FastifyInstance, options: ServeOptions): Promise<void> {
  const address = await app.listen({ host: options.host, port: options.port })
  app.log.info({ address }, `${options.name} ready`)
  let stopping = false
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return
    stopping = true
    app.log.info({ signal }, `${options.name} stopping`)
    app
      .close()
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
