/**
 * Which webhook targets may be connected to. Outbound requests go to
 * addresses a customer chooses, so only public unicast addresses are allowed:
 * no loopback, private, link-local (the cloud metadata address among them),
 * multicast, CGNAT, reserved or documentation ranges, no IPv6 unique-local,
 * and no IPv6 form that embeds an IPv4 address (IPv4-mapped, NAT64, 6to4,
 * Teredo), whatever the IPv4 address inside. ipaddr.js names every special
 * range; anything but `unicast` is refused.
 */
import ipaddr from 'ipaddr.js'

/** True when the address (IPv4 or IPv6 text) is a public unicast address. */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address) || address.includes('%')) return false
  return ipaddr.parse(address).range() === 'unicast'
}

export interface TargetPolicy {
  /** WEBHOOK_ALLOW_PRIVATE_ADDRESSES=1: http:// and any address (development and tests). */
  allowPrivateAddresses: boolean
}

export const MAX_URL_LENGTH = 2000

/**
 * Why an endpoint URL cannot be registered, or undefined when it can. The
 * addresses a host name resolves to are checked again on every connection
 * (outbound.ts); here only what the URL itself says: its scheme, no
 * credentials, and a literal address or `localhost` that is not public.
 */
export function urlProblem(raw: string, policy: TargetPolicy): string | undefined {
  if (raw.length > MAX_URL_LENGTH) return `must be at most ${MAX_URL_LENGTH} characters`
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return 'must be an absolute URL'
  }
  const schemes = policy.allowPrivateAddresses ? ['https:', 'http:'] : ['https:']
  if (!schemes.includes(url.protocol)) return policy.allowPrivateAddresses ? 'must be an https:// or http:// URL' : 'must be an https:// URL'
  if (url.username !== '' || url.password !== '') return 'must not contain a user name or password'
  if (url.hash !== '') return 'must not contain a fragment'
  if (policy.allowPrivateAddresses) return undefined
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
  if (ipaddr.isValid(host) && !isPublicAddress(host)) return 'must not point to a loopback, private, link-local or otherwise non-public address'
  if (!ipaddr.isValid(host) && (host === 'localhost' || host.endsWith('.localhost') || !host.includes('.'))) {
    return 'must name a public host'
  }
  return undefined
}
