/**
 * The signed `x-tenant-*` headers: the gateway's word to one backend about
 * who is calling. The MAC (HMAC-SHA256 under the secret of that backend's
 * audience) covers the method, the path with query, the timestamp, a nonce
 * unique to the forwarded request, the audience (which backend it is meant
 * for), the body's `content-digest` (RFC 9530, SHA-256) and every tenant
 * header. So none of them can be changed, a signed request cannot be sent to
 * another backend or with another body, and a backend that remembers the
 * nonces of its replay window refuses a replayed one. Backends take the tenant
 * from nothing else. The clock is a parameter so tests can move it.
 */
import { createHmac, hash, timingSafeEqual } from 'node:crypto'
import type { BinaryLike, KeyObject } from 'node:crypto'
import { HmacSha256 } from './hmac-sha256.js'
import type { Scope } from './scope.js'
import { isScope } from './scope.js'

export const TENANT_HEADER_PREFIX = 'x-tenant-'
export const tenantHeaders = {
  scope: 'x-tenant-scope',
  agencyId: 'x-tenant-agency-id',
  subAccountId: 'x-tenant-sub-account-id',
  keyId: 'x-tenant-key-id',
  /** The key's permissions (permissions.ts): the sorted list joined by `,`, or `*` when unrestricted. */
  keyPermissions: 'x-tenant-key-permissions',
  timestamp: 'x-tenant-timestamp',
  /** Which backend the signature is meant for. */
  audience: 'x-tenant-audience',
  /** Unique per forwarded request; a backend refuses one it has seen within its window. */
  nonce: 'x-tenant-nonce',
  signature: 'x-tenant-signature',
} as const

/** RFC 9530: `content-digest: sha-256=:<base64>:` of the body as sent (empty for no body). */
export const CONTENT_DIGEST_HEADER = 'content-digest'

/** Who the request acts for, as established by the gateway from the API key. */
export interface Tenant {
  scope: Scope
  agencyId: string
  /** Present exactly when scope is SUB-ACCOUNT. */
  subAccountId: string | null
  keyId: string
  /**
   * The key's permissions as `x-tenant-key-permissions` carries them (`*`: unrestricted). Present on
   * what a backend verified when the gateway sent it (every gateway since migration 016 does).
   */
  permissions?: string
}

/** What of the request itself the signature binds. */
export interface SignedRequest {
  method: string
  /** The path with query exactly as the backend receives it. */
  pathWithQuery: string
  /** The backend it is meant for (agency-service, resource-service, …). */
  audience: string
  /** `content-digest` of the body as forwarded (contentDigest()). */
  contentDigest: string
  nonce: string
}

/** Seconds either way a signed request stays acceptable (clock skew and transit). */
export const DEFAULT_REPLAY_WINDOW_SECONDS = 30

export type SigningSecret = BinaryLike | KeyObject

/**
 * What signs: a secret, or an HmacSha256 made from one once (the gateway's,
 * hmac-sha256.ts). Backends verify with the secrets themselves, through
 * Node's createHmac.
 */
export type Signer = SigningSecret | HmacSha256

/** The RFC 9530 Content-Digest value of a body (SHA-256). */
export function contentDigest(body: Buffer | string | undefined): string {
  return `sha-256=:${hash('sha256', body ?? '', 'base64')}:`
}

export const EMPTY_CONTENT_DIGEST = contentDigest('')

/**
 * The signed text: one field a line, in this order (header values cannot hold a newline). The key's
 * permissions are a last line when sent: with them the text has one line more, so neither adding,
 * removing nor changing the header leaves the signature valid, and a request signed without them
 * (a gateway from before them) verifies as it did.
 */
function canonical(request: SignedRequest, timestamp: string, tenant: Tenant): string {
  const text =
    `v2\n${request.method.toUpperCase()}\n${request.pathWithQuery}\n${timestamp}\n${request.nonce}\n${request.audience}\n${request.contentDigest}\n` +
    `${tenant.scope}\n${tenant.agencyId}\n${tenant.subAccountId ?? ''}\n${tenant.keyId}`
  return tenant.permissions === undefined ? text : `${text}\n${tenant.permissions}`
}

function mac(secret: SigningSecret, data: string): Buffer {
  return createHmac('sha256', secret).update(data).digest()
}

/** The same MAC as hex, encoded by the digest itself: a Buffer first, then hex, costs the signer twice as much. */
function macHex(secret: Signer, data: string): string {
  return secret instanceof HmacSha256 ? secret.hex(data) : createHmac('sha256', secret).update(data).digest('hex')
}

/**
 * Appends the headers to set on a forwarded request (tenant headers,
 * audience, nonce, content-digest and signature) to a flat
 * `[name, value, …]` list, the shape the gateway forwards: no object per request.
 */
export function appendTenantHeaders(list: string[], secret: Signer, request: SignedRequest, tenant: Tenant, nowSeconds: number): void {
  const timestamp = String(Math.floor(nowSeconds))
  list.push(
    tenantHeaders.scope,
    tenant.scope,
    tenantHeaders.agencyId,
    tenant.agencyId,
    tenantHeaders.keyId,
    tenant.keyId,
    tenantHeaders.timestamp,
    timestamp,
    tenantHeaders.audience,
    request.audience,
    tenantHeaders.nonce,
    request.nonce,
    CONTENT_DIGEST_HEADER,
    request.contentDigest,
    tenantHeaders.signature,
    macHex(secret, canonical(request, timestamp, tenant)),
  )
  if (tenant.subAccountId !== null) list.push(tenantHeaders.subAccountId, tenant.subAccountId)
  if (tenant.permissions !== undefined) list.push(tenantHeaders.keyPermissions, tenant.permissions)
}

