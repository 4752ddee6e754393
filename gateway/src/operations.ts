/**
 * The operations listener (127.0.0.1 unless GATEWAY_ADMIN_HOST says
 * otherwise): liveness, readiness and Prometheus metrics, apart from the API
 * so that nothing here is reachable from where API callers come.
 */
import Fastify, { LogController } from 'fastify'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import type { Logger } from '@scoped/shared/logger'
import type { GatewayMetrics } from './metrics.js'

/** Each dependency's readiness: name → ready. */
export type ReadinessCheck = () => Promise<Record<string, boolean>>

export function buildOperationsApp(log: Logger, metrics: GatewayMetrics, readiness: ReadinessCheck): FastifyInstance {
  const app = Fastify({ loggerInstance: log as FastifyBaseLogger, logController: new LogController({ disableRequestLogging: true }) })
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    const checks = await readiness()
    const ready = Object.values(checks).every(Boolean)
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', checks })
  })
  app.get('/metrics', async (_request, reply) => reply.type(metrics.registry.contentType).send(await metrics.text()))
  return app
}
