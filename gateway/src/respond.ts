/**
 * Decide, then respond: the one place that turns a refusal outcome into a
 * status, headers and the spec's message in the error envelope.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { sendError } from '@scoped/shared/error-envelope-plugin'
import { errorEnvelope, UNAVAILABLE_RETRY_AFTER_SECONDS } from '@scoped/shared/errors'
import type { Refusal } from './outcomes.js'
import { refusals } from './outcomes.js'
import type { ForwardedDecision } from './request-state.js'
import { decisionOf } from './request-state.js'

/** RFC 6750 §3: a 401 tells the client which scheme to use. */
export const WWW_AUTHENTICATE = 'Bearer'

/** Every response of the API listener carries it. */
export const STRICT_TRANSPORT_SECURITY = 'max-age=63072000; includeSubDomains'

/**
 * The gateway's own headers on an answer the relay writes (relay.ts), as a
 * header list: HSTS, x-request-id and, on a rate-limited route, RateLimit-Policy
 * and RateLimit. The gate sets the same on the reply for the answers Fastify
 * sends; the relay takes them from the decision rather than copying the
 * reply's headers (`reply.getHeaders()` builds two objects per request), so
 * these are all the headers the gateway adds before forwarding.
 */
export function forwardedAnswerHeaders(requestId: string, decision: ForwardedDecision): string[] {
  const own = ['strict-transport-security', STRICT_TRANSPORT_SECURITY, 'x-request-id', requestId]
  if (decision.kind === 'key' && decision.rateLimitPolicy !== null && decision.rateLimitState !== null) {
    own.push('ratelimit-policy', decision.rateLimitPolicy, 'ratelimit', decision.rateLimitState)
  }
  return own
}

/**
 * The same refusal, written to Node's response directly: for a reply the
 * forwarder has taken over (hijacked) before the backend answered.
 */
export function refuseRaw(request: FastifyRequest, reply: FastifyReply, outcome: Refusal): void {
  decisionOf(request).outcome = outcome
  const { status, message } = refusals[outcome]
  const body = JSON.stringify(errorEnvelope(message))
  const response = reply.raw
  if (response.headersSent || response.destroyed) return
  response.writeHead(status, {
    ...(reply.getHeaders() as Record<string, string>),
    // As sendError does for the answers Fastify sends: a backend full, for everyone or for this tenant, has a place again soon.
    ...(status === 503 ? { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS) } : {}),
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
  })
  response.end(body)
}

export function refuse(request: FastifyRequest, reply: FastifyReply, outcome: Refusal, headers?: Readonly<Record<string, string>>): FastifyReply {
  decisionOf(request).outcome = outcome
  const { status, message } = refusals[outcome]
  if (status === 401) reply.header('www-authenticate', WWW_AUTHENTICATE)
  if (outcome === 'draining' || outcome === 'request-timeout') reply.header('connection', 'close')
  if (headers !== undefined) reply.headers(headers)
  return sendError(reply, status, message)
}
