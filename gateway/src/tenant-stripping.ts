/**
 * Callers never name a tenant (spec §5.4): the key does. Whatever a caller
 * sends that could be read as one is removed before forwarding: `x-tenant-*`
 * headers, and `agency_id` / `sub_account_id` (in any case) in the query
 * string and in the top-level fields of a JSON body. The credentials the
 * gateway consumed (`authorization`, `x-api-key`) are never forwarded either.
 */
import type { IncomingHttpHeaders } from 'node:http'
import { TENANT_HEADER_PREFIX } from '@scoped/shared/tenant-signature'

const TENANT_FIELDS = ['agency_id', 'sub_account_id']

/** `agency_id`, `Agency_ID`, and the `agency_id[]` / `agency_id[x]` forms some query parsers fold into it. */
export function isTenantField(name: string): boolean {
  const bracket = name.indexOf('[')
  const base = (bracket === -1 ? name : name.slice(0, bracket)).toLowerCase()
  return base === TENANT_FIELDS[0] || base === TENANT_FIELDS[1]
}

function decodeQueryName(name: string): string {
  if (!name.includes('%') && !name.includes('+')) return name
  try {
    return decodeURIComponent(name.replaceAll('+', ' '))
  } catch {
    // Query parsers keep a name they cannot decode as it is; so do we.
    return name
  }
}

/**
 * Removes tenant parameters from a raw query (no leading `?`), comparing
 * decoded names as a query parser would; every other parameter is kept byte
 * for byte, in order.
 */
export function stripTenantQuery(query: string): string {
  if (query === '') return query
  const lower = query.toLowerCase()
  if (!query.includes('%') && !lower.includes('agency_id') && !lower.includes('sub_account_id')) return query
  const kept: string[] = []
  let removed = false
  for (const parameter of query.split('&')) {
    const equals = parameter.indexOf('=')
    const name = equals === -1 ? parameter : parameter.slice(0, equals)
    if (isTenantField(decodeQueryName(name))) removed = true
    else kept.push(parameter)
  }
  return removed ? kept.join('&') : query
}

/** Removes tenant fields from the top level of a parsed JSON body, in place. */
export function stripTenantFields(body: unknown): void {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return
  const fields = body as Record<string, unknown>
  for (const name of Object.keys(fields)) {
    if (isTenantField(name)) delete fields[name]
  }
}

/**
 * Cleans a copy of the caller's headers for the upstream, in place: no
 * `x-tenant-*` header, no credential; cookies only where the backend runs its
 * own sessions (the console). Values are set to undefined rather than deleted
 * (undici skips them), which keeps the object's shape.
 */
export function stripCallerHeaders(headers: IncomingHttpHeaders, keepCookies: boolean): void {
  for (const name in headers) {
    if (name.startsWith(TENANT_HEADER_PREFIX)) headers[name] = undefined
  }
  // Only headers that are there: adding absent ones as undefined would only make more for undici to skip.
  if (headers.authorization !== undefined) headers.authorization = undefined
  if (headers['x-api-key'] !== undefined) headers['x-api-key'] = undefined
  if (!keepCookies && headers.cookie !== undefined) headers.cookie = undefined
}
