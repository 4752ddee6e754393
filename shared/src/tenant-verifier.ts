/**
 * The backends' side of the signed `x-tenant-*` headers: one Fastify plugin
 * that lets a request through only when the gateway signed it for this
 * backend (its audience), with exactly the body it carries, and only once;
 * and hands the route the tenant the gateway established from the API key.
 * Routes read the tenant from `request.tenant` and from nothing else (never
 * the path, query or body).
 *
 * In order, for every signed route:
 * 1. onRequest: verifyTenantHeaders (presence, form, replay window, audience,
 *    the MAC under this audience's current or previous secret); then the nonce,
 *    refused when seen before and otherwise remembered (nonce-store.ts: in
 *    Redis too, for every replica, when the backend has REDIS_URL; 503 when
 *    that cannot be known); then, for a request without a body, the signed
 *    digest must be the empty body's.
 * 2. preParsing: a request with a body is read through a hashing stream that
 *    compares the digest of the bytes Fastify read with the signed one at
 *    their end, so the parser (and the handler) never get a mismatched body.
 * 3. preValidation: a request with a body that was not read through that
 *    stream (a GET with a body, which Fastify never reads) is refused: nothing
 *    reaches a handler with a digest nobody checked.
 *
 * Every refusal is 401 in the error envelope and one warn line naming the
 * reason, never a header value; a nonce that cannot be checked is 503 with
 * Retry-After, and a warn line.
 *
 * Which routes are unsigned (health probes, the console) is decided on the
 * route the router matched, never on the raw path the caller sent; a request
 * that matches no route must be signed too, so an unsigned caller learns
 * nothing about what exists.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import { Transform } from 'node:stream'
import type { TransformCallback } from 'node:stream'
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import { ApiError, errorCatalog } from './errors.js'
import { sendError } from './error-envelope-plugin.js'
import type { NonceRedis, NonceStore } from './nonce-store.js'
import { ProcessNonceStore, SharedNonceStore } from './nonce-store.js'
export { NonceMemory } from './nonce-store.js'
import type { Scope } from './scope.js'
import { isAudience } from './secrets.js'
import type { SigningSecret, Tenant, TenantRefusal } from './tenant-signature.js'
import { DEFAULT_REPLAY_WINDOW_SECONDS, EMPTY_CONTENT_DIGEST, verifyTenantHeaders } from './tenant-signature.js'

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
  /** This backend's audience name (AGENCY_SERVICE_AUDIENCE, RESOURCE_SERVICE_AUDIENCE): requests signed for another are refused. */
  audience: string
  /** This audience's secrets (readAudienceSecrets): the current one first, then (during a rotation) the previous one. */
  secrets: readonly SigningSecret[]
  /** The clock, in seconds; a parameter so tests can move it. */
  now?: () => number
  /** Seconds a signature stays acceptable, either way. */
  windowSeconds?: number
  /**
   * Route prefixes that are not signed (`/healthz`, `/console`), compared on
   * whole segments with the path the matched route was declared with.
   */
  unsignedRoutes?: readonly string[]
  /** Where every replica of this backend sees the nonces (REDIS_URL); this process's memory alone when absent. */
  redis?: NonceRedis
}

/** Why a request was refused, as logged: the signature's own reasons, a nonce seen before, or a body that is not the signed one. */
export type TenantVerifierRefusal = TenantRefusal | 'replayed' | 'body-mismatch'

function isUnderPrefix(routeUrl: string, prefix: string): boolean {
  return routeUrl === prefix || routeUrl.startsWith(prefix.endsWith('/') ? prefix : `${prefix}/`)
}

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

/** Constant-time equality of two digest header values (their length is not secret). */
function sameDigest(a: string, b: string): boolean {
  const left = Buffer.from(a)
  const right = Buffer.from(b)
  return left.length === right.length && timingSafeEqual(left, right)
}

/** A request carries a body when it says so: a content-length above 0, or any transfer-encoding. */
function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length']
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && Number(length) > 0)
}

interface Verified {
  tenant: Tenant
  /** The signed content-digest. */
  digest: string
  /** The body was checked against the digest (or there was none and the digest was the empty body's). */
  bodyChecked: boolean
}

const verifiedRequests = new WeakMap<FastifyRequest, Verified>()

