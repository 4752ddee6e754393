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

/**
 * Headers as a flat list, `[name, value, name, value, …]`, the shape of
 * Node's `rawHeaders`: undici takes it for the request and Node's
 * `writeHead` for the response, a repeated header is simply repeated, and
 * no object is built (and reshaped key by key) per request.
 */
export type HeaderList = string[]

/** Values as Fastify's reply holds them (numbers for some, lists for repeated ones). */
type HeaderValue = string | number | readonly string[] | undefined

function push(list: HeaderList, name: string, value: HeaderValue): void {
  if (value === undefined) return
  if (typeof value === 'object') for (const one of value) list.push(name, one)
  else list.push(name, typeof value === 'string' ? value : String(value))
}

/**
 * The caller's headers that may go upstream (see the rules above). One pass
 * over the raw list, each name lower-cased once; the names a `Connection`
 * header lists are removed afterwards (they are rarely anything but
 * `keep-alive`, which is hop-by-hop anyway).
 */
export function callerHeaders(rawHeaders: readonly string[], keepCookies: boolean): HeaderList {
  const headers: HeaderList = []
  let listed: string | undefined
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase()
    if (NEVER_FORWARDED.has(name)) {
      if (name === 'connection') listed = listed === undefined ? rawHeaders[i + 1]! : `${listed},${rawHeaders[i + 1]!}`
      continue
    }
    if (name.startsWith(TENANT_HEADER_PREFIX) || (!keepCookies && name === 'cookie')) continue
    headers.push(name, rawHeaders[i + 1]!)
  }
  if (listed === undefined) return headers
  const named = new Set(listed.split(',').map((option) => option.trim().toLowerCase()))
  const kept: HeaderList = []
  for (let i = 0; i < headers.length; i += 2) if (!named.has(headers[i]!)) kept.push(headers[i]!, headers[i + 1]!)
  return kept
}

/** Whether a header list (of a few entries) names `name`. */
function names(list: HeaderList, name: string): boolean {
  for (let i = 0; i < list.length; i += 2) if (list[i] === name) return true
  return false
}

/**
 * The headers of the caller's response: the backend's, except hop-by-hop
 * ones, those its `Connection` header lists, the two the gateway sets on
 * every response and any the gateway sets itself; then the gateway's own
 * (`own`, lower-case names).
 */
export function returnedHeaders(upstream: Record<string, HeaderValue>, own: HeaderList = []): HeaderList {
  const connection = upstream['connection']
  const listed =
    typeof connection === 'string' && connection !== 'keep-alive' ? new Set(connection.split(',').map((name) => name.trim().toLowerCase())) : undefined
  const headers: HeaderList = []
  for (const name in upstream) {
    if (NEVER_RETURNED.has(name) || (listed !== undefined && listed.has(name)) || names(own, name)) continue
    push(headers, name, upstream[name])
  }
  for (let i = 0; i < own.length; i++) headers.push(own[i]!)
  return headers
}
