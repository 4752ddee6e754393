/**
 * The backends' side of the signed `x-tenant-*` headers: one Fastify plugin
 * that lets a request through only when the gateway signed it, and hands the
 * route the tenant the gateway established from the API key. Routes read the
 * tenant from `request.tenant` and from nothing else (never the path, query
 * or body).
 *
 * Which routes are unsigned (health probes, the console) is decided on the
 * route the router matched, never on the raw path the caller sent; a request
 * that matches no route must be signed too, so an unsigned caller learns
 * nothing about what exists.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import type { Env } from './config.js'
import { ConfigError, requireSecret, readSecret } from './config.js'
import { ApiError, errorCatalog } from './errors.js'
import { sendError } from './error-envelope-plugin.js'
import type { Scope } from './scope.js'
import type { Tenant } from './tenant-signature.js'
import { DEFAULT_REPLAY_WINDOW_SECONDS, verifyTenantHeaders } from './tenant-signature.js'

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * Who the request acts for, from the verified tenant headers. Reading it
     * on a route that was not signed (an unsigned route) throws: never a default.
     */
    readonly tenant: Tenant
  }
}

export interface TenantVerifierOptions {
  /** The current secret first, then (during a rotation) the previous one. */
  secrets: readonly string[]
  /** The clock, in seconds; a parameter so tests can move it. */
  now?: () => number
  /** Seconds a signature stays acceptable, either way. */
  windowSeconds?: number
  /**
   * Route prefixes that are not signed (`/healthz`, `/console`), compared on
   * whole segments with the path the matched route was declared with.
   */
  unsignedRoutes?: readonly string[]
}

/** The secrets a backend accepts: TENANT_SIGNING_SECRET (required) and, during a rotation, TENANT_SIGNING_SECRET_PREVIOUS. */
export function readTenantSigningSecrets(env: Env): readonly string[] {
  const current = requireSecret(env, 'TENANT_SIGNING_SECRET')
  const previous = readSecret(env, 'TENANT_SIGNING_SECRET_PREVIOUS')
  if (previous === current) throw new ConfigError('TENANT_SIGNING_SECRET_PREVIOUS', 'must differ from TENANT_SIGNING_SECRET')
  return Object.freeze(previous === undefined ? [current] : [current, previous])
}

function isUnderPrefix(routeUrl: string, prefix: string): boolean {
  return routeUrl === prefix || routeUrl.startsWith(prefix.endsWith('/') ? prefix : `${prefix}/`)
}

const verifiedTenants = new WeakMap<FastifyRequest, Tenant>()

/**
 * A matched route is unsigned when it was declared under an unsigned
 * prefix. A request that matched nothing reaches only a not-found handler,
 * so its signature would protect nothing; it is answered unsigned only under
 * an unsigned prefix (the console's own 404 page), and elsewhere refused
 * like any unsigned request, so the API's paths stay undisclosed.
 */
function unsignedRouteCheck(unsignedRoutes: readonly string[]): (request: FastifyRequest) => boolean {
  return (request) => {
    const routeUrl = request.routeOptions.url ?? (request.is404 ? (request.raw.url ?? '').split('?')[0]! : undefined)
    return routeUrl !== undefined && unsignedRoutes.some((prefix) => isUnderPrefix(routeUrl, prefix))
  }
}

export const tenantVerifier = fp(
  async (app: FastifyInstance, options: TenantVerifierOptions) => {
    if (options.secrets.length === 0) throw new Error('tenant-verifier: at least one secret is required')
    const secrets = [...options.secrets]
    const now = options.now ?? (() => Date.now() / 1000)
    const windowSeconds = options.windowSeconds ?? DEFAULT_REPLAY_WINDOW_SECONDS
    const isUnsigned = unsignedRouteCheck([...(options.unsignedRoutes ?? [])])

    app.decorateRequest('tenant', {
      getter(this: FastifyRequest): Tenant {
        const tenant = verifiedTenants.get(this)
        // Only a route that was declared unsigned can get here; it has no tenant to read.
        if (tenant === undefined) throw new ApiError('invalidSignature')
        return tenant
      },
    })

    app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      if (isUnsigned(request)) return
      const result = verifyTenantHeaders(request.headers, request.method, request.raw.url ?? '', secrets, now(), windowSeconds)
      if (!result.ok) {
        request.log.warn({ reason: result.reason }, 'tenant signature refused')
        return sendError(reply, errorCatalog.invalidSignature.status, errorCatalog.invalidSignature.message)
      }
      verifiedTenants.set(request, result.tenant)
    })
  },
  { name: 'tenant-verifier', fastify: '5.x', dependencies: ['error-envelope'] },
)

/**
 * An onRequest hook for a group of routes that serve one scope only. The
 * gateway's route map already enforces scopes; this is defence in depth.
 */
export function requireTenantScope(scope: Scope): onRequestAsyncHookHandler {
  return async (request, reply) => {
    if (request.tenant.scope !== scope) return sendError(reply, errorCatalog.scopeMismatch.status, errorCatalog.scopeMismatch.message)
  }
}

/** The caller's sub-account, on a route that requires SUB-ACCOUNT scope. */
export function tenantSubAccountId(request: FastifyRequest): string {
  const { subAccountId } = request.tenant
  if (subAccountId === null) throw new ApiError('scopeMismatch')
  return subAccountId
}
