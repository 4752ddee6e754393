/**
 * Forwarding. The gateway routes once, itself (authenticate.ts), and hands
 * @fastify/reply-from the upstream origin plus exactly the path it
 * authorized, from a single catch-all route. It deliberately does not use
 * @fastify/http-proxy: its prefix routing would match and rewrite a path of
 * its own, and a gateway whose router sees a different path from the one it
 * authorized is the bug behind the 2026 middie/express advisories.
 *
 * What goes upstream: the canonical path, the query without tenant
 * parameters, the caller's headers minus credentials and `x-tenant-*`
 * (cookies only to console routes), `x-request-id`, and, on API routes, the
 * tenant headers signed over the method and that exact path with query.
 * JSON bodies are parsed (tenant fields stripped on API routes) and sent
 * re-serialized; any other body is streamed through untouched.
 */
import { Stream } from 'node:stream'
import type { IncomingHttpHeaders } from 'node:http'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { errorCodes } from 'fastify'
import replyFrom from '@fastify/reply-from'
import type { FastifyReplyFromHooks } from '@fastify/reply-from'
import type { Dispatcher } from 'undici'
import type { Logger } from '@scoped/shared/logger'
import type { GatewayMetrics } from './metrics.js'
import { pathWithQuery } from './request-path.js'
import { refuse } from './respond.js'
import { tenantHeaders } from '@scoped/shared/tenant-signature'
import { TenantSigner } from './tenant-signer.js'
import { stripCallerHeaders, stripTenantFields } from './tenant-stripping.js'

type Hooks = Required<FastifyReplyFromHooks>
/** Requests and replies as @fastify/reply-from hands them to its hooks. */
type ProxiedRequest = Parameters<Hooks['rewriteRequestHeaders']>[0]
type ProxiedReply = Parameters<Hooks['onError']>[0]
type ProxiedHeaders = Parameters<Hooks['rewriteRequestHeaders']>[1]

export const STRICT_TRANSPORT_SECURITY = 'max-age=63072000; includeSubDomains'

export interface ProxyDeps {
  /**
   * A keep-alive undici dispatcher (one pool per upstream origin), owned and
   * closed by the caller; its headersTimeout/bodyTimeout are the upstream
   * timeout (set there once rather than per request).
   */
  dispatcher: Dispatcher
  tenantSigningSecret: string
  bodyLimit: number
  metrics: GatewayMetrics
  log: Logger
  isDraining: () => boolean
}

const TIMEOUT_CODES = new Set([
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'FST_REPLY_FROM_TIMEOUT',
  'FST_REPLY_FROM_GATEWAY_TIMEOUT',
  'FST_REPLY_FROM_HTTP_REQUEST_TIMEOUT',
  'ETIMEDOUT',
])

/** The one place transport failures are mapped: too slow is 504, anything else (refused, reset, closed) is 502. */
export function classifyTransportError(error: unknown): 'upstream-timeout' | 'upstream-error' {
  for (let current: unknown = error, depth = 0; typeof current === 'object' && current !== null && depth < 5; depth++) {
    const { code, cause } = current as { code?: unknown; cause?: unknown }
    if (typeof code === 'string' && TIMEOUT_CODES.has(code)) return 'upstream-timeout'
    current = cause
  }
  return 'upstream-error'
}

/** The methods the gateway forwards; any other (TRACE, QUERY, WebDAV, …) is refused with 405 before authentication. */
export const FORWARDED_METHODS = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT'] as const
const forwardedMethods = new Set<string>(FORWARDED_METHODS)
export function isForwardedMethod(method: string): boolean {
  return forwardedMethods.has(method)
}

