/**
 * The resource-service application: /v1/agents, /v1/contacts and /v1/calls
 * for SUB-ACCOUNT callers, trusting only requests the gateway signed.
 */
import Fastify from 'fastify'
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { apiDocumentPlugin } from '@scoped/shared/api-document'
import { backendServerOptions, closeConnectionsWhenStopping, HEALTH_ROUTES, healthRoutes, withTls } from '@scoped/shared/backend-server'
import type { BackendTls } from '@scoped/shared/backend-server'
import type { Pool } from '@scoped/shared/db'
import type { NonceRedis } from '@scoped/shared/nonce-store'
import { errorEnvelopePlugin } from '@scoped/shared/error-envelope-plugin'
import { requireTenantScope, tenantVerifier } from '@scoped/shared/tenant-verifier'
import type { SigningSecret } from '@scoped/shared/tenant-signature'
import { RESOURCE_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'
import { agents } from './resources/agents.js'
import { calls } from './resources/calls.js'
import { contacts } from './resources/contacts.js'
import { resourceRoutes } from './resources/resource-routes.js'

export interface ResourceAppDeps {
  pool: Pool
  logger: Logger
  /** This service's audience secrets (readAudienceSecrets): the current one, then the previous one during a rotation. */
  signingSecrets: readonly SigningSecret[]
  /** The clock, for the signature's replay window; tests move it. */
  now?: () => Date
  /** Certificate and key to listen with TLS (RESOURCE_SERVICE_TLS_CERT_FILE / _KEY_FILE); plain HTTP when absent. */
  https?: BackendTls
  /** Where every replica remembers the nonces it accepted (REDIS_URL); this process alone when absent. */
  nonceRedis?: NonceRedis
}

export async function buildResourceApp(deps: ResourceAppDeps): Promise<FastifyInstance> {
  const now = deps.now ?? (() => new Date())
  const app = Fastify(withTls(backendServerOptions(deps.logger), deps.https))
  await app.register(errorEnvelopePlugin)
  // Before any route: it records each route's schemas for the API description (npm run openapi).
  await app.register(apiDocumentPlugin, { service: 'resource-service', scope: 'SUB-ACCOUNT' })
  await app.register(closeConnectionsWhenStopping)
  await app.register(tenantVerifier, {
    audience: RESOURCE_SERVICE_AUDIENCE,
    secrets: deps.signingSecrets,
    now: () => now().getTime() / 1000,
    unsignedRoutes: HEALTH_ROUTES,
    ...(deps.nonceRedis === undefined ? {} : { redis: deps.nonceRedis }),
  })
  await app.register(healthRoutes, { pool: deps.pool })
  await app.register(
    async (v1) => {
      v1.addHook('onRequest', requireTenantScope('SUB-ACCOUNT'))
      await v1.register(resourceRoutes(agents), { pool: deps.pool })
      await v1.register(resourceRoutes(contacts), { pool: deps.pool })
      await v1.register(resourceRoutes(calls), { pool: deps.pool })
    },
    { prefix: '/v1' },
  )
  return app
}
