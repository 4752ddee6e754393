/**
 * The client's address, for throttling, allowlists and logs. Behind a load
 * balancer the TCP peer is the balancer, and the client is named in
 * X-Forwarded-For; but anyone can send that header, so it is believed only
 * from the proxies the operator lists in GATEWAY_TRUSTED_PROXIES, and only as
 * far as those proxies vouch for it:
 *
 * - a peer that is not a trusted proxy is the client; its X-Forwarded-For is
 *   ignored (a spoofed header changes nothing);
 * - from a trusted peer, X-Forwarded-For is read from the right (each proxy
 *   appends the address it saw), skipping trusted proxies; the first address
 *   that is not one is the client. When every entry is trusted, the leftmost.
 * - a malformed entry stops the walk: the answer is the last good address
 *   before it (a trusted proxy), never text from the header. At most
 *   MAX_ENTRIES entries of at most MAX_ENTRY_LENGTH characters each are
 *   looked at, however long the header is.
 *
 * Entries may carry a port (`1.2.3.4:80`, `[2001:db8::1]:443`) or brackets, as
 * some proxies write them; the port is dropped. Zone ids (`fe80::1%eth0`) are
 * malformed. Every answer is one valid IP address in one spelling: IPv6 in
 * its canonical (RFC 5952) form, and an IPv4-mapped IPv6 address
 * (`::ffff:1.2.3.4`, as a dual-stack socket reports IPv4 peers) as IPv4. A
 * peer that is not an IP address at all (a socket already closed) is
 * `0.0.0.0`.
 */
import { BlockList, isIP } from 'node:net'
import { ConfigError } from '@scoped/shared/config'
import { familyOf, normalizeAddress } from '@scoped/shared/ip-address'

export { normalizeAddress }

const VARIABLE = 'GATEWAY_TRUSTED_PROXIES'
/** How many X-Forwarded-For entries are looked at, from the right. */
export const MAX_ENTRIES = 32
/** Longer than `[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535` plus some spaces: malformed. */
const MAX_ENTRY_LENGTH = 64
export const UNKNOWN_ADDRESS = '0.0.0.0'

export interface TrustedProxies {
  /** True when the (normalized) address is one of the operator's trusted proxies. */
  has(address: string): boolean
  /** How the rules read, for the start-up log. */
  readonly rules: readonly string[]
}

/** Parses GATEWAY_TRUSTED_PROXIES: comma-separated addresses and CIDRs; unset or blank trusts no one. */
export function parseTrustedProxies(value: string | undefined): TrustedProxies {
  const list = new BlockList()
  let empty = true
  if (value !== undefined && value.trim() !== '') {
    for (const raw of value.split(',')) {
      const entry = raw.trim()
      if (entry === '') throw new ConfigError(VARIABLE, 'has an empty entry (two commas in a row, or one at an end)')
      const shown = JSON.stringify(entry)
      const slash = entry.indexOf('/')
      const address = normalizeAddress(slash === -1 ? entry : entry.slice(0, slash))
      if (address === undefined) throw new ConfigError(VARIABLE, `${shown} is not an IP address or CIDR`)
      const family = familyOf(address)
      if (slash === -1) {
        list.addAddress(address, family)
      } else {
        const bits = entry.slice(slash + 1)
        const max = family === 'ipv4' ? 32 : 128
        // An IPv4-mapped network (::ffff:10.0.0.0/104) has become IPv4 above, so its prefix loses the 96 mapped bits.
        const offset = family === 'ipv4' && entry.slice(0, slash).includes(':') ? 96 : 0
        const prefix = Number(bits) - offset
        if (!/^(0|[1-9][0-9]{0,2})$/.test(bits) || prefix < 0 || prefix > max) {
          throw new ConfigError(VARIABLE, `${shown} has a bad prefix length: must be 0 to ${max + offset}`)
        }
        list.addSubnet(address, prefix, family)
      }
      empty = false
    }
  }
  return {
    has: (address) => !empty && list.check(address, familyOf(address)),
    rules: list.rules,
  }
}

/** One X-Forwarded-For entry, ports and brackets removed, normalized; undefined when malformed. */
function parseEntry(raw: string): string | undefined {
  const entry = raw.trim()
  if (entry.startsWith('[')) {
    // [v6] or [v6]:port
    const close = entry.indexOf(']')
    if (close === -1) return undefined
    const rest = entry.slice(close + 1)
    if (rest !== '' && !isPort(rest)) return undefined
    const inner = entry.slice(1, close)
    return isIP(inner) === 6 ? normalizeAddress(inner) : undefined
  }
  const colon = entry.indexOf(':')
  if (colon !== -1 && colon === entry.lastIndexOf(':')) {
    // One colon: IPv4 with a port (an IPv6 address has at least two).
    return isPort(entry.slice(colon)) && isIP(entry.slice(0, colon)) === 4 ? entry.slice(0, colon) : undefined
  }
  return normalizeAddress(entry)
}

function isPort(text: string): boolean {
  return /^:[0-9]{1,5}$/.test(text) && Number(text.slice(1)) <= 65535
}

/**
 * The entries of X-Forwarded-For from the right (repeated headers are read as
 * one, joined in order), at most MAX_ENTRIES, each cut at MAX_ENTRY_LENGTH + 1
 * characters so that an over-long one is seen as malformed without reading
 * it all.
 */
function* entriesFromRight(forwardedFor: string | string[]): Generator<string> {
  const headers = typeof forwardedFor === 'string' ? [forwardedFor] : forwardedFor
  let seen = 0
  for (let h = headers.length - 1; h >= 0; h--) {
    const header = headers[h] as string
    let end = header.length
    while (true) {
      let start = end
      while (start > 0 && end - start <= MAX_ENTRY_LENGTH && header.charCodeAt(start - 1) !== 44 /* , */) start--
      if (end - start > MAX_ENTRY_LENGTH) {
        yield header.slice(start, end) // too long: malformed, and the walk stops there
        return
      }
      yield header.slice(start, end)
      if (++seen === MAX_ENTRIES) return
      if (start === 0) break
      end = start - 1
    }
  }
}

/** The client's address: see the header comment. */
export function clientAddress(peer: string, forwardedFor: string | string[] | undefined, trusted: TrustedProxies): string {
  let current = normalizeAddress(peer)
  if (current === undefined) return UNKNOWN_ADDRESS
  if (forwardedFor === undefined || !trusted.has(current)) return current
  for (const raw of entriesFromRight(forwardedFor)) {
    const address = raw.length > MAX_ENTRY_LENGTH ? undefined : parseEntry(raw)
    if (address === undefined) return current
    current = address
    if (!trusted.has(address)) return address
  }
  return current
}

/**
 * Each request's client address, as the gate derives it: the TCP peer,
 * normalized once per connection rather than per request, and
 * X-Forwarded-For read only when that peer is a trusted proxy.
 */
export class ClientAddresses {
  private readonly peers = new WeakMap<object, string>()

  constructor(private readonly trusted: TrustedProxies) {}

  of(socket: { readonly remoteAddress?: string | undefined }, forwardedFor: string | string[] | undefined): string {
    let peer = this.peers.get(socket)
    if (peer === undefined) {
      peer = clientAddress(socket.remoteAddress ?? '', undefined, this.trusted)
      this.peers.set(socket, peer)
    }
    return forwardedFor === undefined || !this.trusted.has(peer) ? peer : clientAddress(socket.remoteAddress ?? '', forwardedFor, this.trusted)
  }
}