export async function registerProxy(app: FastifyInstance, deps: ProxyDeps): Promise<void> {
  const { metrics, log, isDraining } = deps
  const signer = new TenantSigner(deps.tenantSigningSecret)

  await app.register(replyFrom, { undici: deps.dispatcher, disableRequestLogging: true })

  // Only JSON is parsed (Fastify's own parser, with its body limit); every other body streams through.
  app.removeContentTypeParser('text/plain')
  app.addContentTypeParser('*', (request, payload, done) => {
    const declared = Number(request.headers['content-length'])
    if (declared > deps.bodyLimit) done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE(), undefined)
    else done(null, payload)
  })

  function forwardedQuery(_search: string | undefined, _url: string, request: ProxiedRequest): string {
    return request.gatewayQuery
  }

  function withoutBodyHeaders(request: ProxiedRequest, headers: IncomingHttpHeaders): void {
    // Fastify does not read a GET or HEAD body, so none is forwarded and its length must not be announced.
    if (request.method === 'GET' || request.method === 'HEAD') {
      if (headers['content-length'] !== undefined) headers['content-length'] = undefined
      if (headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = undefined
    }
  }

  function apiRequestHeaders(request: ProxiedRequest, proxied: ProxiedHeaders): ProxiedHeaders {
    const headers = proxied as IncomingHttpHeaders
    stripCallerHeaders(headers, false)
    withoutBodyHeaders(request, headers)
    headers['x-request-id'] = request.id
    const signed = signer.sign(request.method, pathWithQuery(request.gatewayTarget!.path, request.gatewayQuery), request.gatewayTenant!, Date.now())
    headers[tenantHeaders.scope] = signed[tenantHeaders.scope]
    headers[tenantHeaders.agencyId] = signed[tenantHeaders.agencyId]
    if (signed[tenantHeaders.subAccountId] !== undefined) headers[tenantHeaders.subAccountId] = signed[tenantHeaders.subAccountId]
    headers[tenantHeaders.keyId] = signed[tenantHeaders.keyId]
    headers[tenantHeaders.timestamp] = signed[tenantHeaders.timestamp]
    headers[tenantHeaders.signature] = signed[tenantHeaders.signature]
    return headers
  }

  function sessionRequestHeaders(request: ProxiedRequest, proxied: ProxiedHeaders): ProxiedHeaders {
    const headers = proxied as IncomingHttpHeaders
    stripCallerHeaders(headers, true)
    withoutBodyHeaders(request, headers)
    headers['x-request-id'] = request.id
    // The console throttles sign-ins per client and checks the origin of its forms: it needs the
    // caller's address and host as the gateway saw them, never what the caller claims in these headers.
    headers['x-forwarded-for'] = request.socket.remoteAddress ?? ''
    headers['x-forwarded-host'] = request.headers.host ?? ''
    headers['x-forwarded-proto'] = 'https'
    if (headers.forwarded !== undefined) headers.forwarded = undefined
    return headers
  }

  function responseHeaders(proxied: ProxiedHeaders): ProxiedHeaders {
    const headers = proxied as IncomingHttpHeaders
    // The gateway's own values (set when the request arrived) stand.
    if (headers['x-request-id'] !== undefined) delete headers['x-request-id']
    if (headers['strict-transport-security'] !== undefined) delete headers['strict-transport-security']
    if (isDraining()) headers.connection = 'close'
    return headers
  }

  function onResponse(request: ProxiedRequest, reply: ProxiedReply, res: { stream: unknown }): void {
    metrics.observeUpstream(request.gatewayRoute!, (performance.now() - request.gatewayUpstreamAt) / 1000)
    void reply.send(res.stream)
  }

  function onError(proxied: ProxiedReply, { error }: { error: Error }): void {
    const reply = proxied as unknown as FastifyReply
    const outcome = classifyTransportError(error)
    log.warn({ reqId: reply.request.id, route: reply.request.gatewayRoute?.prefix, err: error }, 'upstream request failed')
    refuse(reply.request, reply, outcome)
  }

  const common: FastifyReplyFromHooks = {
    // No retries: a gateway must not multiply a request (reply-from retries GETs on 503 by default).
    retryDelay: () => null,
    queryString: forwardedQuery,
    rewriteHeaders: responseHeaders,
    onResponse,
    onError,
  }
  const apiOptions: FastifyReplyFromHooks = { ...common, rewriteRequestHeaders: apiRequestHeaders }
  const sessionOptions: FastifyReplyFromHooks = { ...common, rewriteRequestHeaders: sessionRequestHeaders }

  function forward(request: FastifyRequest, reply: FastifyReply): void {
    const route = request.gatewayRoute!
    const api = route.auth === 'key'
    request.gatewayOutcome = api ? 'forwarded' : 'session'
    request.gatewayUpstreamAt = performance.now()
    const url = route.upstream + request.gatewayTarget!.path
    const body = request.body
    if (body === undefined || body instanceof Stream) {
      reply.from(url, api ? apiOptions : sessionOptions)
      return
    }
    // A parsed JSON body: strip, then send it re-serialized (also when it is a falsy JSON value).
    if (api) stripTenantFields(body)
    reply.from(url, { ...(api ? apiOptions : sessionOptions), body: JSON.stringify(body), contentType: 'application/json' })
  }

  app.route({ method: [...FORWARDED_METHODS], url: '/*', handler: forward })
}
