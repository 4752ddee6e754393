/**
 * Forwarding, after the gate has decided. One catch-all route; the gateway
 * routes once, itself (gate.ts), and forwards exactly the path it authorized
 * to the route's upstream, on the gateway's own bounded keep-alive
 * connections, shared fairly between tenants (upstream.ts), as the gate's
 * decision (request-state.ts) says.
 *
 * Every body is read completely at the gateway, within the body deadline and
 * the body limit, before a backend connection is used: a slow client holds
 * only its own connection, never a backend's. Then, on API routes:
 *   1. the key is checked again (authorize, as the gate did) if anything was
 *      invalidated while the body arrived, if this replica is not current
 *      with the invalidation log now (it may not have heard of a revoke:
 *      paused, or cut off from Postgres; the second look then reads
 *      Postgres), or if its expiry has passed since (a key revoked meanwhile
 *      gets 401 and nothing is forwarded);
 *   2. a JSON body loses its tenant fields (json-body.ts), the query its
 *      tenant parameters (tenant-stripping.ts); others go as they are;
 *   3. the tenant headers are signed for the route's audience, over the
 *      method, the path with the stripped query, a fresh nonce and the
 *      body's content-digest, at this moment.
 * Console routes (`auth: session`) get the raw body and query, no tenant
 * headers, and their cookies; leak reports the same without cookies (GitHub
 * signs the body's exact bytes: it is never re-serialized). Every route gets the client address the gateway
 * derived, signed for the route's backend (signed-client-address.ts, the only
 * copy backends believe) and as `x-forwarded-for`, `x-forwarded-host`,
 * `x-forwarded-proto` and `x-request-id`.
 */
import { randomBytes } from 'node:crypto'
import { PassThrough } from 'node:stream'
import type { FastifyInstance, FastifyReply, FastifyRequest, preParsingHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import { ApiError } from '@scoped/shared/errors'
import { HmacSha256 } from '@scoped/shared/hmac-sha256'
import type { Logger } from '@scoped/shared/logger'
import { appendClientAddress } from '@scoped/shared/signed-client-address'
import { appendTenantHeaders, CONTENT_DIGEST_HEADER, contentDigest, EMPTY_CONTENT_DIGEST } from '@scoped/shared/tenant-signature'
import type { HeaderList } from './forward-headers.js'
import { callerHeaders } from './forward-headers.js'
import { authorize, FORWARDED_METHODS } from './gate.js'
import { isJsonContentType, prepareJsonBody } from './json-body.js'
import { isExpired } from './key-policy.js'
import type { Verifier } from './key-verifier.js'
import type { GatewayMetrics } from './metrics.js'
import { pathWithQuery } from './request-path.js'
import type { ForwardedDecision, KeyDecision, ReportDecision, SessionDecision } from './request-state.js'
import type { RelayDeps } from './relay.js'
import { relay } from './relay.js'
import { refuse } from './respond.js'
import { stripTenantQuery } from './tenant-stripping.js'
import type { Upstreams } from './upstream.js'
import { upstreamTenant } from './upstream.js'

export interface ForwarderOptions {
  upstreams: Upstreams
  /** The signing secret of each audience of the route map. */
  audienceSecrets: ReadonlyMap<string, Buffer>
  verifier: Verifier
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

/**
 * The body deadline: a body still arriving after it is refused (408 in the envelope) and its connection
 * closed. The body is read through a pass-through that the deadline ends with an error: destroying
 * Node's request itself would destroy the socket before the 408 could be written. The deadline ends
 * with the body, and also with the response: a request answered before its body was read (413 once the
 * body passed the limit) leaves the pass-through open, and the deadline must not fire on it then. The
 * pass-through's errors are for the body parser; once it has stopped listening they are nobody's, and an
 * error event without a listener would end the process.
 */
function bodyDeadline(timeoutMs: number): preParsingHookHandler {
  return (request, reply, payload, done) => {
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
    }, timeoutMs)
    const clear = (): void => clearTimeout(timer)
    guarded.once('end', clear).once('close', clear)
    reply.raw.once('close', clear)
    done(null, guarded)
  }
}

function bodyOf(request: FastifyRequest): Buffer | undefined {
  return Buffer.isBuffer(request.body) ? request.body : undefined
}

class Forwarder {
  /** Each audience's MAC key made once (its padded blocks), not for every signature (hmac-sha256.ts). */
  private readonly signingKeys: ReadonlyMap<string, HmacSha256>
  private readonly relayDeps: RelayDeps

  constructor(private readonly options: ForwarderOptions) {
    this.signingKeys = new Map([...options.audienceSecrets].map(([audience, secret]) => [audience, new HmacSha256(secret)]))
    this.relayDeps = { upstreams: options.upstreams, metrics: options.metrics, log: options.log, isDraining: options.isDraining }
  }

  /**
   * The handler. Synchronous unless the key must be checked again: the usual
   * request costs no promise and no extra turn of the microtask queue. It
   * answers (or hands the reply to the relay) itself and returns nothing, so
   * Fastify has nothing left to send.
   */
  readonly forward = (request: FastifyRequest, reply: FastifyReply): undefined | Promise<undefined> => {
    const decision = request.gateway
    if (decision?.kind === 'session' || decision?.kind === 'report') return this.sendUnkeyed(request, reply, decision)
    // The gate passes nothing else to this route (refusals are answered in its hook, documents have routes of their own).
    if (decision?.kind !== 'key') throw new Error('a request reached the forwarder without a decision to forward it')
    if (this.stillCurrent(decision)) return this.sendWithKey(request, reply, decision)
    return this.checkAgain(request, reply, decision).then((authorized) => (authorized ? this.sendWithKey(request, reply, decision) : undefined))
  }

