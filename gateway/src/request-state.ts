/**
 * What the gateway learns about a request on its way through, kept on the
 * Fastify request (declared once, with null defaults, so every request object
 * has the same shape). Every name starts with `gateway` so it cannot clash
 * with the backends' declarations (`request.tenant`) in one type-check.
 */
import type { FastifyInstance } from 'fastify'
import type { Tenant } from '@scoped/shared/tenant-signature'
import type { RequestTarget } from './request-path.js'
import type { RequestOutcome } from './respond.js'
import type { Route } from './route-map.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** How the request ended; null while it is still on its way. */
    gatewayOutcome: RequestOutcome | null
    /** The canonical path and raw query; null when the path was refused. */
    gatewayTarget: RequestTarget | null
    /** The route it matched; null when none did (or before routing). */
    gatewayRoute: Route | null
    /** The tenant its key established; null for console requests and refusals before verification. */
    gatewayTenant: Tenant | null
    /** The query that is signed and forwarded (tenant parameters removed). */
    gatewayQuery: string
    /** performance.now() when the upstream request started. */
    gatewayUpstreamAt: number
  }
}

export function decorateRequestState(app: FastifyInstance): void {
  app.decorateRequest('gatewayOutcome', null)
  app.decorateRequest('gatewayTarget', null)
  app.decorateRequest('gatewayRoute', null)
  app.decorateRequest('gatewayTenant', null)
  app.decorateRequest('gatewayQuery', '')
  app.decorateRequest('gatewayUpstreamAt', 0)
}
