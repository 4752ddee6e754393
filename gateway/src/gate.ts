/**
 * The gate every request on the API listener passes, in Fastify's onRequest
 * hook, before any body is read. In order:
 *   0. draining (503), a request target longer than MAX_REQUEST_TARGET (414);
 *   1. the path (400): the raw URL is normalized once (request-path.ts);
 *      then the method (405): only the methods the gateway forwards;
 *   2. the documents (/openapi.json, /docs: documents.ts) and console routes
 *      (`auth: session`, outside /v1) pass without a key;
 *   3. the key (401): extracted, looked up in memory by its hash, its
 *      checksum checked when it is not there, then verified through the
 *      stores; a client over its failed-authentication allowance gets 429
 *      instead of a store lookup, while a key already verified in memory
 *      keeps working; then the key's
 *      own limits, on every request: expired (401 as revoked), used from an
 *      address outside its allowlist (403) (key-policy.ts);
 *   4. the route (404): only now, so a caller without a valid key learns
 *      nothing about the route map;
 *   5. the scope (403);
 *   6. the rate limits (429): the route's buckets, with the key's own limit
 *      in place of the route's `key` limit when it has one.
 * The hook stays synchronous when the key is in the in-process cache; only a
 * cache miss waits for Redis or Postgres.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import fp from 'fastify-plugin'
import type { ActiveKeyState } from '@scoped/shared/key-state'
import { hashKey, hasValidChecksum } from '@scoped/shared/keys'
import type { Logger } from '@scoped/shared/logger'
import { extractApiKey } from './api-key.js'
import type { AuthFailureThrottle } from './auth-failure-throttle.js'
import { rateLimitHeaders } from './auth-failure-throttle.js'
import type { TrustedProxies } from './client-address.js'
import { clientAddress } from './client-address.js'
import { MAX_REQUEST_TARGET } from './config.js'
import { isDocumentRequest } from './documents.js'
import { bucketRefs, isLimited, rateLimitPolicy, rateLimitState } from './rate-limit-headers.js'
import type { BucketRef, LimitDecision, RateLimiter } from './rate-limiter.js'
import type { KeyPolicyRefusal } from './key-policy.js'
import { keyPolicyRefusal } from './key-policy.js'
import type { KeyVerifier, Verification } from './key-verifier.js'
import type { LastUseRecorder } from './last-used.js'
import type { GatewayMetrics } from './metrics.js'
import type { Refusal } from './outcomes.js'
import { AUTH_FAILURES } from './outcomes.js'
import { normalizeRequestTarget } from './request-path.js'
import { decorateRequestState } from './request-state.js'
import { refuse, STRICT_TRANSPORT_SECURITY } from './respond.js'
import type { RouteMap, ScopedRoute } from './route-map.js'
import { matchRoute } from './route-map.js'
import { stripTenantQuery } from './tenant-stripping.js'

/** The methods the gateway forwards; any other (TRACE, QUERY, WebDAV, …) is refused with 405 before authentication. */
export const FORWARDED_METHODS = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT'] as const
const forwardedMethods = new Set<string>(FORWARDED_METHODS)
export function isForwardedMethod(method: string): boolean {
  return forwardedMethods.has(method)
}

export type AuthOutcome = 'valid' | 'unknown' | 'revoked' | 'deleted' | KeyPolicyRefusal | 'unavailable' | 'no-route' | 'scope-mismatch'

/**
 * The decision for a verified (or unverifiable) key on a route: pure, and the
 * order is the spec's. The key's own limits come before any route is matched:
 * its expiry at `nowMs` (epoch ms; 401 as revoked) and its allowlist for the
 * `client` address (403).
 */
export function authorize(route: ScopedRoute | undefined, verification: Verification, nowMs = Date.now(), client = ''): AuthOutcome {
  if (verification.status !== 'active') return verification.status
  const refusal = keyPolicyRefusal(verification, nowMs, client)
  if (refusal !== undefined) return refusal
  if (route === undefined) return 'no-route'
  return route.scope === verification.tenant.scope ? 'valid' : 'scope-mismatch'
}

export interface GateOptions {
  routes: RouteMap
  verifier: KeyVerifier
  lastUse: LastUseRecorder
  throttle: AuthFailureThrottle
  trustedProxies: TrustedProxies
  metrics: GatewayMetrics
  log: Logger
  isDraining: () => boolean
  limiter: RateLimiter
}