  /**
   * Whether the key's verification still stands: nothing was invalidated since, this replica is current
   * (whatever the generation says: a replica that lost currency learns so only when something asks), and
   * the key's own expiry has not passed.
   */
  private stillCurrent(decision: KeyDecision): boolean {
    const { verifier } = this.options
    return verifier.generation === decision.generation && verifier.isCurrent(performance.now()) && !isExpired(decision.key.expiresAt, Date.now())
  }

  /** The key checked again, as the gate checks it (authorize); false when the request was refused. */
  private async checkAgain(request: FastifyRequest, reply: FastifyReply, decision: KeyDecision): Promise<boolean> {
    const { verifier } = this.options
    // Not charged to the client's lookup slots: the gate found this key, so it is no guess, and a flood of guesses
    // from its address must not turn its valid key away (its own flights are shared per hash and bounded overall).
    const state = verifier.cached(decision.hash, performance.now()) ?? (await verifier.verify(decision.hash))
    const outcome = authorize(decision.route, state, Date.now(), decision.client, request.method)
    if (outcome === 'valid') return true
    refuse(request, reply, outcome)
    return false
  }

  /** A key's request: its JSON body and its query without tenant fields, the tenant headers signed for the route's backend. */
  private sendWithKey(request: FastifyRequest, reply: FastifyReply, decision: KeyDecision): undefined {
    let body = bodyOf(request)
    if (body !== undefined && isJsonContentType(request.headers['content-type'])) {
      const prepared = prepareJsonBody(body)
      if (!prepared.ok) {
        refuse(request, reply, prepared.outcome)
        return undefined
      }
      body = prepared.body
    }
    const path = pathWithQuery(decision.target.path, stripTenantQuery(decision.target.query))
    const headers = callerHeaders(request.raw.rawHeaders, false)
    this.sign(headers, request.method, path, body, decision)
    return this.send(request, reply, decision, path, headers, body)
  }

  /** A console request or a leak report: its body and query as they came, no tenant headers; cookies for the console only. */
  private sendUnkeyed(request: FastifyRequest, reply: FastifyReply, decision: SessionDecision | ReportDecision): undefined {
    const body = bodyOf(request)
    const headers = callerHeaders(request.raw.rawHeaders, decision.kind === 'session')
    if (body !== undefined) headers.push(CONTENT_DIGEST_HEADER, contentDigest(body))
    return this.send(request, reply, decision, pathWithQuery(decision.target.path, decision.target.query), headers, body)
  }

  private signingKey(audience: string): HmacSha256 {
    const signingKey = this.signingKeys.get(audience)
    // Checked at start (config.ts): every audience of the route map has a secret.
    if (signingKey === undefined) throw new Error(`no signing secret for the audience ${audience}`)
    return signingKey
  }

  private sign(headers: HeaderList, method: string, path: string, body: Buffer | undefined, decision: KeyDecision): void {
    const { audience } = decision.route
    const signingKey = this.signingKey(audience)
    const digest = body === undefined ? EMPTY_CONTENT_DIGEST : contentDigest(body)
    appendTenantHeaders(
      headers,
      signingKey,
      { method, pathWithQuery: path, audience, contentDigest: digest, nonce: nextNonce() },
      decision.tenant,
      Date.now() / 1000,
    )
  }

  /** The headers every forwarded request carries, then the relay. */
  private send(
    request: FastifyRequest,
    reply: FastifyReply,
    decision: ForwardedDecision,
    path: string,
    headers: HeaderList,
    body: Buffer | undefined,
  ): undefined {
    if (body !== undefined) headers.push('content-length', String(body.length))
    headers.push('x-request-id', request.id, 'x-forwarded-for', decision.client, 'x-forwarded-proto', 'https')
    // The backend believes only this signed copy of the address (signed-client-address.ts).
    if (decision.client !== '')
      appendClientAddress(
        headers,
        this.signingKey(decision.route.audience),
        { method: request.method, pathWithQuery: path, audience: decision.route.audience },
        decision.client,
        Date.now() / 1000,
      )
    if (request.headers.host !== undefined) headers.push('x-forwarded-host', request.headers.host)
    decision.outcome = decision.kind === 'key' ? 'forwarded' : decision.kind
    relay(request, reply, { decision, path, headers, body, tenant: upstreamTenant(decision.tenant) }, this.relayDeps)
    return undefined
  }
}

async function forwarder(app: FastifyInstance, options: ForwarderOptions): Promise<void> {
  // Every body is read whole, as bytes; what it means is decided per route in the handler.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: options.bodyLimit }, (_request, body, done) => done(null, body))
  app.addHook('preParsing', bodyDeadline(options.bodyTimeoutMs))
  app.route({ method: [...FORWARDED_METHODS], url: '/*', handler: new Forwarder(options).forward })
}

export const forwarderPlugin = fp(forwarder, { name: 'gateway-forwarder', fastify: '5.x', dependencies: ['gateway-gate'] })
