/**
 * How a request can end: a closed vocabulary, logged and counted as data, and
 * for each refusal the catalog entry (status and message) it is answered
 * with. Deciding returns an outcome; respond.ts turns it into a response.
 */
import { errorCatalog } from '@scoped/shared/errors'

export const requestOutcomes = [
  'forwarded',
  'session',
  'report',
  'document',
  'bad-path',
  'uri-too-long',
  'headers-too-large',
  'request-timeout',
  'missing',
  'malformed',
  'unknown',
  'revoked',
  'deleted',
  'expired',
  'not-allowed-address',
  'throttled',
  'rate-limited',
  'documents-throttled',
  'no-route',
  'scope-mismatch',
  'permission-refused',
  'unavailable',
  'method-not-allowed',
  'draining',
  'bad-request',
  'bad-json',
  'too-deep',
  'upstream-busy',
  'upstream-share',
  'upstream-error',
  'upstream-timeout',
  'https-required',
  'error',
] as const
export type RequestOutcome = (typeof requestOutcomes)[number]

/** Outcomes the gateway answers itself, with the catalog entry it answers. */
export const refusals = {
  'bad-path': errorCatalog.badPath,
  'uri-too-long': errorCatalog.uriTooLong,
  'headers-too-large': errorCatalog.headersTooLarge,
  'request-timeout': errorCatalog.requestTimeout,
  missing: errorCatalog.missingKey,
  malformed: errorCatalog.missingKey,
  unknown: errorCatalog.missingKey,
  revoked: errorCatalog.revokedKey,
  deleted: errorCatalog.revokedKey,
  expired: errorCatalog.revokedKey,
  'not-allowed-address': errorCatalog.addressNotAllowed,
  throttled: errorCatalog.tooManyAuthFailures,
  'rate-limited': errorCatalog.rateLimited,
  'documents-throttled': errorCatalog.tooManyRequests,
  'no-route': errorCatalog.notFound,
  'scope-mismatch': errorCatalog.scopeMismatch,
  'permission-refused': errorCatalog.permissionRefused,
  unavailable: errorCatalog.authUnavailable,
  'method-not-allowed': errorCatalog.methodNotAllowed,
  draining: errorCatalog.serviceUnavailable,
  'bad-json': errorCatalog.invalidJson,
  'too-deep': errorCatalog.tooDeep,
  'upstream-busy': errorCatalog.upstreamBusy,
  'upstream-share': errorCatalog.upstreamBusy,
  'upstream-error': errorCatalog.badGateway,
  'upstream-timeout': errorCatalog.gatewayTimeout,
  'https-required': errorCatalog.httpsRequired,
} as const satisfies Partial<Record<RequestOutcome, { status: number; message: string }>>
export type Refusal = keyof typeof refusals

/**
 * Outcomes that count as a failed authentication for the per-client throttle:
 * keys that were never issued. A revoked, deleted or expired key is a known
 * key (a worker still sending it), not a guess, and counts for nothing.
 */
export const AUTH_FAILURES: ReadonlySet<RequestOutcome> = new Set(['malformed', 'unknown'])

/** The outcome of a request that ended in an error the gateway did not name (a bad body, say). */
export function outcomeOfStatus(status: number): RequestOutcome {
  if (status === 408) return 'request-timeout'
  return status >= 500 ? 'error' : 'bad-request'
}