async function gate(app: FastifyInstance, options: GateOptions): Promise<void> {
  const { routes, verifier, lastUse, throttle, trustedProxies, metrics, isDraining, limiter } = options
  decorateRequestState(app)

  /** The TCP peer, normalized once per connection; X-Forwarded-For is read only when the peer is a trusted proxy. */
  const peers = new WeakMap<object, string>()
  function clientOf(request: FastifyRequest): string {
    const socket = request.socket
    let peer = peers.get(socket)
    if (peer === undefined) {
      peer = clientAddress(socket.remoteAddress ?? '', undefined, trustedProxies)
      peers.set(socket, peer)
    }
    const forwardedFor = request.headers['x-forwarded-for']
    return forwardedFor === undefined || !trustedProxies.has(peer) ? peer : clientAddress(socket.remoteAddress ?? '', forwardedFor, trustedProxies)
  }

  function fail(request: FastifyRequest, reply: FastifyReply, outcome: Refusal): void {
    if (AUTH_FAILURES.has(outcome)) throttle.recordFailure(request.gatewayClient)
    refuse(request, reply, outcome)
  }

  function settle(
    request: FastifyRequest,
    reply: FastifyReply,
    done: HookHandlerDoneFunction,
    route: ScopedRoute | undefined,
    hash: string,
    verification: Verification,
  ): void {
    // Known for the logs and metrics even when refused (an unauthenticated caller never sees it).
    if (route !== undefined) request.gatewayRoute = route
    const now = Date.now()
    const outcome = authorize(route, verification, now, request.gatewayClient)
    if (verification.status === 'active') {
      request.gatewayTenant = verification.tenant
      request.gatewayKeyHash = hash
      request.gatewayKeyExpiresAt = verification.expiresAt ?? null
      // A use is a request the key authenticated within its own limits, whatever follows.
      if (outcome !== 'expired' && outcome !== 'not-allowed-address') lastUse.record(verification.tenant.keyId, now, request.gatewayClient)
    }
    if (outcome !== 'valid') {
      fail(request, reply, outcome)
      return
    }
    request.gatewayQuery = stripTenantQuery(request.gatewayTarget!.query)
    const scoped = route!
    // Only an active key gets this far; its own rate limit, when it has one, replaces the route's `key` limit.
    const key = verification as ActiveKeyState
    if (!isLimited(scoped, key)) {
      done()
      return
    }
    // Counted before anything is forwarded: a refused request never reaches a backend.
    const refs = bucketRefs(scoped, key)
    const decision = limiter.take(refs)
    if (decision instanceof Promise) {
      decision.then(
        (settled) => applyLimits(request, reply, done, refs, settled),
        (error: unknown) => {
          options.log.error({ err: error }, 'rate limit check failed')
          refuse(request, reply, 'unavailable')
        },
      )
    } else {
      applyLimits(request, reply, done, refs, decision)
    }
  }

  function applyLimits(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, refs: readonly BucketRef[], decision: LimitDecision): void {
    const policy = rateLimitPolicy(refs)
    const state = rateLimitState(refs, (ref) => limiter.remaining(ref))
    // On the reply for an answer Fastify sends (the 429 below), on the request for the relay's (respond.ts).
    reply.header('ratelimit-policy', policy).header('ratelimit', state)
    request.gatewayRateLimitHeaders = ['ratelimit-policy', policy, 'ratelimit', state]
    if (decision.allowed) {
      done()
      return
    }
    request.gatewayLimit = decision.kind
    metrics.countThrottled(decision.kind)
    refuse(request, reply, 'rate-limited', { 'retry-after': String(decision.retryAfterSeconds) })
  }

  app.addHook('onRequest', (request, reply, done) => {
    reply.header('strict-transport-security', STRICT_TRANSPORT_SECURITY).header('x-request-id', request.id)
    request.gatewayClient = clientOf(request)
    if (isDraining()) {
      refuse(request, reply, 'draining')
      return
    }
    const url = request.raw.url ?? ''
    if (url.length > MAX_REQUEST_TARGET) {
      refuse(request, reply, 'uri-too-long')
      return
    }
    const target = normalizeRequestTarget(url)
    if (target === undefined) {
      refuse(request, reply, 'bad-path')
      return
    }
    request.gatewayTarget = target
    if (!isForwardedMethod(request.method)) {
      refuse(request, reply, 'method-not-allowed')
      return
    }
    // The API description and its reference page (documents.ts) need no key: exactly their GET and HEAD
    // paths pass, before the key step, and the gateway answers them itself (nothing is forwarded).
    if (isDocumentRequest(request, target.path)) {
      done()
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
      fail(request, reply, extracted.reason)
      return
    }
    const hash = hashKey(extracted.key)
    request.gatewayGeneration = verifier.generation
    const cached = verifier.cached(hash, performance.now())
    if (cached !== undefined) {
      settle(request, reply, done, route, hash, cached)
      return
    }
    // Only keys that passed this check ever reach a store, so none that fails it is in memory (found or
    // not found): checking it after the lookup refuses exactly the same keys, without a CRC per request.
    if (!hasValidChecksum(extracted.key)) {
      fail(request, reply, 'malformed')
      return
    }
    // Only a request that needs a store lookup is throttled: keys verified in memory keep working.
    const check = throttle.check(request.gatewayClient)
    if (check.blocked) {
      metrics.countThrottled('failed-auth')
      const windowSeconds = Math.round(throttle.windowMs / 1000)
      refuse(request, reply, 'throttled', rateLimitHeaders('failed-auth', throttle.limit, windowSeconds, 0, check.retryAfterSeconds))
      return
    }
    verifier.verify(hash, request.gatewayClient).then(
      (verification) => settle(request, reply, done, route, hash, verification),
      (error: unknown) => {
        options.log.error({ err: error }, 'key verification failed')
        refuse(request, reply, 'unavailable')
      },
    )
  })
}

export const gatePlugin = fp(gate, { name: 'gateway-gate', fastify: '5.x' })
