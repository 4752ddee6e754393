/**
 * The agency-service application: /v1/agency, /v1/agency/sub-accounts
 * (with their keys), /v1/agency/audit-events, /v1/agency/webhooks, /v1/agency/usage and
 * /v1/agency/request-log for AGENCY callers, /v1/usage and /v1/request-log
 * for SUB-ACCOUNT callers,
 * trusting only requests the gateway signed. Plugins are
 * registered here, one line each; the console (its own sessions, unsigned)
 * lives under /console.
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
import { signedClientAddress } from '@scoped/shared/signed-client-address'
import type { SigningSecret } from '@scoped/shared/tenant-signature'
import { AGENCY_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'
import { CONSOLE_PREFIX, consolePlugin } from './console/index.js'
import type { KeyService } from './keys/key-service.js'
import { agencyRoutes } from './routes/agency.js'
import { auditEventRoutes } from './routes/audit-events.js'
import { agencyRequestLogRoutes, subAccountRequestLogRoutes } from './routes/request-log.js'
import { agencyUsageRoutes, subAccountUsageRoutes } from './routes/usage.js'
import { subAccountKeyRoutes } from './routes/sub-account-keys.js'
import { subAccountRoutes } from './routes/sub-accounts.js'
import { webhookRoutes } from './routes/webhooks.js'
import type { TargetPolicy } from './webhooks/address-policy.js'
import type { LeakConfig } from './leaks/leak-config.js'
import { CREDENTIALS_REVOKE_PATH, GITHUB_SCANNING_PATH, leakRoutes } from './leaks/leak-routes.js'
import { ReportThrottle } from './leaks/report-throttle.js'

/**
 * Routes that authenticate their own callers (or none) instead of the gateway's signature: the
 * leak reports carry no tenant (GitHub signs its own; the revocation API is for anyone).
 */
export const UNSIGNED_ROUTES = [...HEALTH_ROUTES, CONSOLE_PREFIX, GITHUB_SCANNING_PATH, CREDENTIALS_REVOKE_PATH] as const

export interface AgencyAppDeps {
  pool: Pool
  keys: KeyService
  logger: Logger
  /** This service's audience secrets (readAudienceSecrets): the current one, then the previous one during a rotation. */
  signingSecrets: readonly SigningSecret[]
  /** The clock; tests move it. */
  now?: () => Date
  /** MAC secret of the console's device cookie (readConsoleDeviceSecret); one per process when absent. */
  consoleDeviceSecret?: Buffer
  /** Certificate and key to listen with TLS (AGENCY_SERVICE_TLS_CERT_FILE / _KEY_FILE); plain HTTP when absent. */
  https?: BackendTls
  /**
   * Where every replica remembers the nonces it accepted and counts the leaked-key reports of each client
   * (REDIS_URL); this process alone when absent.
   */
  nonceRedis?: NonceRedis
  /** Which webhook URLs may be registered (WEBHOOK_ALLOW_PRIVATE_ADDRESSES); public https:// ones only when absent. */
  webhookPolicy?: TargetPolicy
  /** What a reported leak does and GitHub's keys; `revoke` and no GitHub keys when absent. */
  leaks?: LeakConfig
}

/** Trusts one hop of x-forwarded-for, the one signedClientAddress leaves there (the signed address), and nothing behind it. */
export function trustGatewayHop(_address: string, hop: number): boolean {
  return hop === 0
}

export async function buildAgencyApp(deps: AgencyAppDeps): Promise<FastifyInstance> {
  const now = deps.now ?? (() => new Date())
  // The client address is the one the gateway signed for this request (signed-client-address.ts), and
  // nothing else: the plugin replaces x-forwarded-for with it, or removes the header when no signature
  // verifies, before anything reads request.ip, and exactly one hop of it is trusted. So the console's
  // per-client sign-in throttle and the audit trail see the client the gateway saw, and a request that
  // reaches this port directly is its TCP peer, whatever x-forwarded-for it sent.
  const app = Fastify(withTls({ ...backendServerOptions(deps.logger), trustProxy: trustGatewayHop }, deps.https))
  await app.register(signedClientAddress, { audience: AGENCY_SERVICE_AUDIENCE, secrets: deps.signingSecrets, now: () => now().getTime() / 1000 })
  await app.register(errorEnvelopePlugin)
  // Before any route: it records each route's schemas for the API description (npm run openapi).
  await app.register(apiDocumentPlugin, { service: 'agency-service', scope: 'AGENCY' })
  await app.register(closeConnectionsWhenStopping)
  await app.register(tenantVerifier, {
    audience: AGENCY_SERVICE_AUDIENCE,
    secrets: deps.signingSecrets,
    now: () => now().getTime() / 1000,
    unsignedRoutes: UNSIGNED_ROUTES,
    ...(deps.nonceRedis === undefined ? {} : { redis: deps.nonceRedis }),
  })
  await app.register(healthRoutes, { pool: deps.pool })
  await app.register(consolePlugin, {
    prefix: CONSOLE_PREFIX,
    pool: deps.pool,
    keys: deps.keys,
    now,
    ...(deps.consoleDeviceSecret === undefined ? {} : { deviceSecret: deps.consoleDeviceSecret }),
    ...(deps.webhookPolicy === undefined ? {} : { webhookPolicy: deps.webhookPolicy }),
  })
  // Without a key and without tenant headers (leaks/leak-routes.ts), outside the AGENCY scope's /v1 below.
  await app.register(leakRoutes, {
    keys: deps.keys,
    config: deps.leaks ?? { action: 'revoke', githubKeys: undefined },
    throttle: new ReportThrottle({
      ...(deps.nonceRedis === undefined ? {} : { redis: deps.nonceRedis.client, prefix: deps.nonceRedis.prefix }),
      log: deps.logger,
    }),
  })
  await app.register(
    async (v1) => {
      v1.addHook('onRequest', requireTenantScope('AGENCY'))
      await v1.register(agencyRoutes, { pool: deps.pool })
      await v1.register(subAccountRoutes, { pool: deps.pool, keys: deps.keys })
      await v1.register(subAccountKeyRoutes, { pool: deps.pool, keys: deps.keys })
      await v1.register(auditEventRoutes, { pool: deps.pool })
      await v1.register(webhookRoutes, { pool: deps.pool, policy: deps.webhookPolicy ?? { allowPrivateAddresses: false } })
      await v1.register(agencyUsageRoutes, { pool: deps.pool, now })
      await v1.register(agencyRequestLogRoutes, { pool: deps.pool })
    },
    { prefix: '/v1' },
  )
  // A sub-account's own usage and request log: SUB-ACCOUNT routes that this service serves (the routes file
  // sends them here, and the gateway signs them for this service, the upstream's, whatever their scope).
  await app.register(
    async (v1) => {
      v1.addHook('onRequest', requireTenantScope('SUB-ACCOUNT'))
      await v1.register(subAccountUsageRoutes, { pool: deps.pool, now })
      await v1.register(subAccountRequestLogRoutes, { pool: deps.pool })
    },
    { prefix: '/v1' },
  )
  return app
}
