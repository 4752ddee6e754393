/**
 * Which headers cross the gateway, in each direction. Pure functions over
 * Node's raw header list, so a repeated header is seen as repeated.
 *
 * Upstream, the caller's headers go on except:
 * - hop-by-hop headers (RFC 9110 §7.6.1) and any the caller names in
 *   `Connection`; `Expect` too (the gateway has already read the whole body,
 *   and has answered `100 Continue` itself);
 * - its credentials (`authorization`, `x-api-key`, `proxy-authorization`),
 *   anything claiming a tenant (`x-tenant-*`), its `content-digest`, its
 *   `content-length` (the gateway sets the length of what it forwards), and
 *   what the gateway sets itself (`x-request-id`, `x-forwarded-*`, `forwarded`);
 * - cookies, except on console routes, where the backend runs its own sessions.
 * Downstream, the backend's headers go back except hop-by-hop ones and the
 * two the gateway sets on every response (`x-request-id`, HSTS).
 */
import { TENANT_HEADER_PREFIX } from '@scoped/shared/tenant-signature'

const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']
const NEVER_FORWARDED = new Set([
  ...HOP_BY_HOP,
  'expect',
  'host',
  'content-length',
  'content-digest',
  'authorization',
  'proxy-authorization',
  'x-api-key',
  'x-request-id',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'forwarded',
])
const NEVER_RETURNED = new Set([...HOP_BY_HOP, 'x-request-id', 'strict-transport-security'])

export type OutgoingHeaders = Record<string, string | string[]>

/** Names listed in `Connection` headers, lower-cased. */
function connectionOptions(rawHeaders: readonly string[]): Set<string> | undefined {
  let names: Set<string> | undefined
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() !== 'connection') continue
    for (const name of rawHeaders[i + 1]!.split(',')) {
      const trimmed = name.trim().toLowerCase()
      if (trimmed !== '') (names ??= new Set()).add(trimmed)
    }
  }
  return names
}

function add(headers: OutgoingHeaders, name: string, value: string): void {
  const existing = headers[name]
  if (existing === undefined) headers[name] = value
  else if (Array.isArray(existing)) existing.push(value)
  else headers[name] = [existing, value]
}

/** The caller's headers that may go upstream (see the rules above). */
export function callerHeaders(rawHeaders: readonly string[], keepCookies: boolean): OutgoingHeaders {
  const listed = connectionOptions(rawHeaders)
  const headers: OutgoingHeaders = {}
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase()
    if (NEVER_FORWARDED.has(name) || name.startsWith(TENANT_HEADER_PREFIX)) continue
    if (!keepCookies && name === 'cookie') continue
    if (listed !== undefined && listed.has(name)) continue
    add(headers, name, rawHeaders[i + 1]!)
  }
  return headers
}

/** The backend's response headers that go back to the caller. */
export function returnedHeaders(upstream: Record<string, string | string[] | undefined>): OutgoingHeaders {
  const listed = typeof upstream['connection'] === 'string' ? new Set(upstream['connection'].split(',').map((name) => name.trim().toLowerCase())) : undefined
  const headers: OutgoingHeaders = {}
  for (const name in upstream) {
    const value = upstream[name]
    if (value === undefined || NEVER_RETURNED.has(name) || (listed !== undefined && listed.has(name))) continue
    headers[name] = value
  }
  return headers
}
