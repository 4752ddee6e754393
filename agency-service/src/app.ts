/**
 * The agency-service application: /v1/agency and /v1/agency/sub-accounts
 * for AGENCY callers, trusting only requests the gateway signed. Plugins are
 * registered here, one line each; the console (its own sessions, unsigned)
 * lives under /console.
 */
import Fastify from 'fastify'
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { backendServerOptions, closeConnectionsWhenStopping, HEALTH_ROUTES, healthRoutes } from '@scoped/shared/backend-server'
import type { Pool } from '@scoped/shared/db'
import { errorEnvelopePlugin } from '@scoped/shared/error-envelope-plugin'
import { requireTenantScope, tenantVerifier } from '@scoped/shared/tenant-verifier'
import { CONSOLE_PREFIX, consolePlugin } from './console/index.js'
import type { KeyService } from './keys/key-service.js'
import { agencyRoutes } from './routes/agency.js'
import { subAccountRoutes } from './routes/sub-accounts.js'

/** Routes that authenticate their own callers (or none) instead of the gateway's signature. */
export const UNSIGNED_ROUTES = [...HEALTH_ROUTES, '/console'] as const

export interface AgencyAppDeps {
  pool: Pool
  keys: KeyService
  logger: Logger
  /** TENANT_SIGNING_SECRET, then TENANT_SIGNING_SECRET_PREVIOUS when set. */
  signingSecrets: readonly string[]
  /** The clock; tests move it. */
  now?: () => Date
}

export async function buildAgencyApp(deps: AgencyAppDeps): Promise<FastifyInstance> {
  const now = deps.now ?? (() => new Date())
  // The forwarded client address is trusted: only the gateway reaches this service, and it replaces any
  // x-forwarded-for a caller sends with the single address it saw,
  // so the console's per-client sign-in throttle counts real clients, not the gateway.
  const app = Fastify({ ...backendServerOptions(deps.logger), trustProxy: true })
  await app.register(errorEnvelopePlugin)
  await app.register(closeConnectionsWhenStopping)
  await app.register(tenantVerifier, { secrets: deps.signingSecrets, now: () => now().getTime() / 1000, unsignedRoutes: UNSIGNED_ROUTES })
  await app.register(healthRoutes, { pool: deps.pool })
  await app.register(consolePlugin, { prefix: CONSOLE_PREFIX, pool: deps.pool, keys: deps.keys, now })
  await app.register(
    async (v1) => {
      v1.addHook('onRequest', requireTenantScope('AGENCY'))
      await v1.register(agencyRoutes, { pool: deps.pool })
      await v1.register(subAccountRoutes, { pool: deps.pool, keys: deps.keys })
    },
    { prefix: '/v1' },
  )
  return app
}
