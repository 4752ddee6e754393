/**
 * Finding the API key in a request (spec §5.2): exactly one of
 * `Authorization: Bearer <key>` (scheme in any case) or `x-api-key: <key>`.
 *
 * It reads the raw header list, not Node's parsed headers: Node keeps only
 * the first of two `Authorization` headers and joins repeated `x-api-key`
 * headers, so only the raw list shows that a header was repeated. Anything
 * other than one value of the shape of a key (both headers, a repeated
 * header, an empty value, another scheme, a value of another shape) is
 * refused here. The key's checksum is checked by the gate (gate.ts) once the
 * key is not found in memory, before any store is asked: a key verified in
 * memory is one the gateway has already seen whole, so the usual request
 * does not compute it again.
 */
import { hasKeyShape } from '@scoped/shared/keys'

export type KeyExtraction = { ok: true; key: string } | { ok: false; reason: 'missing' | 'malformed' }

const MISSING: KeyExtraction = Object.freeze({ ok: false, reason: 'missing' })
const MALFORMED: KeyExtraction = Object.freeze({ ok: false, reason: 'malformed' })

/** `Bearer`, one or more spaces, the credential; the scheme in any case (RFC 9110 §11.1). */
const BEARER = /^bearer +([^ ]*)$/i

function isHeader(name: string, wanted: string): boolean {
  return name.length === wanted.length && (name === wanted || name.toLowerCase() === wanted)
}

/** `rawHeaders` is Node's flat list: name, value, name, value, … */
export function extractApiKey(rawHeaders: readonly string[]): KeyExtraction {
  let found = 0
  let value = ''
  let bearer = false
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!
    if (isHeader(name, 'authorization')) {
      found++
      value = rawHeaders[i + 1] ?? ''
      bearer = true
    } else if (isHeader(name, 'x-api-key')) {
      found++
      value = rawHeaders[i + 1] ?? ''
      bearer = false
    }
  }
  if (found === 0) return MISSING
  if (found > 1) return MALFORMED
  let presented = value
  if (bearer) {
    const match = BEARER.exec(value)
    if (match === null) return MALFORMED
    presented = match[1]!
  }
  return hasKeyShape(presented) ? { ok: true, key: presented } : MALFORMED
}
