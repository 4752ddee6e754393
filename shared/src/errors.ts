/**
 * The one catalog of errors every service answers with. Statuses and the
 * spec's exact message texts sit side by side so a test can pin them, and the
 * envelope `{"success":false,"message":…}` is built in exactly one place.
 */
export const errorCatalog = {
  /** Spec §7: key missing, malformed or invalid. */
  missingKey: { status: 401, message: 'Invalid or missing API key' },
  /** Spec §7: key revoked or deleted. */
  revokedKey: { status: 401, message: 'Invalid or revoked API key' },
  /** Spec §7: valid key used outside its scope (the first of the two texts the spec gives). */
  scopeMismatch: { status: 403, message: 'This API key does not have access to this resource' },
  /** Contract: a restricted key on a route whose permission it lacks (permissions.ts). */
  permissionRefused: { status: 403, message: 'This API key does not have the permission this request needs' },
  /** Contract: a permission no route of the key's scope declares; `<name>` is replaced by it (unknownPermission()). */
  unknownPermission: { status: 400, message: 'Unknown permission: <name>' },
  /** Contract: a key used from a client address outside its allowlist. */
  addressNotAllowed: { status: 403, message: 'This API key cannot be used from this address' },
  /** Spec §7/§8: a validation error; the spec leaves the status open, we answer like any other invalid input. */
  keyLimitReached: { status: 400, message: 'Active API key limit reached for this scope' },
  badRequest: { status: 400, message: 'Invalid request' },
  invalidJson: { status: 400, message: 'Request body is not valid JSON' },
  badPath: { status: 400, message: 'Malformed request path' },
  httpsRequired: { status: 403, message: 'HTTPS is required; this request was not processed' },
  invalidSignature: { status: 401, message: 'Request was not signed by the gateway' },
  /** A secret-scanning alert without GitHub's valid signature (agency-service/src/leaks). */
  githubSignature: { status: 401, message: 'Invalid or missing GitHub signature' },
  forbidden: { status: 403, message: 'You do not have permission to do this' },
  notFound: { status: 404, message: 'Not found' },
  agencyNotFound: { status: 404, message: 'Agency not found' },
  subAccountNotFound: { status: 404, message: 'Sub-account not found' },
  keyNotFound: { status: 404, message: 'API key not found' },
  userNotFound: { status: 404, message: 'User not found' },
  membershipNotFound: { status: 404, message: 'The user is not a member of this agency or sub-account' },
  methodNotAllowed: { status: 405, message: 'Method not allowed' },
  conflict: { status: 409, message: 'Conflict' },
  payloadTooLarge: { status: 413, message: 'Request body is too large' },
  unsupportedMediaType: { status: 415, message: 'Unsupported content type' },
  /** Contract: a client over its failed-authentication allowance (with Retry-After). */
  /** A client over its budget of requests that need no key (the API description and its page; with Retry-After). */
  tooManyRequests: { status: 429, message: 'Too many requests' },
  tooManyAuthFailures: { status: 429, message: 'Too many failed authentication attempts' },
  /** Contract: a key or tenant over its rate limit (with Retry-After). */
  rateLimited: { status: 429, message: 'Rate limit exceeded' },
  requestTimeout: { status: 408, message: 'The request was not received in time' },
  uriTooLong: { status: 414, message: 'Request target is too long' },
  headersTooLarge: { status: 431, message: 'Request headers are too large' },
  tooDeep: { status: 400, message: 'Request body is nested too deeply' },
  upstreamBusy: { status: 503, message: 'Upstream service is busy; retry shortly' },
  internal: { status: 500, message: 'Internal server error' },
  badGateway: { status: 502, message: 'Upstream service unavailable' },
  authUnavailable: { status: 503, message: 'Authentication is temporarily unavailable' },
  serviceUnavailable: { status: 503, message: 'Service temporarily unavailable' },
  gatewayTimeout: { status: 504, message: 'Upstream service timed out' },
} as const satisfies Record<string, { status: number; message: string }>

export type ErrorCode = keyof typeof errorCatalog

/**
 * Every 503, from the gateway and the services alike, says when to retry
 * (`Retry-After`, in seconds), as every 429 does: what is unavailable (the key
 * store, a backend's connections, the nonce store, a replica shutting down)
 * is expected back soon, and a client that waits this long does not pile onto it.
 */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 2

/**
 * The catalog entry for a client error that Fastify raised by itself rather
 * than one of ours: by status for those the catalog names (413, 415), then,
 * when the caller passes Fastify's error code, by that code; anything else
 * is a bad request. The one map from Fastify's 4xx errors to our messages,
 * for the JSON envelope and the console's pages alike.
 */
export function clientErrorCode(status: number, fastifyCode?: string): ErrorCode {
  if (status === errorCatalog.payloadTooLarge.status) return 'payloadTooLarge'
  if (status === errorCatalog.unsupportedMediaType.status) return 'unsupportedMediaType'
  switch (fastifyCode) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return 'invalidJson'
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return 'payloadTooLarge'
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return 'unsupportedMediaType'
    default:
      return 'badRequest'
  }
}

export interface ErrorEnvelope {
  success: false
  message: string
}

export function errorEnvelope(message: string): ErrorEnvelope {
  return { success: false, message }
}

/**
 * A field of the caller's input: `name` is what the code calls it (the
 * ApiError's `field`, which a form reads to mark the field at fault), `label`
 * how this caller's input spells it in messages (`body.expiresAt`,
 * `--expires-at`, `The expiry`). A plain string is both.
 */
export type InputField = string | { readonly name: string; readonly label: string }

export function fieldName(field: InputField): string {
  return typeof field === 'string' ? field : field.name
}

export function fieldLabel(field: InputField): string {
  return typeof field === 'string' ? field : field.label
}

/**
 * An error that is meant to reach the caller. `message` defaults to the
 * catalog's text; a more precise one (naming the field at fault) may be given.
 * `field` names the input field that is wrong, when validation knows it; it
 * never goes into the envelope, which stays `{success:false,message}`.
 */
export class ApiError extends Error {
  readonly code: ErrorCode
  readonly statusCode: number
  readonly field: string | undefined

  constructor(code: ErrorCode, message?: string, options: { field?: string } = {}) {
    super(message ?? errorCatalog[code].message)
    this.name = 'ApiError'
    this.code = code
    this.statusCode = errorCatalog[code].status
    this.field = options.field
  }

  toEnvelope(): ErrorEnvelope {
    return errorEnvelope(this.message)
  }
}

/** A 400 about one field of the input: the message names it as the caller spells it (`<label> <problem>`). */
export function invalidField(field: InputField, problem: string): ApiError {
  return new ApiError('badRequest', `${fieldLabel(field)} ${problem}`, { field: fieldName(field) })
}

/** The 400 for a permission no route of the key's scope declares, naming it. */
export function unknownPermission(name: string, field = 'permissions'): ApiError {
  return new ApiError('unknownPermission', errorCatalog.unknownPermission.message.replace('<name>', name), { field })
}

export function isApiError(value: unknown): value is ApiError {
  return value instanceof ApiError
}
