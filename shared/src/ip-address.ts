/**
 * IP addresses and CIDR blocks, in one spelling each: what a key's allowlist
 * holds (checked by the gateway against the client address it derived) and
 * what the audit trail records.
 *
 * - An address: IPv4 in dotted decimal; IPv6 in its canonical (RFC 5952)
 *   form; an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`, as a dual-stack
 *   socket reports IPv4 peers) as IPv4. Zone ids (`fe80::1%eth0`) are refused.
 * - A CIDR block: `<address>/<prefix>` with the prefix always written
 *   (`10.1.2.3` is `10.1.2.3/32`), an IPv4-mapped network as IPv4
 *   (`::ffff:10.0.0.0/104` is `10.0.0.0/8`), and no bits set after the
 *   prefix: `10.1.2.3/8` is refused, naming `10.0.0.0/8`, rather than read
 *   one way or the other.
 * - An IPv4 client matches IPv4 blocks only, an IPv6 client IPv6 blocks only
 *   (`::/0` is every IPv6 address, not every address).
 */
import { isIP } from 'node:net'
import type { InputField } from './errors.js'
import { fieldLabel, fieldName, invalidField } from './errors.js'

export type AddressFamily = 'ipv4' | 'ipv6'

/** An address in its one spelling, or undefined when it is not an IP address. */
export function normalizeAddress(raw: string): string | undefined {
  const family = isIP(raw)
  if (family === 4) return raw // Node accepts only plain dotted decimal: no leading zeros, no hex.
  if (family !== 6 || raw.includes('%')) return undefined
  const canonical = new URL(`http://[${raw}]/`).hostname.slice(1, -1)
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(canonical)
  if (mapped === null) return canonical
  const high = parseInt(mapped[1] as string, 16)
  const low = parseInt(mapped[2] as string, 16)
  return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`
}

export function familyOf(address: string): AddressFamily {
  return address.includes(':') ? 'ipv6' : 'ipv4'
}

/** The address as a number (an IPv6 address must be canonical, as normalizeAddress writes it). */
function toBigInt(address: string, family: AddressFamily): bigint {
  if (family === 'ipv4') return address.split('.').reduce((value, octet) => (value << 8n) | BigInt(Number(octet)), 0n)
  const [head = '', tail] = address.split('::')
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right]
  return groups.reduce((value, group) => (value << 16n) | BigInt(parseInt(group, 16)), 0n)
}

function fromBigInt(value: bigint, family: AddressFamily): string {
  if (family === 'ipv4') return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 255n)).join('.')
  const groups: string[] = []
  for (let shift = 112n; shift >= 0n; shift -= 16n) groups.push(((value >> shift) & 0xffffn).toString(16))
  return normalizeAddress(groups.join(':'))!
}

/**
 * The part of a client address that names one client, for every per-client
 * budget: an IPv4 address as it is, an IPv6 address by its /64 (one host
 * picks any address of its /64 at will). Anything that is not an address is
 * its own group.
 */
export function clientGroup(raw: string): string {
  const address = normalizeAddress(raw)
  if (address === undefined) return raw
  if (familyOf(address) === 'ipv4') return address
  return `${fromBigInt((toBigInt(address, 'ipv6') >> 64n) << 64n, 'ipv6')}/64`
}

export interface Cidr {
  /** The network address, normalized. */
  address: string
  prefix: number
  family: AddressFamily
  /** `<address>/<prefix>`: the one spelling. */
  text: string
}

/** Why `raw` is not a CIDR block, or the block. */
export function parseCidr(raw: string): Cidr | { error: string } {
  const entry = raw.trim()
  const shown = JSON.stringify(entry)
  const slash = entry.indexOf('/')
  const addressText = slash === -1 ? entry : entry.slice(0, slash)
  const address = normalizeAddress(addressText)
  if (address === undefined) return { error: `${shown} is not an IP address or CIDR block` }
  const family = familyOf(address)
  const max = family === 'ipv4' ? 32 : 128
  // An IPv4-mapped network (::ffff:10.0.0.0/104) has become IPv4 above, so its prefix loses the 96 mapped bits.
  const offset = family === 'ipv4' && addressText.includes(':') ? 96 : 0
  let prefix = max
  if (slash !== -1) {
    const bits = entry.slice(slash + 1)
    prefix = Number(bits) - offset
    if (!/^(0|[1-9][0-9]{0,2})$/.test(bits) || prefix < 0 || prefix > max) return { error: `${shown} has a bad prefix length: it must be 0 to ${max + offset}` }
  }
  const value = toBigInt(address, family)
  const hostBits = BigInt(max - prefix)
  const network = (value >> hostBits) << hostBits
  if (network !== value) {
    return { error: `${shown} has bits set after its prefix length; the block is ${fromBigInt(network, family)}/${prefix}` }
  }
  return { address, prefix, family, text: `${address}/${prefix}` }
}

/** The most CIDR blocks one key's allowlist holds. */
export const MAX_ALLOWED_CIDRS = 32

/**
 * An allowlist given as input (a JSON body, CLI flags, a form): an array of
 * CIDR blocks (or plain addresses), at most MAX_ALLOWED_CIDRS, answered in
 * their one spelling without duplicates, in the order given. Anything else is
 * a 400 naming `field` and the entry at fault.
 */
export function requireCidrList(value: unknown, field: InputField): string[] {
  if (!Array.isArray(value)) throw invalidField(field, 'must be a list of CIDR blocks')
  if (value.length > MAX_ALLOWED_CIDRS) throw invalidField(field, `may hold at most ${MAX_ALLOWED_CIDRS} CIDR blocks`)
  const out: string[] = []
  value.forEach((entry: unknown, index) => {
    const at = { name: fieldName(field), label: `${fieldLabel(field)}[${index}]` }
    if (typeof entry !== 'string') throw invalidField(at, 'must be a string')
    const parsed = parseCidr(entry)
    if ('error' in parsed) throw invalidField(at, parsed.error)
    if (!out.includes(parsed.text)) out.push(parsed.text)
  })
  return out
}

/**
 * The 32-bit words of an address in its one spelling (one for IPv4, four for
 * IPv6), or undefined when it is not one.
 */
function addressWords(address: string, family: AddressFamily): number[] | undefined {
  if (family === 'ipv4') {
    const parts = address.split('.')
    if (parts.length !== 4) return undefined
    let value = 0
    for (const part of parts) {
      const octet = Number(part)
      if (part === '' || !Number.isInteger(octet) || octet < 0 || octet > 255) return undefined
      value = value * 256 + octet
    }
    return [value]
  }
  const [head = '', tail, extra] = address.split('::')
  if (extra !== undefined) return undefined
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  const missing = 8 - left.length - right.length
  if (tail === undefined ? missing !== 0 : missing < 1) return undefined
  const groups = [...left, ...Array<string>(tail === undefined ? 0 : missing).fill('0'), ...right]
  const words: number[] = []
  for (let i = 0; i < 8; i += 2) {
    const high = parseInt(groups[i]!, 16)
    const low = parseInt(groups[i + 1]!, 16)
    if (!/^[0-9a-f]{1,4}$/.test(groups[i]!) || !/^[0-9a-f]{1,4}$/.test(groups[i + 1]!)) return undefined
    words.push(high * 65_536 + low)
  }
  return words
}

interface CompiledBlock {
  family: AddressFamily
  /** The network's words, already masked. */
  network: number[]
  /** The mask of each word. */
  masks: number[]
}

function maskOf(prefix: number, word: number): number {
  const bits = Math.max(0, Math.min(32, prefix - 32 * word))
  return bits === 0 ? 0 : bits === 32 ? 0xffffffff : (0xffffffff << (32 - bits)) >>> 0
}

/**
 * A matcher over CIDR blocks, built once: each block compiled to masked
 * 32-bit words, so a check is a few integer comparisons (Node's
 * net.BlockList.check costs microseconds a call, too much for every request).
 * An entry that does not parse is left out, so a damaged list allows fewer
 * addresses, never more; a list whose entries all fail allows none. An IPv4
 * client matches IPv4 blocks only, an IPv6 client IPv6 blocks only.
 * Addresses are checked as normalizeAddress writes them; anything else
 * matches nothing.
 */
export function cidrMatcher(cidrs: readonly string[]): (address: string) => boolean {
  const blocks: CompiledBlock[] = []
  for (const text of cidrs) {
    const parsed = parseCidr(text)
    if ('error' in parsed) continue
    const words = addressWords(parsed.address, parsed.family)!
    const masks = words.map((_, index) => maskOf(parsed.prefix, index))
    blocks.push({ family: parsed.family, network: words.map((word, index) => (word & masks[index]!) >>> 0), masks })
  }
  return (address) => {
    const family = familyOf(address)
    const words = addressWords(address, family)
    if (words === undefined) return false
    return blocks.some((block) => block.family === family && block.network.every((network, index) => (words[index]! & block.masks[index]!) >>> 0 === network))
  }
}

/**
 * CIDR blocks read back from Postgres (type cidr), in this module's spelling:
 * Postgres writes some IPv6 blocks with a dotted tail (`::1.2.3.4/128`).
 */
export function canonicalCidrs(cidrs: readonly string[]): string[] {
  return cidrs.map((text) => {
    const parsed = parseCidr(text)
    return 'error' in parsed ? text : parsed.text
  })
}
