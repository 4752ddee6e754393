/**
 * The gate every API request passes, in Fastify's onRequest hook, before any
 * body is read. In order:
 *   1. the path (400): the raw URL is normalized once (request-path.ts);
 *      then the method (405): only the methods the gateway forwards;
 *   2. console routes (`auth: session`, outside /v1) pass without a key;
 *   3. the key (401): extracted, then verified by its hash;
 *   4. the route (404): only now, so a caller without a valid key learns
 *      nothing about the route map;
 *   5. the scope (403).
 * The hook stays synchronous when the key is in the in-process cache; only a
 * cache miss waits for Redis or Postgres.
 */
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { hashKey } from '@scoped/shared/keys'
import type { Logger } from '@scoped/shared/logger'
import { extractApiKey } from './api-key.js'
import type { KeyVerifier, Verification } from './key-verifier.js'
import type { LastUseRecorder } from './last-used.js'
import { isForwardedMethod } from './proxy.js'
import { normalizeRequestTarget } from './request-path.js'
import { refuse } from './respond.js'
import type { RouteMap, ScopedRoute } from './route-map.js'
import { matchRoute } from './route-map.js'
import { stripTenantQuery } from './tenant-stripping.js'

export type AuthOutcome = 'valid' | 'unknown' | 'revoked' | 'deleted' | 'unavailable' | 'no-route' | 'scope-mismatch'

/** The decision for a verified (or unverifiable) key on a route: pure, and the order is the spec's. */
export function authorize(route: ScopedRoute | undefined, verification: Verification): AuthOutcome {
  if (verification.status !== 'active') return verification.status
  if (route === undefined) return 'no-route'
  return route.scope === verification.tenant.scope ? 'valid' : 'scope-mismatch'
}

export interface AuthenticateDeps {
  routes: RouteMap
  verifier: KeyVerifier
  lastUse: LastUseRecorder
  log: Logger
}

export type Authenticate = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

export function createAuthenticate(deps: AuthenticateDeps): Authenticate {
  const { routes, verifier, lastUse } = deps

  function settle(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, route: ScopedRoute | undefined, verification: Verification): void {
    // Known for the logs and metrics even when refused (an unauthenticated caller never sees it).
    if (route !== undefined) request.gatewayRoute = route
    if (verification.status === 'active') {
      request.gatewayTenant = verification.tenant
      // A use is a request the key authenticated, whatever follows.
      lastUse.record(verification.tenant.keyId, Date.now())
    }
    const outcome = authorize(route, verification)
    if (outcome !== 'valid') {
      refuse(request, reply, outcome)
      return
    }
    request.gatewayQuery = stripTenantQuery(request.gatewayTarget!.query)
    done()
  }

  return function authenticate(request, reply, done) {
    const target = normalizeRequestTarget(request.raw.url ?? '')
    if (target === undefined) {
      refuse(request, reply, 'bad-path')
      return
    }
    request.gatewayTarget = target
    if (!isForwardedMethod(request.method)) {
      refuse(request, reply, 'method-not-allowed')
      return
    }
    const route = matchRoute(routes, target.path)
    if (route !== undefined && route.auth === 'session') {
      request.gatewayRoute = route
      request.gatewayQuery = target.query
      done()
      return
    }
    const extracted = extractApiKey(request.raw.rawHeaders)
    if (!extracted.ok) {
      refuse(request, reply, extracted.reason)
      return
    }
    const hash = hashKey(extracted.key)
    const cached = verifier.cached(hash, performance.now())
    if (cached !== undefined) {
      settle(request, reply, done, route, cached)
      return
    }
    verifier.verify(hash).then(
      (verification) => settle(request, reply, done, route, verification),
      (error: unknown) => {
        deps.log.error({ err: error }, 'key verification failed')
        refuse(request, reply, 'unavailable')
      },
    )
  }
}
