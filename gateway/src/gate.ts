/**
 * The gate every request on the API listener passes, in Fastify's onRequest
 * hook, before any body is read. In order:
 *   0. draining (503), a request target longer than MAX_REQUEST_TARGET (414);
 *   1. the path (400): the raw URL is normalized once (request-path.ts);
 *      then the method (405, with Allow): only the methods the gateway forwards;
 *   2. the documents (/openapi.json, /docs: documents.ts), console routes
 *      (`auth: session`, outside /v1) and the leak reports (exactly their
 *      paths: route-map.ts, LEAK_REPORT_PATHS) pass without a key;
 *   3. the key (401): extracted, looked up in memory by its hash, its
 *      checksum checked when it is not there, then asked of the issued-key
 *      filter: a key ever issued is verified through the stores and never
 *      throttled; a key never issued is answered 401 from memory, or 429
 *      when its client is over its failed-authentication allowance; a key the
 *      filter cannot vouch for (not loaded, not current) is looked up under
 *      the unknown-key budget (issued-keys/), not throttled (it may be a key
 *      created meanwhile); then the key's
 *      own limits, on every request: expired (401 as revoked), used from an
 *      address outside its allowlist (403) (key-policy.ts);
 *   4. the route (404): only now, so a caller without a valid key learns
 *      nothing about the route map;
 *   5. the scope (403), then the route's permission for a restricted key (403);
 *   6. the rate limits (429): the route's buckets, with the key's own limit
 *      in place of the route's `key` limit when it has one.
 * Each step answers with a refusal or lets the request on to the next; the
 * gate's decision goes down the request as one object (request-state.ts).
 * The hook stays synchronous when the key is in the in-process cache; only a
 * cache miss waits for Redis or Postgres.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import fp from 'fastify-plugin'
import { API_METHODS } from '@scoped/shared/http-methods'
import type { ActiveKeyState, RevokedKeyState } from '@scoped/shared/key-state'
import { hashKey, hasValidChecksum } from '@scoped/shared/keys'
import { permits } from '@scoped/shared/permissions'
import type { Logger } from '@scoped/shared/logger'
import { extractApiKey } from './api-key.js'
import type { TrustedProxies } from './client-address.js'
import { ClientAddresses } from './client-address.js'
import { MAX_REQUEST_TARGET } from './config.js'
import { isDocumentRequest } from './documents.js'
import type { IssuedKeyCheck } from './issued-keys/issued-key-gate.js'
import type { KeyPolicyRefusal } from './key-policy.js'
import { keyPolicyRefusal } from './key-policy.js'
import type { Verification, Verifier } from './key-verifier.js'
import type { LastUseRecorder } from './last-used.js'
import type { GatewayMetrics } from './metrics.js'
import type { Refusal } from './outcomes.js'
import { AUTH_FAILURES } from './outcomes.js'
import type { AuthFailureThrottle } from './rate-limit/auth-failure-throttle.js'
import type { BucketRef } from './rate-limit/buckets.js'
import { bucketRefs, isLimited } from './rate-limit/buckets.js'
import { failedAuthHeaders, rateLimitPolicy, rateLimitState, retryAfter } from './rate-limit/headers.js'
import type { LimitDecision, RateLimiter } from './rate-limit/limiter.js'
import type { RequestTarget } from './request-path.js'
import { normalizeRequestTarget } from './request-path.js'
import { decorateRequestState, DocumentDecision, KeyDecision, KeyRefusal, Refused, ReportDecision, SessionDecision } from './request-state.js'
import { refuse, STRICT_TRANSPORT_SECURITY } from './respond.js'
import type { Route, RouteMap, ScopedRoute } from './route-map.js'
import { matchRoute } from './route-map.js'

/** The methods the gateway forwards; any other (TRACE, QUERY, WebDAV, …) is refused with 405 before authentication. */
export const FORWARDED_METHODS = API_METHODS
const forwardedMethods = new Set<string>(FORWARDED_METHODS)
/**
 * The gateway's own 405 names every method it forwards (RFC 9110 §15.5.6: a
 * 405 carries Allow); which of them a path takes, its service says, with a
 * 405 and its own Allow (shared/src/error-envelope-plugin.ts).
 */