/** The same headers as an object (for clients and tests that send headers as one). */
export function signTenantHeaders(secret: Signer, request: SignedRequest, tenant: Tenant, nowSeconds: number): Record<string, string> {
  const list: string[] = []
  appendTenantHeaders(list, secret, request, tenant, nowSeconds)
  const headers: Record<string, string> = {}
  for (let i = 0; i < list.length; i += 2) headers[list[i]!] = list[i + 1]!
  return headers
}

export type TenantRefusal = 'missing' | 'malformed' | 'stale' | 'wrong-audience' | 'bad-signature'

export type TenantVerification = { ok: true; tenant: Tenant; nonce: string; contentDigest: string; timestamp: number } | { ok: false; reason: TenantRefusal }

type HeaderBag = Record<string, string | string[] | undefined>

function single(headers: HeaderBag, name: string): string | undefined {
  const value = headers[name]
  return typeof value === 'string' ? value : undefined
}

const SIGNATURE_PATTERN = /^[0-9a-f]{64}$/
const TIMESTAMP_PATTERN = /^[0-9]{1,12}$/
export const NONCE_PATTERN = /^[A-Za-z0-9_-]{8,64}$/
const DIGEST_PATTERN = /^sha-256=:[A-Za-z0-9+/]{43}=:$/
/** `*`, or names such as `contacts:read` joined by `,` (permissions.ts), none at all for an empty list. */
const PERMISSIONS_PATTERN = /^(\*|([a-z0-9][a-z0-9-]{0,63}:(read|write)(,[a-z0-9][a-z0-9-]{0,63}:(read|write))*)?)$/

/** What the backend itself knows about the request it received. */
export interface ReceivedRequest {
  method: string
  pathWithQuery: string
  /** This backend's own audience name. */
  audience: string
}

/**
 * Checks a request's tenant headers against this backend's secrets (the
 * current one and, during a rotation, the previous one). Every comparison of
 * MACs is constant-time. The body's digest is checked by the caller against
 * the body it reads (`contentDigest` of the answer).
 */
export function verifyTenantHeaders(
  headers: HeaderBag,
  received: ReceivedRequest,
  secrets: readonly SigningSecret[],
  nowSeconds: number,
  windowSeconds = DEFAULT_REPLAY_WINDOW_SECONDS,
): TenantVerification {
  const signature = single(headers, tenantHeaders.signature)
  const timestamp = single(headers, tenantHeaders.timestamp)
  const scope = single(headers, tenantHeaders.scope)
  const agencyId = single(headers, tenantHeaders.agencyId)
  const keyId = single(headers, tenantHeaders.keyId)
  const audience = single(headers, tenantHeaders.audience)
  const nonce = single(headers, tenantHeaders.nonce)
  const digest = single(headers, CONTENT_DIGEST_HEADER)
  const subAccountHeader = headers[tenantHeaders.subAccountId]
  const permissionsHeader = headers[tenantHeaders.keyPermissions]
  if (
    signature === undefined ||
    timestamp === undefined ||
    scope === undefined ||
    agencyId === undefined ||
    keyId === undefined ||
    audience === undefined ||
    nonce === undefined ||
    digest === undefined
  ) {
    return { ok: false, reason: 'missing' }
  }
  if (
    !SIGNATURE_PATTERN.test(signature) ||
    !TIMESTAMP_PATTERN.test(timestamp) ||
    !isScope(scope) ||
    !NONCE_PATTERN.test(nonce) ||
    !DIGEST_PATTERN.test(digest)
  ) {
    return { ok: false, reason: 'malformed' }
  }
  if (Array.isArray(subAccountHeader)) return { ok: false, reason: 'malformed' }
  if (permissionsHeader !== undefined && (Array.isArray(permissionsHeader) || !PERMISSIONS_PATTERN.test(permissionsHeader)))
    return { ok: false, reason: 'malformed' }
  const subAccountId = subAccountHeader ?? null
  if ((scope === 'SUB-ACCOUNT') !== (subAccountId !== null)) return { ok: false, reason: 'malformed' }
  const signedAt = Number(timestamp)
  if (Math.abs(nowSeconds - signedAt) > windowSeconds) return { ok: false, reason: 'stale' }
  if (audience !== received.audience) return { ok: false, reason: 'wrong-audience' }

  const tenant: Tenant = { scope, agencyId, subAccountId, keyId }
  if (permissionsHeader !== undefined) tenant.permissions = permissionsHeader
  const presented = Buffer.from(signature, 'hex')
  const data = canonical({ method: received.method, pathWithQuery: received.pathWithQuery, audience, contentDigest: digest, nonce }, timestamp, tenant)
  let matched = false
  for (const secret of secrets) {
    // Check every secret rather than stopping at the first match, so timing does not tell which one signed.
    if (timingSafeEqual(mac(secret, data), presented)) matched = true
  }
  return matched ? { ok: true, tenant, nonce, contentDigest: digest, timestamp: signedAt } : { ok: false, reason: 'bad-signature' }
}

/** The backends' own audience names; a route of the gateway's map defaults to the one of its scope. */
export const AGENCY_SERVICE_AUDIENCE = 'agency-service'
export const RESOURCE_SERVICE_AUDIENCE = 'resource-service'
export function defaultAudience(scope: Scope): string {
  return scope === 'AGENCY' ? AGENCY_SERVICE_AUDIENCE : RESOURCE_SERVICE_AUDIENCE
}
