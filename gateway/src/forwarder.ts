/**
 * Forwarding, after the gate has decided. One catch-all route; the gateway
 * routes once, itself (gate.ts), and forwards exactly the path it authorized
 * to the route's upstream, on bounded backend connections shared fairly
 * between tenants (upstream.ts).
 *
 * Every body is read completely at the gateway, within the body deadline and
 * the body limit, before a backend connection is used: a slow client holds
 * only its own connection, never a backend's. Then, on API routes:
 *   1. the key is checked again if anything was invalidated while the body
 *      arrived (a key revoked meanwhile gets 401 and nothing is forwarded);
 *   2. a JSON body loses its tenant fields (json-body.ts); others go as they are;
 *   3. the tenant headers are signed for the route's audience, over the
 *      method, the path with the stripped query, a fresh nonce and the
 *      body's content-digest, at this moment.
 * Console routes (`auth: session`) get the raw body, no tenant headers, and
 * their cookies. Every route gets `x-forwarded-for` (the client address the
 * gateway derived), `x-forwarded-host`, `x-forwarded-proto` and `x-request-id`.
 */
import { randomBytes } from 'node:crypto'
import { PassThrough } from 'node:stream'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { ApiError } from '@scoped/shared/errors'
import { HmacSha256 } from '@scoped/shared/hmac-sha256'
import type { Logger } from '@scoped/shared/logger'
import { appendTenantHeaders, CONTENT_DIGEST_HEADER, contentDigest, EMPTY_CONTENT_DIGEST } from '@scoped/shared/tenant-signature'
import { callerHeaders } from './forward-headers.js'
import { FORWARDED_METHODS } from './gate.js'
import { isJsonContentType, prepareJsonBody } from './json-body.js'
import { isExpired, keyPolicyRefusal } from './key-policy.js'
import type { KeyVerifier } from './key-verifier.js'
import type { GatewayMetrics } from './metrics.js'
import { pathWithQuery } from './request-path.js'
import type { RelayDeps } from './relay.js'
import { relay } from './relay.js'
import { refuse } from './respond.js'
import type { ScopedRoute } from './route-map.js'
import type { Upstreams } from './upstream.js'
import { upstreamTenant } from './upstream.js'

export interface ForwarderOptions {
  upstreams: Upstreams
  /** The signing secret of each audience of the route map. */
  audienceSecrets: ReadonlyMap<string, Buffer>
  verifier: KeyVerifier
  bodyLimit: number
  /** From the end of the headers until the body is complete. */
  bodyTimeoutMs: number
  metrics: GatewayMetrics
  log: Logger
  isDraining: () => boolean
}

function ignore(): void {}

/** Nonces: this process's random prefix and a counter; unique across replicas and restarts, and cheap. */
const NONCE_PREFIX = randomBytes(12).toString('base64url')
let nonceCounter = 0
function nextNonce(): string {
  return `${NONCE_PREFIX}-${(nonceCounter++).toString(36)}`
}

