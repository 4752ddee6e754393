/**
 * The resource-service application: /v1/agents, /v1/contacts and /v1/calls
 * for SUB-ACCOUNT callers, trusting only requests the gateway signed.
 */
import Fastify from 'fastify'
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { backendServerOptions, closeConnectionsWhenStopping, HEALTH_ROUTES, healthRoutes } from '@scoped/shared/backend-server'
import type { Pool } from '@scoped/shared/db'
import { errorEnvelopePlugin } from '@scoped/shared/error-envelope-plugin'
import { requireTenantScope, tenantVerifier } from '@scoped/shared/tenant-verifier'
import { agents } from './resources/agents.js'
import { calls } from './resources/calls.js'
import { contacts } from './resources/contacts.js'
import { resourceRoutes } from './resources/resource-routes.js'

export interface ResourceAppDeps {
  pool: Pool
  logger: Logger
  /** TENANT_SIGNING_SECRET, then TENANT_SIGNING_SECRET_PREVIOUS when set. */
  signingSecrets: readonly string[]
  /** The clock, for the signature's replay window; tests move it. */
  now?: () => Date
}

export async function buildResourceApp(deps: ResourceAppDeps): Promise<FastifyInstance> {
  const now = deps.now ?? (() => new Date())
  const app = Fastify(backendServerOptions(deps.logger))
  await app.register(errorEnvelopePlugin)
  await app.register(closeConnectionsWhenStopping)
  await app.register(tenantVerifier, { secrets: deps.signingSecrets, now: () => now().getTime() / 1000, unsignedRoutes: HEALTH_ROUTES })
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