const ALLOW = FORWARDED_METHODS.join(', ')
export function isForwardedMethod(method: string): boolean {
  return forwardedMethods.has(method)
}

export type AuthOutcome = 'valid' | 'unknown' | 'revoked' | 'deleted' | KeyPolicyRefusal | 'unavailable' | 'no-route' | 'scope-mismatch' | 'permission-refused'
export type AuthRefusal = Exclude<AuthOutcome, 'valid'>

/**
 * The decision for a verified (or unverifiable) key on a route: pure, and the
 * order is the spec's. The key's own limits come before any route is matched:
 * its expiry at `nowMs` (epoch ms; 401 as revoked) and its allowlist for the
 * `client` address (403). Then the route, its scope, and last the route's
 * permission for the `method` (403) when the key is restricted (permissions.ts).
 * 'valid' exactly when the key is active, the route is of its scope and the
 * key may use the method on it. The gate and the forwarder's second check both ask it.
 */
export function authorize(route: ScopedRoute | undefined, verification: Verification, nowMs: number, client: string, method: string): AuthOutcome {
  if (verification.status !== 'active') return verification.status
  const refusal = keyPolicyRefusal(verification, nowMs, client)
  if (refusal !== undefined) return refusal
  if (route === undefined) return 'no-route'
  if (route.scope !== verification.tenant.scope) return 'scope-mismatch'
  return permits(verification.permissions, route.permission, method) ? 'valid' : 'permission-refused'
}

export interface GateOptions {
  routes: RouteMap
  verifier: Verifier
  lastUse: Pick<LastUseRecorder, 'record'>
  throttle: AuthFailureThrottle
  trustedProxies: TrustedProxies
  metrics: GatewayMetrics
  log: Logger
  isDraining: () => boolean
  limiter: RateLimiter
  /** Whether a key outside the cache was ever issued (the filter), and the budget for those it cannot vouch for. */
  issuedKeys: IssuedKeyCheck
}

/** 2: the documents (their own GET and HEAD routes), console routes and leak reports need no key; undefined when the request does. */
function passWithoutKey(
  request: FastifyRequest,
  client: string,
  target: RequestTarget,
  route: Route | undefined,
): DocumentDecision | SessionDecision | ReportDecision | undefined {
  // The gateway answers the documents itself (documents.ts): nothing is forwarded.
  if (isDocumentRequest(request, target.path)) return new DocumentDecision(client, target)
  if (route === undefined) return undefined
  if (route.auth === 'session') return new SessionDecision(client, target, route)
  // Exactly the report's path: anything under it needs a key, like every other API path.
  if (route.auth === 'none' && target.path === route.prefix) return new ReportDecision(client, target, route)
  return undefined
}

/** A key on its way to the stores, with what its decision needs. */
interface PendingKey {
  client: string
  target: RequestTarget
  route: Route | undefined
  hash: string
  generation: number
}

class Gate {
  private readonly clients: ClientAddresses
  /** What is left of a bucket, for the RateLimit header: bound once, not per request. */
  private readonly remaining: (ref: BucketRef) => number

  constructor(private readonly options: GateOptions) {
    this.clients = new ClientAddresses(options.trustedProxies)
    this.remaining = (ref) => options.limiter.remaining(ref)
  }

