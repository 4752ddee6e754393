/**
 * The last step of forwarding: one request to a backend, and its answer
 * written straight to the caller's response. The reply is taken over from
 * Fastify (hijacked) and the request goes out on a backend connection
 * (upstream.ts) with this handler, one object per request: the backend's status and
 * headers are written once (with the gateway's own: HSTS, x-request-id,
 * rate limits), each body chunk is written as it arrives, with backpressure both
 * ways, and nothing else is allocated per chunk. A caller that goes away
 * aborts the backend request. Fastify still runs its onResponse hooks (the
 * log line) when the hijacked response finishes.
 *
 * Transport failures before the backend answered are refused in the envelope
 * (502, 504, 503 for a full pool or a tenant over its share); after it started answering, the caller's
 * connection is cut, since a half-sent answer cannot be turned into an error.
 */
import type { IncomingHttpHeaders } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Client, Dispatcher } from 'undici'
import type { Logger } from '@scoped/shared/logger'
import type { HeaderList } from './forward-headers.js'
import { returnedHeaders } from './forward-headers.js'
import type { GatewayMetrics } from './metrics.js'
import type { ForwardedDecision } from './request-state.js'
import { forwardedAnswerHeaders, refuseRaw } from './respond.js'
import type { BackendShare, UpstreamExchange, Upstreams } from './upstream.js'
import { classifyTransportError } from './upstream.js'

type DispatchController = Parameters<NonNullable<Dispatcher.DispatchHandler['onRequestStart']>>[0]

export interface RelayDeps {
  upstreams: Upstreams
  metrics: GatewayMetrics
  log: Logger
  isDraining: () => boolean
}

export interface Outgoing {
  /** The gate's decision: the route, and where the relay notes when the upstream request started. */
  decision: ForwardedDecision
  /** The path with the query, as forwarded. */
  path: string
  headers: HeaderList
  body: Buffer | undefined
  /** Whose share of the backend it takes (upstream.ts `upstreamTenant`). */
  tenant: string
}

/**
 * The exchange relaying the response a caller's connection is waiting for,
 * kept on the connection itself; null between requests. HTTP/1.1 answers a
 * connection's requests one at a time, so there is one, except for a client
 * that pipelines: then only its latest is aborted when it goes away, and an
 * earlier one ends when its backend answers (or at the upstream deadline).
 */
const current = Symbol('gateway exchange')
type CallerSocket = Socket & { [current]?: Exchange | null }

/**
 * The caller's connection closed: the backend request it was waiting for is
 * aborted. One listener per connection, added with its first exchange, rather
 * than one added and removed per request.
 */
function callerWentAway(this: CallerSocket): void {
  this[current]?.callerGone()
}

class Exchange implements UpstreamExchange {
  /** The backend connection carrying it, once sent (upstream.ts). */
  connection: Client | null = null
  private controller: DispatchController | undefined
  private answered = false
  private ended = false
  private readonly socket: CallerSocket | null
  /** Made only when a write meets backpressure. */
  private onDrain: (() => void) | undefined

  constructor(
    private readonly request: FastifyRequest,
    private readonly reply: FastifyReply,
    private readonly backend: BackendShare,
    private readonly decision: ForwardedDecision,
    private readonly deps: RelayDeps,
  ) {
    const socket = reply.raw.socket as CallerSocket | null
    this.socket = socket
    if (socket === null) return
    if (socket[current] === undefined) socket.once('close', callerWentAway)
    socket[current] = this
  }

  callerGone(): void {
    if (!this.ended && this.controller !== undefined && !this.controller.aborted) this.controller.abort(new Error('the caller went away'))
  }

  onRequestStart(controller: DispatchController): void {
    this.controller = controller
    // Gone before the request went out (its close already passed): nothing is sent.
    if (this.reply.raw.destroyed) controller.abort(new Error('the caller went away'))
  }

  onResponseStart(_controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // 1xx informational answers are the backend's business, not the caller's.
    if (statusCode < 200) return
    const { reply, request, decision, deps } = this
    deps.metrics.observeUpstream(decision.route, (performance.now() - decision.upstreamAt) / 1000)
    // The backend's headers, then the gateway's own (HSTS, x-request-id, rate limits) over them.
    const out = returnedHeaders(headers, forwardedAnswerHeaders(request.id, decision))
    if (deps.isDraining()) out.push('connection', 'close')
    this.answered = true
    reply.raw.writeHead(statusCode, out)
  }

  onResponseData(controller: DispatchController, chunk: Buffer): void {
    if (!this.reply.raw.write(chunk)) {
      controller.pause()
      this.onDrain ??= (): void => this.controller?.resume()
      this.reply.raw.once('drain', this.onDrain)
    }
  }

  onResponseEnd(): void {
    this.reply.raw.end()
    this.end()
  }

  onResponseError(_controller: DispatchController, error: Error): void {
    const { request, reply, deps } = this
    if (this.answered) {
      reply.raw.destroy(error)
    } else if (!reply.raw.destroyed) {
      deps.log.warn({ reqId: request.id, route: this.decision.route.prefix, err: error }, 'upstream request failed')
      refuseRaw(request, reply, classifyTransportError(error))
    }
    this.end()
  }

  private end(): void {
    if (this.ended) return
    this.ended = true
    if (this.socket !== null && this.socket[current] === this) this.socket[current] = null
    this.deps.upstreams.release(this.backend, this)
  }
}

/** Sends the request and answers the caller from the backend's response; the reply is hijacked. */
export function relay(request: FastifyRequest, reply: FastifyReply, outgoing: Outgoing, deps: RelayDeps): void {
  reply.hijack()
  const { decision } = outgoing
  const backend = deps.upstreams.acquire(decision.route.upstream, outgoing.tenant)
  if (typeof backend === 'string') {
    refuseRaw(request, reply, backend)
    return
  }
  decision.upstreamAt = performance.now()
  const exchange = new Exchange(request, reply, backend, decision, deps)
  backend.dispatch({ path: outgoing.path, method: request.method as Dispatcher.HttpMethod, headers: outgoing.headers, body: outgoing.body ?? null }, exchange)
}
