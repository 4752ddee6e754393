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

function add(headers: OutgoingHeaders, name: string, value: string): void {
  const existing = headers[name]
  if (existing === undefined) headers[name] = value
  else if (Array.isArray(existing)) existing.push(value)
  else headers[name] = [existing, value]
}

/**
 * The caller's headers that may go upstream (see the rules above). One pass
 * over the raw list, each name lower-cased once; the names a `Connection`
 * header lists are removed afterwards (they are rarely anything but
 * `keep-alive`, which is hop-by-hop anyway).
 */
export function callerHeaders(rawHeaders: readonly string[], keepCookies: boolean): OutgoingHeaders {
  const headers: OutgoingHeaders = {}
  let listed: string | undefined
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase()
    if (NEVER_FORWARDED.has(name)) {
      if (name === 'connection') listed = listed === undefined ? rawHeaders[i + 1]! : `${listed},${rawHeaders[i + 1]!}`
      continue
    }
    if (name.startsWith(TENANT_HEADER_PREFIX) || (!keepCookies && name === 'cookie')) continue
    add(headers, name, rawHeaders[i + 1]!)
  }
  if (listed !== undefined) {
    for (const option of listed.split(',')) {
      const name = option.trim().toLowerCase()
      if (headers[name] !== undefined) delete headers[name]
    }
  }
  return headers
}

/**
 * The headers of the caller's response: the backend's, except hop-by-hop
 * ones, those its `Connection` header lists and the two the gateway sets on
 * every response; then the gateway's own (`own`, the reply's headers) over them.
 */
export function returnedHeaders(upstream: Record<string, string | string[] | undefined>, own: OutgoingHeaders = {}): OutgoingHeaders {
  const connection = upstream['connection']
  const listed =
    typeof connection === 'string' && connection !== 'keep-alive' ? new Set(connection.split(',').map((name) => name.trim().toLowerCase())) : undefined
  const headers: OutgoingHeaders = {}
  for (const name in upstream) {
    const value = upstream[name]
    if (value === undefined || NEVER_RETURNED.has(name) || (listed !== undefined && listed.has(name))) continue
    headers[name] = value
  }
  for (const name in own) headers[name] = own[name]!
  return headers
}
