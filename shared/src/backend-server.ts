/**
 * What the two backend services (agency-service, resource-service) share
 * about being a server: their Fastify options, the unsigned health probes,
 * and a listen that ends cleanly on SIGTERM.
 */
import { randomUUID } from 'node:crypto'
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { Logger } from 'pino'
import type { Pool } from './db.js'
import { errorCatalog } from './errors.js'
import { sendError } from './error-envelope-plugin.js'

/** Query schema of a route that takes no query parameters: any is refused, like an unknown body field. */
export const NO_QUERY_SCHEMA = { type: 'object', properties: {}, additionalProperties: false } as const

/** Probes that are never signed; pass them to the tenant verifier's `unsignedRoutes`. */
export const HEALTH_ROUTES = ['/healthz', '/readyz'] as const

/** A request id from outside is used only when it looks like one, so log lines stay clean. */
const REQUEST_ID_PATTERN = /^[0-9A-Za-z._:-]{1,128}$/

export function backendServerOptions(logger: Logger): FastifyServerOptions {
  return {
    loggerInstance: logger,
    // The gateway passes the caller's request id (or one it made), so log lines of one request share it.
    requestIdHeader: false,
    genReqId: (request) => {
      const id = request.headers['x-request-id']
      return typeof id === 'string' && REQUEST_ID_PATTERN.test(id) ? id : randomUUID()
    },
    bodyLimit: 100 * 1024,
    // Validation never converts types: a body's `"name": 123` is refused, not read as "123"; an unknown
    // field is refused, not dropped. Query strings convert their own numbers (see pagination).
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false } },
    // Idle keep-alive connections are closed at shutdown; requests in flight are finished.
    forceCloseConnections: 'idle',
    return503OnClosing: true,
  }
}

/**
 * While the service is stopping, each answer closes its connection.
 * Otherwise a keep-alive connection whose request was in flight at SIGTERM
 * (the gateway's, say) would hold the process open until the keep-alive
 * timeout; idle connections are closed at once (`forceCloseConnections`).
 */
export const closeConnectionsWhenStopping = fp(
  async (app: FastifyInstance) => {
    let stopping = false
    app.addHook('preClose', async () => {
      stopping = true
    })
    app.addHook('onSend', async (_request, reply, payload) => {
      if (stopping) reply.header('connection', 'close')
      return payload
    })
  },
  { name: 'close-connections-when-stopping', fastify: '5.x' },
)

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