  /** The steps, in the order of the comment above; each either refuses or leads to the next. */
  readonly onRequest = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    reply.header('strict-transport-security', STRICT_TRANSPORT_SECURITY).header('x-request-id', request.id)
    const client = this.clients.of(request.socket, request.headers['x-forwarded-for'])
    // 0–1
    const target = this.admit(request)
    if (typeof target === 'string') return this.refuseEarly(request, reply, target, client, null)
    if (!isForwardedMethod(request.method)) {
      reply.header('allow', ALLOW)
      return this.refuseEarly(request, reply, 'method-not-allowed', client, target)
    }
    // 2 (the route is matched once, here, and told to a key's holder only at 4, in decide)
    const route = matchRoute(this.options.routes, target.path)
    const passed = passWithoutKey(request, client, target, route)
    if (passed !== undefined) {
      request.gateway = passed
      return done()
    }
    // 3: the key, in memory (the hot path: synchronous), else past its checksum and the throttle, from the stores
    const key = extractApiKey(request.raw.rawHeaders)
    if (!key.ok) return this.refuseEarly(request, reply, key.reason, client, target)
    const hash = hashKey(key.key)
    const generation = this.options.verifier.generation
    const cached = this.options.verifier.cached(hash, performance.now())
    if (cached !== undefined) {
      // Revoked, but held without its owner (Redis told of it before the log did): refused all the same, once its owner is known.
      if (cached.status === 'revoked' && cached.tenant === undefined)
        return this.lookUpOwner(request, reply, done, { client, target, route, hash, generation }, cached)
      return this.afterKey(request, reply, done, this.decide(request.method, client, target, route, hash, generation, cached))
    }
    // Only keys that passed this check ever reach a store, so none that fails it is in memory (found or
    // not found): checking it after the lookup refuses exactly the same keys, without a CRC per request.
    if (!hasValidChecksum(key.key)) return this.refuseEarly(request, reply, 'malformed', client, target)
    // An issued key is never throttled, whatever its client sent before: only keys never issued are.
    const verdict = this.options.issuedKeys.verdict(hash)
    if (verdict === 'issued') return this.lookUp(request, reply, done, { client, target, route, hash, generation }, undefined)
    if (verdict === 'never-issued') {
      const throttled = this.options.throttle.check(client)
      if (throttled.blocked) return this.refuseThrottled(request, reply, client, target, throttled.retryAfterSeconds)
      this.options.issuedKeys.refusedFromMemory()
      return this.refuseEarly(request, reply, 'unknown', client, target)
    }
    // Unsure (a key created while this replica was not current may be missing): never throttled, since it may be
    // issued; the unknown-key budget bounds what such keys cost the stores, and one that proves unknown still counts.
    const release = this.options.issuedKeys.takeLookup(client)
    if (release === undefined) return this.refuseEarly(request, reply, 'unavailable', client, target)
    this.lookUp(request, reply, done, { client, target, route, hash, generation }, release)
  }

  /** 3, past the in-process cache: the stores; `client` named only for a key the filter could not vouch for. */
  private lookUp(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, key: PendingKey, release: (() => void) | undefined): void {
    const { client, target, route, hash, generation } = key
    const lookup = release === undefined ? this.options.verifier.verify(hash) : this.options.verifier.verify(hash, client).finally(release)
    lookup.then(
      (state) => this.afterKey(request, reply, done, this.decide(request.method, client, target, route, hash, generation, state)),
      (error: unknown) => {
        this.options.log.error({ err: error }, 'key verification failed')
        this.refuseEarly(request, reply, 'unavailable', client, target)
      },
    )
  }

  /** 3, a revoked key held without its owner: refused whatever the lookup says (it only names the owner, for the key's usage). */
  private lookUpOwner(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, key: PendingKey, held: RevokedKeyState): void {
    const { client, target, route, hash, generation } = key
    const refuseAs = (state: Verification): void =>
      this.afterKey(request, reply, done, this.decide(request.method, client, target, route, hash, generation, state))
    this.options.verifier.ownerOf(hash, held).then(refuseAs, (error: unknown) => {
      this.options.log.error({ err: error }, 'looking up a revoked key’s owner failed')
      refuseAs(held)
    })
  }

  /** 0–1: draining, the request target's size, its path. */
  private admit(request: FastifyRequest): Refusal | RequestTarget {
    if (this.options.isDraining()) return 'draining'
    const url = request.raw.url ?? ''
    if (url.length > MAX_REQUEST_TARGET) return 'uri-too-long'
    return normalizeRequestTarget(url) ?? 'bad-path'
  }

  /** 3–5 once the key's state is known: its own limits, the route, the scope, the permission (authorize). */
  private decide(
    method: string,
    client: string,
    target: RequestTarget,
    route: Route | undefined,
    hash: string,
    generation: number,
    state: Verification,
  ): KeyDecision | KeyRefusal {
    const scoped = route?.auth === 'key' ? route : undefined
    const now = Date.now()
    const outcome = authorize(scoped, state, now, client, method)
    // A use is a request the key authenticated within its own limits, whatever follows.
    if (state.status === 'active' && outcome !== 'expired' && outcome !== 'not-allowed-address') this.options.lastUse.record(state.tenant.keyId, now, client)
    // 'valid' means an active key on a route of its scope (authorize).
    if (outcome === 'valid') return new KeyDecision(client, target, scoped as ScopedRoute, hash, state as ActiveKeyState, generation)
    return new KeyRefusal(client, target, scoped ?? null, hash, state, outcome)
  }

  /** The key's decision is made: refused, or on to the rate limits. */
  private afterKey(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, decision: KeyDecision | KeyRefusal): void {
    request.gateway = decision
    if (decision.kind === 'key-refused') return this.fail(request, reply, decision.refusal, decision.client)
    this.limit(request, reply, done, decision)
  }

  /** 6: counted before anything is forwarded, so a refused request never reaches a backend. */
  private limit(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, decision: KeyDecision): void {
    if (!isLimited(decision.route, decision.key)) return done()
    const refs = bucketRefs(decision.route, decision.key)
    const taken = this.options.limiter.take(refs)
    if (!(taken instanceof Promise)) return this.applyLimits(request, reply, done, decision, refs, taken)
    taken.then(
      (settled) => this.applyLimits(request, reply, done, decision, refs, settled),
      (error: unknown) => {
        this.options.log.error({ err: error }, 'rate limit check failed')
        refuse(request, reply, 'unavailable')
      },
    )
  }

  private applyLimits(
    request: FastifyRequest,
    reply: FastifyReply,
    done: HookHandlerDoneFunction,
    decision: KeyDecision,
    refs: readonly BucketRef[],
    taken: LimitDecision,
  ): void {
    const policy = rateLimitPolicy(refs)
    const state = rateLimitState(refs, this.remaining)
    // On the reply for an answer Fastify sends (the 429 below, a refused body), on the decision for the relay's (respond.ts).
    reply.header('ratelimit-policy', policy).header('ratelimit', state)
    decision.rateLimitPolicy = policy
    decision.rateLimitState = state
    if (taken.allowed) return done()
    decision.limit = taken.kind
    this.options.metrics.countThrottled(taken.kind)
    refuse(request, reply, 'rate-limited', { 'retry-after': retryAfter(taken.retryAfterSeconds) })
  }

  /** 3: a client over its failed-authentication allowance, with the throttle's RateLimit headers. */
  private refuseThrottled(request: FastifyRequest, reply: FastifyReply, client: string, target: RequestTarget, retryAfterSeconds: number): void {
    request.gateway = new Refused(client, target)
    this.options.metrics.countThrottled('failed-auth')
    const { limit, windowMs } = this.options.throttle
    refuse(request, reply, 'throttled', failedAuthHeaders(limit, Math.round(windowMs / 1000), retryAfterSeconds))
  }

  private refuseEarly(request: FastifyRequest, reply: FastifyReply, outcome: Refusal, client: string, target: RequestTarget | null): void {
    request.gateway = new Refused(client, target)
    this.fail(request, reply, outcome, client)
  }

  /** A refusal; a failed authentication also counts against the client's allowance. */
  private fail(request: FastifyRequest, reply: FastifyReply, outcome: Refusal, client: string): void {
    if (AUTH_FAILURES.has(outcome)) this.options.throttle.recordFailure(client)
    refuse(request, reply, outcome)
  }
}

async function gate(app: FastifyInstance, options: GateOptions): Promise<void> {
  decorateRequestState(app)
  app.addHook('onRequest', new Gate(options).onRequest)
}

export const gatePlugin = fp(gate, { name: 'gateway-gate', fastify: '5.x' })