/**
 * A pass-through that hashes the bytes as Fastify reads them and, at their
 * end, fails with invalidSignature instead of ending when their digest is not
 * the signed one; the parser then answers that error and the handler never runs.
 */
class DigestCheckingStream extends Transform {
  /** Bytes read so far; Fastify compares it with content-length. */
  receivedEncodedLength = 0
  private readonly hash = createHash('sha256')

  constructor(
    private readonly expected: string,
    private readonly onEnd: (matched: boolean) => void,
  ) {
    super()
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.receivedEncodedLength += chunk.length
    this.hash.update(chunk)
    callback(null, chunk)
  }

  override _flush(callback: TransformCallback): void {
    const matched = sameDigest(`sha-256=:${this.hash.digest('base64')}:`, this.expected)
    this.onEnd(matched)
    callback(matched ? null : new ApiError('invalidSignature'))
  }
}

export const tenantVerifier = fp(
  async (app: FastifyInstance, options: TenantVerifierOptions) => {
    if (!isAudience(options.audience)) throw new Error('tenant-verifier: an audience name is required')
    if (options.secrets.length === 0) throw new Error('tenant-verifier: at least one secret is required')
    const audience = options.audience
    const secrets = [...options.secrets]
    const now = options.now ?? (() => Date.now() / 1000)
    const windowSeconds = options.windowSeconds ?? DEFAULT_REPLAY_WINDOW_SECONDS
    const isUnsigned = unsignedRouteCheck([...(options.unsignedRoutes ?? [])])
    const nonces: NonceStore =
      options.redis === undefined
        ? new ProcessNonceStore(windowSeconds)
        : new SharedNonceStore(options.redis, audience, windowSeconds, (error) => app.log.warn({ err: error }, 'nonce store unavailable'))

    const refuse = (request: FastifyRequest, reply: FastifyReply, reason: TenantVerifierRefusal): FastifyReply => {
      request.log.warn({ reason }, 'tenant signature refused')
      return sendError(reply, errorCatalog.invalidSignature.status, errorCatalog.invalidSignature.message)
    }

    app.decorateRequest('tenant', {
      getter(this: FastifyRequest): Tenant {
        const verified = verifiedRequests.get(this)
        // Only a route that was declared unsigned can get here; it has no tenant to read.
        if (verified === undefined) throw new ApiError('invalidSignature')
        return verified.tenant
      },
    })

    app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      if (isUnsigned(request)) return
      const at = now()
      const result = verifyTenantHeaders(
        request.headers,
        { method: request.method, pathWithQuery: request.raw.url ?? '', audience },
        secrets,
        at,
        windowSeconds,
      )
      if (!result.ok) return refuse(request, reply, result.reason)
      // Remembered only now that the signature is the gateway's, so an unsigned flood cannot fill the memory.
      const seen = await nonces.remember(result.nonce, at)
      if (seen === 'replayed') return refuse(request, reply, 'replayed')
      // Accepting a nonce that cannot be checked could accept a replay: refused, to be sent again.
      if (seen === 'unavailable') {
        request.log.warn({ reason: 'nonce-unavailable' }, 'tenant signature not checked')
        return sendError(reply, errorCatalog.serviceUnavailable.status, errorCatalog.serviceUnavailable.message)
      }
      const withBody = hasBody(request)
      if (!withBody && !sameDigest(result.contentDigest, EMPTY_CONTENT_DIGEST)) return refuse(request, reply, 'body-mismatch')
      verifiedRequests.set(request, { tenant: result.tenant, digest: result.contentDigest, bodyChecked: !withBody })
    })

    app.addHook('preParsing', async (request: FastifyRequest, _reply: FastifyReply, payload) => {
      const verified = verifiedRequests.get(request)
      if (verified === undefined || verified.bodyChecked) return payload
      const checking = new DigestCheckingStream(verified.digest, (matched) => {
        if (matched) verified.bodyChecked = true
        else request.log.warn({ reason: 'body-mismatch' satisfies TenantVerifierRefusal }, 'tenant signature refused')
      })
      payload.on('error', (error) => checking.destroy(error))
      return payload.pipe(checking)
    })

    app.addHook('preValidation', async (request: FastifyRequest, reply: FastifyReply) => {
      const verified = verifiedRequests.get(request)
      // A body Fastify did not read (GET, HEAD) was never compared with its digest.
      if (verified !== undefined && !verified.bodyChecked) return refuse(request, reply, 'body-mismatch')
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
