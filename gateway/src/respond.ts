/**
 * Decide, then respond: every way a request can end is one outcome of a
 * closed vocabulary (logged and counted as data), and this is the one place
 * that turns a refusal into a status and the spec's message.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { sendError } from '@scoped/shared/error-envelope-plugin'
import { errorCatalog } from '@scoped/shared/errors'
// The request fields (outcome, …) are declared there.
import type {} from './request-state.js'

export const requestOutcomes = [
  'forwarded',
  'session',
  'bad-path',
  'missing',
  'malformed',
  'unknown',
  'revoked',
  'deleted',
  'no-route',
  'scope-mismatch',
  'unavailable',
  'method-not-allowed',
  'draining',
  'bad-request',
  'upstream-error',
  'upstream-timeout',
  'https-required',
  'error',
] as const
export type RequestOutcome = (typeof requestOutcomes)[number]

/** Outcomes the gateway answers itself, with the catalog entry it answers. */
export const refusals = {
  'bad-path': errorCatalog.badPath,
  missing: errorCatalog.missingKey,
  malformed: errorCatalog.missingKey,
  unknown: errorCatalog.missingKey,
  revoked: errorCatalog.revokedKey,
  deleted: errorCatalog.revokedKey,
  'no-route': errorCatalog.notFound,
  'scope-mismatch': errorCatalog.scopeMismatch,
  unavailable: errorCatalog.authUnavailable,
  'method-not-allowed': errorCatalog.methodNotAllowed,
  draining: errorCatalog.serviceUnavailable,
  'upstream-error': errorCatalog.badGateway,
  'upstream-timeout': errorCatalog.gatewayTimeout,
  'https-required': errorCatalog.httpsRequired,
} as const satisfies Partial<Record<RequestOutcome, { status: number; message: string }>>
export type Refusal = keyof typeof refusals

/** RFC 6750 §3: a 401 tells the client which scheme to use. */
export const WWW_AUTHENTICATE = 'Bearer'

export function refuse(request: FastifyRequest, reply: FastifyReply, outcome: Refusal): FastifyReply {
  request.gatewayOutcome = outcome
  const { status, message } = refusals[outcome]
  if (status === 401) reply.header('www-authenticate', WWW_AUTHENTICATE)
  if (outcome === 'draining') reply.header('connection', 'close')
  return sendError(reply, status, message)
}

/** The outcome of a request that ended in an error the gateway did not name (a bad body, say). */
export function outcomeOfStatus(status: number): RequestOutcome {
  return status >= 500 ? 'error' : 'bad-request'
}
