/**
 * The operations listener (127.0.0.1 unless GATEWAY_ADMIN_HOST says
 * otherwise): liveness, readiness and Prometheus metrics, apart from the API
 * so that nothing here is reachable from where API callers come.
 */
import Fastify, { LogController } from 'fastify'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import type { Logger } from '@scoped/shared/logger'
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from '@scoped/shared/errors'
import type { Deadlines } from './config.js'
import type { GatewayMetrics } from './metrics.js'
import type { ReadinessCheck } from './readiness.js'
import { allReady } from './readiness.js'

/**
 * The API listener's header, request and keep-alive deadlines apply here too,
 * checked every half second, so a connection that sends nothing or half a
 * request cannot hold the process at SIGTERM; close() cuts whatever is left
 * (a scrape in flight is retried by the scraper).
 */
export function buildOperationsApp(log: Logger, metrics: GatewayMetrics, readiness: ReadinessCheck, deadlines: Deadlines): FastifyInstance {
  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    http: { headersTimeout: deadlines.headers, connectionsCheckingInterval: 500 } as object,
    requestTimeout: deadlines.request,
    keepAliveTimeout: deadlines.keepAlive,
    forceCloseConnections: true,
  })
  app.get('/healthz', async () => ({ status: 'ok' }))
  // Each check by name (true: ready), and for those that fail, why.
  app.get('/readyz', async (_request, reply) => {
    const results = await readiness()
    const checks = Object.fromEntries(Object.entries(results).map(([name, result]) => [name, result.ready]))
    if (allReady(results)) return reply.code(200).send({ status: 'ready', checks })
    const reasons = Object.fromEntries(Object.entries(results).flatMap(([name, result]) => (result.ready ? [] : [[name, result.reason]])))
    return reply.code(503).header('retry-after', String(UNAVAILABLE_RETRY_AFTER_SECONDS)).send({ status: 'not ready', checks, reasons })
  })
  app.get('/metrics', async (_request, reply) => reply.type(metrics.registry.contentType).send(await metrics.text()))
  return app
}
