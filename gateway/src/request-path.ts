/**
 * The one canonical form of a request target. The gateway decides on this
 * path, authorizes this path, signs this path and forwards exactly this path,
 * so the gateway and a backend can never route the same request differently
 * (the lesson of Envoy CVE-2019-9901, Istio CVE-2021-31920, Shiro
 * CVE-2020-1957 and the 2026 middie/express advisories).
 *
 * Path rules (anything refused answers 400 "Malformed request path"):
 * - origin form only: the target starts with `/` (no `*`, no `http://host/…`);
 * - allowed as they are: letters, digits and `- . _ ~ ! $ & ' ( ) * + , = : @ /`;
 * - refused: `;` (matrix parameters), `\`, any other ASCII punctuation, space,
 *   control characters, NUL and non-ASCII bytes;
 * - refused: `.` and `..` segments, and any segment that starts or ends with
 *   `..`; repeated slashes (`//`);
 * - percent-encoding must be `%` and two hex digits, and must not encode `/`
 *   (%2F), `\` (%5C), `.` (%2E), `%` (%25, double encoding), a control
 *   character (%00-%1F, %7F), or bytes that are not valid UTF-8;
 * - an encoded unreserved character (letter, digit, `-`, `_`, `~`) is decoded
 *   (`/v1/%61gents` is `/v1/agents`, RFC 3986 §6.2.2.2); every other escape is
 *   kept, with its hex digits in upper case (`%c3%a9` becomes `%C3%A9`);
 * - case is kept: `/V1/Agents` is not `/v1/agents` (and matches no route);
 * - a trailing slash is kept: `/v1/agents/` is under `/v1/agents`.
 * Query rules: the query is kept byte for byte (tenant stripping aside); it may
 * hold printable ASCII except `#`, and every `%` must start a two-hex escape.
 *
 * With these rules the WHATWG URL parser leaves the path unchanged (so a
 * backend or a proxy that parses it sees the path the gateway authorized),
 * and a `..` guard in it never fires.
 */

export interface RequestTarget {
  /** The canonical path: what is matched, authorized, signed and forwarded. */
  readonly path: string
  /** The raw query without its `?`; '' when there is none. */
  readonly query: string
}

const SLASH = 0x2f
const PERCENT = 0x25
const DOT = 0x2e
const HASH = 0x23

/** Characters allowed as they are in a path, besides `/` and `%`. */
const PATH_CHARS = new Uint8Array(128)
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,=:@") PATH_CHARS[c.charCodeAt(0)] = 1

/** Unreserved characters except `.`: decoded when they arrive percent-encoded. */
function isDecodedUnreserved(byte: number): boolean {
  return (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x30 && byte <= 0x39) || byte === 0x2d || byte === 0x5f || byte === 0x7e
}

function hexValue(code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30
  if (code >= 0x41 && code <= 0x46) return code - 0x37
  if (code >= 0x61 && code <= 0x66) return code - 0x57
  return -1
}

/** The byte of the escape at `i` (which holds `%`), or -1 when it is not `%` and two hex digits. */
function escapedByte(raw: string, i: number): number {
  if (raw.charCodeAt(i) !== PERCENT || raw.length - i < 3) return -1
  const high = hexValue(raw.charCodeAt(i + 1))
  const low = hexValue(raw.charCodeAt(i + 2))
  return high < 0 || low < 0 ? -1 : high * 16 + low
}

const HEX = '0123456789ABCDEF'
function escape(byte: number): string {
  return '%' + HEX[byte >> 4]! + HEX[byte & 15]!
}

/** How many continuation bytes a UTF-8 lead byte takes, and the allowed range of the first one. */
function utf8Sequence(lead: number): [count: number, low: number, high: number] | undefined {
  if (lead >= 0xc2 && lead <= 0xdf) return [1, 0x80, 0xbf]
  if (lead === 0xe0) return [2, 0xa0, 0xbf]
  if (lead === 0xed) return [2, 0x80, 0x9f]
  if (lead >= 0xe1 && lead <= 0xef) return [2, 0x80, 0xbf]
  if (lead === 0xf0) return [3, 0x90, 0xbf]
  if (lead >= 0xf1 && lead <= 0xf3) return [3, 0x80, 0xbf]
  if (lead === 0xf4) return [3, 0x80, 0x8f]
  return undefined
}

