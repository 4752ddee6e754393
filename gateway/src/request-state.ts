/**
 * What the gate decided about a request, handed down as one object: the
 * forwarder forwards from it, the relay answers from it, and the request's
 * log line (and its metrics) read it at the end. It is one request
 * decoration, `request.gateway`, holding one of five decisions told apart by
 * `kind`:
 *
 *   refused      refused before the gate knew what the request was for: draining, the
 *                path, the method, no usable key, the throttle, a key lookup that failed;
 *   document     the API description or its page, answered by the gateway itself (documents.ts);
 *   session      a console route (`auth: session`), forwarded without a key;
 *   report       a leak report (route-map.ts, LEAK_REPORT_PATHS), forwarded without a key;
 *   key          a key in its own limits on a route of its scope: forwarded, unless a later
 *                step (the rate limits) refuses it;
 *   key-refused  a key was looked up and refused: its state, its own limits, the route, the scope.
 *
 * Each is a class with a fixed shape, made once per request (the usual
 * request makes one KeyDecision). Besides what was decided, each carries the
 * little the rest of the request writes: how it ended (`outcome`) and when
 * the upstream request started. The name starts with `gateway` so it cannot
 * clash with the backends' declarations (`request.tenant`) in one type-check.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { ActiveKeyState } from '@scoped/shared/key-state'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { signedTenant } from './key-policy.js'
import type { Verification } from './key-verifier.js'
import type { Refusal, RequestOutcome } from './outcomes.js'
import type { LimitKind } from '@scoped/shared/route-limits'
import type { RequestTarget } from './request-path.js'
import type { ReportRoute, ScopedRoute, SessionRoute } from './route-map.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Null until the gate has decided (and on a request the router refused before any hook ran). */
    gateway: GateDecision | null
  }
}

export type GateDecision = Refused | DocumentDecision | SessionDecision | ReportDecision | KeyDecision | KeyRefusal

/** What the relay and the forwarder hand on: a request that goes to a backend. */
export type ForwardedDecision = SessionDecision | ReportDecision | KeyDecision

/** Refused before the gate knew what the request was for. */
export class Refused {
  readonly kind = 'refused'
  outcome: RequestOutcome | null = null
  readonly route = null
  readonly tenant = null

  constructor(
    /** The client's address: the TCP peer, or what trusted proxies say (client-address.ts); '' when unknown. */
    readonly client: string,
    /** The canonical path and raw query; null when the path itself was refused. */
    readonly target: RequestTarget | null,
  ) {}
}

/** The API description or its page: no key, answered by the gateway. */
export class DocumentDecision {
  readonly kind = 'document'
  outcome: RequestOutcome | null = 'document'
  readonly route = null
  readonly tenant = null

  constructor(
    readonly client: string,
    readonly target: RequestTarget,
  ) {}
}

/** A console route: no key and no tenant headers; the console checks its own sessions. */
export class SessionDecision {
  readonly kind = 'session'
  outcome: RequestOutcome | null = null
  /** performance.now() when the upstream request started (relay.ts). */
  upstreamAt = 0
  readonly tenant = null

  constructor(
    readonly client: string,
    readonly target: RequestTarget,
    readonly route: SessionRoute,
  ) {}
}

/** A leak report: no key, no tenant headers, no cookies; its body goes to agency-service as it came. */
export class ReportDecision {
  readonly kind = 'report'
  outcome: RequestOutcome | null = null
  upstreamAt = 0
  readonly tenant = null

  constructor(
    readonly client: string,
    readonly target: RequestTarget,
    readonly route: ReportRoute,
  ) {}
}

/** A verified key, within its own limits, on a route of its scope. */
export class KeyDecision {
  readonly kind = 'key'
  outcome: RequestOutcome | null = null
  upstreamAt = 0
  /** RateLimit-Policy and RateLimit, when the request took tokens (for its forwarded answer: respond.ts). */
  rateLimitPolicy: string | null = null
  rateLimitState: string | null = null
  /** The rate limit that refused the request, when one did. */
  limit: LimitKind | null = null
  readonly tenant: Tenant

  constructor(
    readonly client: string,
    readonly target: RequestTarget,
    readonly route: ScopedRoute,
    /** The hash of the key presented: the forwarder checks it again when the key cache moved. */
    readonly hash: string,
    /** Its state as verified: expiry, allowlist, own rate limit. */
    readonly key: ActiveKeyState,
    /** The key cache's generation before the key was looked up: if it moved since, the key is checked again. */
    readonly generation: number,
  ) {
    this.tenant = signedTenant(key)
  }
}

/** A key that was looked up and refused (401, 403, 404, or 503 when the stores could not answer): the outcome says why. */
export class KeyRefusal {
  readonly kind = 'key-refused'
  outcome: RequestOutcome | null = null
  /**
   * Its tenant when the key is active (refused by its expiry, its allowlist, the route or the scope) or
   * revoked with its owner known (key-state.ts): its refusal is counted in the key's usage. Never for a
   * deleted key, which no longer exists for its tenant.
   */
  readonly tenant: Tenant | null

  constructor(
    readonly client: string,
    readonly target: RequestTarget,
    /** The route the path matched, known for the logs and metrics (an unauthenticated caller never sees it); null when none did. */
    readonly route: ScopedRoute | null,
    readonly hash: string,
    /** What the verifier found: the key's state, or `unavailable`. */
    readonly state: Verification,
    /** Why it was refused (authorize); `outcome` becomes this once the refusal is sent. */
    readonly refusal: Refusal,
  ) {
    this.tenant = state.status === 'active' || state.status === 'revoked' ? (state.tenant ?? null) : null
  }
}

export function decorateRequestState(app: FastifyInstance): void {
  app.decorateRequest('gateway', null)
}

/**
 * The request's decision, for a responder that records how it ended. A
 * request the router refused before any hook ran (frameworkErrors) gets an
 * early refusal here; its client is not known.
 */
export function decisionOf(request: FastifyRequest): GateDecision {
  return (request.gateway ??= new Refused('', null))
}
