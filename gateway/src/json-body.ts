/**
 * JSON bodies on API routes: the gateway reads them to remove tenant fields
 * (tenant-stripping.ts), and forwards the re-serialized result. Before
 * parsing, a linear scan bounds the nesting depth, so a body of a million
 * brackets costs one pass and a 400, never a deep recursion or a 500. Other
 * bodies, and every body on console routes, are forwarded byte for byte.
 */
import { stripTenantFields } from './tenant-stripping.js'

/** Deeper JSON is refused; no API body of this service comes near it. */
export const MAX_JSON_DEPTH = 32

/** `application/json`, and any `application/*+json` (merge-patch, problem, …). */
export function isJsonContentType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false
  const semicolon = contentType.indexOf(';')
  const type = (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase()
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_BRACE = 0x7b
const OPEN_BRACKET = 0x5b
const CLOSE_BRACE = 0x7d
const CLOSE_BRACKET = 0x5d

/** Whether arrays and objects nest deeper than `max` anywhere in the text (strings are skipped). */
export function nestsDeeperThan(body: Buffer, max: number): boolean {
  let depth = 0
  let inString = false
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!
    if (inString) {
      if (c === BACKSLASH) i++
      else if (c === QUOTE) inString = false
    } else if (c === QUOTE) {
      inString = true
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) return true
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--
    }
  }
  return false
}

export type PreparedBody = { ok: true; body: Buffer } | { ok: false; outcome: 'too-deep' | 'bad-json' }

/** The body to forward for a JSON request on an API route: tenant fields gone, re-serialized. */
export function prepareJsonBody(body: Buffer): PreparedBody {
  if (nestsDeeperThan(body, MAX_JSON_DEPTH)) return { ok: false, outcome: 'too-deep' }
  let value: unknown
  try {
    value = JSON.parse(body.toString('utf8'))
  } catch {
    return { ok: false, outcome: 'bad-json' }
  }
  stripTenantFields(value)
  return { ok: true, body: Buffer.from(JSON.stringify(value)) }
}