/**
 * Checks and canonicalizes the escape run starting at `i`; answers the
 * canonical text and how many characters of `raw` it consumed, or undefined.
 */
function canonicalEscape(raw: string, i: number): [text: string, consumed: number] | undefined {
  const byte = escapedByte(raw, i)
  if (byte < 0) return undefined
  if (byte < 0x80) {
    if (byte < 0x20 || byte === 0x7f || byte === SLASH || byte === 0x5c || byte === DOT || byte === PERCENT) return undefined
    return [isDecodedUnreserved(byte) ? String.fromCharCode(byte) : escape(byte), 3]
  }
  const sequence = utf8Sequence(byte)
  if (sequence === undefined) return undefined
  const [count, low, high] = sequence
  let text = escape(byte)
  for (let n = 1; n <= count; n++) {
    const next = escapedByte(raw, i + 3 * n)
    if (next < 0x80 || next > 0xbf || (n === 1 && (next < low || next > high))) return undefined
    text += escape(next)
  }
  return [text, 3 * (count + 1)]
}

/** A segment the gateway refuses: `.`, `..`, or one that starts or ends with `..`. */
function isDotSegment(path: string, start: number, end: number): boolean {
  if (end - start === 1) return path.charCodeAt(start) === DOT
  if (end - start < 2) return false
  return (path.charCodeAt(start) === DOT && path.charCodeAt(start + 1) === DOT) || (path.charCodeAt(end - 1) === DOT && path.charCodeAt(end - 2) === DOT)
}

/** The canonical form of a raw path, or undefined when the path is refused. */
export function normalizePath(raw: string): string | undefined {
  if (raw.charCodeAt(0) !== SLASH) return undefined
  // Built only when an escape changes the text; most paths are returned as they came.
  let out: string | undefined
  let copiedUpTo = 0
  let previous = -1
  for (let i = 0; i < raw.length;) {
    const c = raw.charCodeAt(i)
    if (c === SLASH) {
      if (previous === SLASH) return undefined
    } else if (c === PERCENT) {
      const escaped = canonicalEscape(raw, i)
      if (escaped === undefined) return undefined
      const [text, consumed] = escaped
      if (text !== raw.slice(i, i + consumed)) {
        out = (out ?? '') + raw.slice(copiedUpTo, i) + text
        copiedUpTo = i + consumed
      }
      previous = -1
      i += consumed
      continue
    } else if (c >= 128 || PATH_CHARS[c] !== 1) {
      return undefined
    }
    previous = c
    i++
  }
  const path = out === undefined ? raw : out + raw.slice(copiedUpTo)
  let start = 1
  for (let i = 1; i <= path.length; i++) {
    if (i === path.length || path.charCodeAt(i) === SLASH) {
      if (isDotSegment(path, start, i)) return undefined
      start = i + 1
    }
  }
  return path
}

/** A query is kept byte for byte: printable ASCII except `#`, with well-formed escapes. */
export function isAcceptableQuery(query: string): boolean {
  for (let i = 0; i < query.length; i++) {
    const c = query.charCodeAt(i)
    if (c < 0x21 || c > 0x7e || c === HASH) return false
    if (c === PERCENT && escapedByte(query, i) < 0) return false
  }
  return true
}

/** Splits and checks a raw request target (`req.url`); undefined means 400. */
export function normalizeRequestTarget(rawUrl: string): RequestTarget | undefined {
  const q = rawUrl.indexOf('?')
  const path = normalizePath(q === -1 ? rawUrl : rawUrl.slice(0, q))
  if (path === undefined) return undefined
  const query = q === -1 ? '' : rawUrl.slice(q + 1)
  if (query !== '' && !isAcceptableQuery(query)) return undefined
  return { path, query }
}

/** What is signed and forwarded: the canonical path and the (stripped) query. */
export function pathWithQuery(path: string, query: string): string {
  return query === '' ? path : `${path}?${query}`
}
