/**
 * The signed `x-tenant-*` headers: the gateway's word to the backends about
 * who is calling. The MAC covers the method, the path with query, the
 * timestamp and every tenant header, so none of them can be changed or
 * replayed onto another request; backends take the tenant from nothing else.
 * The clock is a parameter so tests can move it.
 */
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { Scope } from './scope.js'
import { isScope } from './scope.js'

export const TENANT_HEADER_PREFIX = 'x-tenant-'
export const tenantHeaders = {
  scope: 'x-tenant-scope',
  agencyId: 'x-tenant-agency-id',
  subAccountId: 'x-tenant-sub-account-id',
  keyId: 'x-tenant-key-id',
  timestamp: 'x-tenant-timestamp',
  signature: 'x-tenant-signature',
} as const

/** Who the request acts for, as established by the gateway from the API key. */
export interface Tenant {
  scope: Scope
  agencyId: string
  /** Present exactly when scope is SUB-ACCOUNT. */
  subAccountId: string | null
  keyId: string
}

/** Seconds either way a signed request stays acceptable (clock skew and transit). */
export const DEFAULT_REPLAY_WINDOW_SECONDS = 30

function canonical(method: string, pathWithQuery: string, timestamp: string, tenant: Tenant): string {
  return [
    'v1',
    method.toUpperCase(),
    pathWithQuery,
    timestamp,
    tenant.scope,
    tenant.agencyId,
    tenant.subAccountId ?? '',
    tenant.keyId,
  ].join('\n')
}

function mac(secret: string, data: string): Buffer {
  return createHmac('sha256', secret).update(data).digest()
}

/** The headers to set on a forwarded request. */
export function signTenantHeaders(
  secret: string,
  method: string,
  pathWithQuery: string,
  tenant: Tenant,
  nowSeconds: number,
): Record<string, string> {
  const timestamp = String(Math.floor(nowSeconds))
  const headers: Record<string, string> = {
    [tenantHeaders.scope]: tenant.scope,
    [tenantHeaders.agencyId]: tenant.agencyId,
    [tenantHeaders.keyId]: tenant.keyId,
    [tenantHeaders.timestamp]: timestamp,
    [tenantHeaders.signature]: mac(secret, canonical(method, pathWithQuery, timestamp, tenant)).toString('hex'),
  }
  if (tenant.subAccountId !== null) headers[tenantHeaders.subAccountId] = tenant.subAccountId
  return headers
}

export type TenantVerification =
  | { ok: true; tenant: Tenant }
  | { ok: false; reason: 'missing' | 'malformed' | 'stale' | 'bad-signature' }

type HeaderBag = Record<string, string | string[] | undefined>

function single(headers: HeaderBag, name: string): string | undefined {
  const value = headers[name]
  return typeof value === 'string' ? value : undefined
}

const SIGNATURE_PATTERN = /^[0-9a-f]{64}$/
const TIMESTAMP_PATTERN = /^[0-9]{1,12}$/

/**
 * Checks a request's tenant headers against the current secret and, during a
 * rotation, the previous one. Every comparison of MACs is constant-time.
 */
export function verifyTenantHeaders(
  headers: HeaderBag,
  method: string,
  pathWithQuery: string,
  secrets: readonly string[],
  nowSeconds: number,
  windowSeconds = DEFAULT_REPLAY_WINDOW_SECONDS,
): TenantVerification {
  const signature = single(headers, tenantHeaders.signature)
  const timestamp = single(headers, tenantHeaders.timestamp)
  const scope = single(headers, tenantHeaders.scope)
  const agencyId = single(headers, tenantHeaders.agencyId)
  const keyId = single(headers, tenantHeaders.keyId)
  const subAccountHeader = headers[tenantHeaders.subAccountId]
  if (signature === undefined || timestamp === undefined || scope === undefined || agencyId === undefined || keyId === undefined) {
    return { ok: false, reason: 'missing' }
  }
  if (!SIGNATURE_PATTERN.test(signature) || !TIMESTAMP_PATTERN.test(timestamp) || !isScope(scope)) {
    return { ok: false, reason: 'malformed' }
  }
  if (Array.isArray(subAccountHeader)) return { ok: false, reason: 'malformed' }
  const subAccountId = subAccountHeader ?? null
  if ((scope === 'SUB-ACCOUNT') !== (subAccountId !== null)) return { ok: false, reason: 'malformed' }
  if (Math.abs(nowSeconds - Number(timestamp)) > windowSeconds) return { ok: false, reason: 'stale' }

  const tenant: Tenant = { scope, agencyId, subAccountId, keyId }
  const presented = Buffer.from(signature, 'hex')
  const data = canonical(method, pathWithQuery, timestamp, tenant)
  let matched = false
  for (const secret of secrets) {
    // Check every secret rather than stopping at the first match, so timing does not tell which one signed.
    if (timingSafeEqual(mac(secret, data), presented)) matched = true
  }
  return matched ? { ok: true, tenant } : { ok: false, reason: 'bad-signature' }
}