async function forwarder(app: FastifyInstance, options: ForwarderOptions): Promise<void> {
  const { upstreams, verifier, metrics, log, isDraining } = options
  // Each audience's MAC key made once (its padded blocks), not for every signature (hmac-sha256.ts).
  const signingKeys = new Map([...options.audienceSecrets].map(([audience, secret]) => [audience, new HmacSha256(secret)]))

  // Every body is read whole, as bytes; what it means is decided per route in the handler.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: options.bodyLimit }, (_request, body, done) => done(null, body))

  // The body deadline: a body still arriving after it is refused (408 in the envelope) and its connection
  // closed. The body is read through a pass-through that the deadline ends with an error: destroying
  // Node's request itself would destroy the socket before the 408 could be written. The deadline ends
  // with the body, and also with the response: a request answered before its body was read (413 once the
  // body passed the limit) leaves the pass-through open, and the deadline must not fire on it then. The
  // pass-through's errors are for the body parser; once it has stopped listening they are nobody's, and an
  // error event without a listener would end the process.
  app.addHook('preParsing', (request, reply, payload, done) => {
    if (request.headers['content-length'] === undefined && request.headers['transfer-encoding'] === undefined) {
      done(null, payload)
      return
    }
    const guarded = new PassThrough()
    guarded.on('error', ignore)
    payload.on('error', (error) => guarded.destroy(error))
    payload.pipe(guarded)
    const timer = setTimeout(() => {
      payload.unpipe(guarded)
      reply.header('connection', 'close')
      guarded.destroy(new ApiError('requestTimeout'))
    }, options.bodyTimeoutMs)
    const clear = (): void => clearTimeout(timer)
    guarded.once('end', clear).once('close', clear)
    reply.raw.once('close', clear)
    done(null, guarded)
  })

  /** Whether the key's verification still stands: nothing was invalidated since, and its own expiry has not passed. */
  function stillCurrent(request: FastifyRequest): boolean {
    return verifier.generation === request.gatewayGeneration && !isExpired(request.gatewayKeyExpiresAt, Date.now())
  }

  /** Checks the key again (the cache changed while the body arrived, or its expiry passed); false when the request was refused. */
  async function checkAgain(request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
    const hash = request.gatewayKeyHash!
    const state = verifier.cached(hash, performance.now()) ?? (await verifier.verify(hash, request.gatewayClient))
    const refusal = state.status === 'active' ? keyPolicyRefusal(state, Date.now(), request.gatewayClient) : state.status
    if (refusal === undefined) return true
    refuse(request, reply, refusal)
    return false
  }

  const relayDeps: RelayDeps = { upstreams, metrics, log, isDraining }

  /**
   * The handler. Synchronous unless the key must be checked again: the usual
   * request costs no promise and no extra turn of the microtask queue. It
   * answers (or hands the reply to the relay) itself and returns nothing, so
   * Fastify has nothing left to send.
   */
  function forward(request: FastifyRequest, reply: FastifyReply): undefined | Promise<undefined> {
    if (request.gatewayRoute!.auth === 'key' && !stillCurrent(request)) {
      return checkAgain(request, reply).then((authorized) => {
        if (authorized) send(request, reply)
        return undefined
      })
    }
    send(request, reply)
    return undefined
  }

  /** Prepares what goes upstream (headers, the body as forwarded, the signature) and relays it. */
  function send(request: FastifyRequest, reply: FastifyReply): void {
    const route = request.gatewayRoute!
    const api = route.auth === 'key'
    let body = Buffer.isBuffer(request.body) ? request.body : undefined
    const target = pathWithQuery(request.gatewayTarget!.path, request.gatewayQuery)
    const headers = callerHeaders(request.raw.rawHeaders, !api)
    if (api) {
      if (body !== undefined && isJsonContentType(request.headers['content-type'])) {
        const prepared = prepareJsonBody(body)
        if (!prepared.ok) {
          refuse(request, reply, prepared.outcome)
          return
        }
        body = prepared.body
      }
      const scoped = route as ScopedRoute
      appendTenantHeaders(
        headers,
        signingKeys.get(scoped.audience)!,
        {
          method: request.method,
          pathWithQuery: target,
          audience: scoped.audience,
          contentDigest: body === undefined ? EMPTY_CONTENT_DIGEST : contentDigest(body),
          nonce: nextNonce(),
        },
        request.gatewayTenant!,
        Date.now() / 1000,
      )
    } else if (body !== undefined) {
      headers.push(CONTENT_DIGEST_HEADER, contentDigest(body))
    }
    if (body !== undefined) headers.push('content-length', String(body.length))
    headers.push('x-request-id', request.id, 'x-forwarded-for', request.gatewayClient, 'x-forwarded-proto', 'https')
    if (request.headers.host !== undefined) headers.push('x-forwarded-host', request.headers.host)

    request.gatewayOutcome = api ? 'forwarded' : 'session'
    relay(request, reply, { route, path: target, headers, body, tenant: upstreamTenant(request.gatewayTenant) }, relayDeps)
  }

  app.route({ method: [...FORWARDED_METHODS], url: '/*', handler: forward })
}

export const forwarderPlugin = fp(forwarder, { name: 'gateway-forwarder', fastify: '5.x', dependencies: ['gateway-gate'] })
