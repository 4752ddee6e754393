/**
 * What the gateway learns about a request on its way through, kept on the
 * Fastify request (declared once, with null defaults, so every request object
 * has the same shape). Every name starts with `gateway` so it cannot clash
 * with the backends' declarations (`request.tenant`) in one type-check.
 */
import type { FastifyInstance } from 'fastify'
import type { Tenant } from '@scoped/shared/tenant-signature'
import type { RequestOutcome } from './outcomes.js'
import type { LimitKind } from './rate-limit-config.js'
import type { RequestTarget } from './request-path.js'
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
    /** The hash of the key it presented, once verified (the forwarder checks it again before forwarding). */
    gatewayKeyHash: string | null
    /** The verified key's own expiry (epoch ms), or null: the forwarder checks it again once the body is in. */
    gatewayKeyExpiresAt: number | null
    /** The key cache's generation when the key was verified: if it moved, the key is checked again. */
    gatewayGeneration: number
    /** The client's address: the TCP peer, or what trusted proxies say (client-address.ts). */
    gatewayClient: string
    /** The rate limit that refused the request, when one did (for the log line). */
    gatewayLimit: LimitKind | null
    /** RateLimit-Policy and RateLimit, as a header list, when the request's route is rate limited (for its forwarded answer). */
    gatewayRateLimitHeaders: string[] | null
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
  app.decorateRequest('gatewayKeyHash', null)
  app.decorateRequest('gatewayKeyExpiresAt', null)
  app.decorateRequest('gatewayGeneration', 0)
  app.decorateRequest('gatewayClient', '')
  app.decorateRequest('gatewayLimit', null)
  app.decorateRequest('gatewayRateLimitHeaders', null)
  app.decorateRequest('gatewayQuery', '')
  app.decorateRequest('gatewayUpstreamAt', 0)
}
