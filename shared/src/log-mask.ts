/**
 * Masking of caller-sent text (paths, query strings, header values) before it
 * goes into a log line: an API key must never reach the logs, however it was
 * spelled, and a hostile caller must not be able to make masking slow.
 *
 * A key is `sak_live_` and 49 base62 characters, but masking does not insist
 * on that shape: any run of letters, digits, `_`, `%` and `\` that contains
 * `_live_` in any case, once escapes are decoded (`sak%5Flive%5F…`,
 * `sak_%6Cive_…`, `sak\x5flive\u005f…`, up to MAX_DECODE_PASSES levels of
 * `%25` double encoding), is replaced whole by `sak_live_[redacted]`. A half
 * key, a key with a typo or a key of some future `*_live_*` format is masked
 * too.
 *
 * Cost: the text is cut to maxLength first; then one left-to-right scan over
 * character codes (no regular expression, so no backtracking) finds the runs
 * and matches `_live_` as it goes; only a run holding an escape is decoded,
 * at most MAX_DECODE_PASSES times, each pass linear. A 1 MB hostile input
 * takes milliseconds. Since cutting comes first, the output can be a little
 * longer than maxLength (a masked run can grow by 13 characters) plus `…`.
 */

export const REDACTED_KEY = 'sak_live_[redacted]'
export const REDACTED = '[redacted]'
const MAX_DECODE_PASSES = 3
const PERCENT = 37
const BACKSLASH = 92
const UNDERSCORE = 95
/** `_live_`, lower case, as character codes. */
const MARKER = [95, 108, 105, 118, 101, 95]

/** Letters, digits, `_`, `%` and `\`: the characters of a run. */
function isRunCode(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === UNDERSCORE || c === PERCENT || c === BACKSLASH
}

function lower(c: number): number {
  return c >= 65 && c <= 90 ? c + 32 : c
}

function hexValue(c: number | undefined): number {
  if (c === undefined) return -1
  if (c >= 48 && c <= 57) return c - 48
  const l = lower(c)
  return l >= 97 && l <= 102 ? l - 87 : -1
}

/** Matching `_live_` one character at a time: the next state from the number of marker characters matched so far. */
function step(matched: number, c: number): number {
  const l = lower(c)
  if (l === MARKER[matched]) return matched + 1
  return l === UNDERSCORE ? 1 : 0
}

/** The hex number of `count` digits at buf[at], or -1. */
function hexAt(buf: Uint16Array, at: number, count: number, length: number): number {
  if (at + count > length) return -1
  let value = 0
  for (let i = 0; i < count; i++) {
    const digit = hexValue(buf[at + i])
    if (digit < 0) return -1
    value = value * 16 + digit
  }
  return value
}

/** One pass of decoding %XX, \xXX and \uXXXX in place; anything else is kept. Answers the new length. */
function decodeInPlace(buf: Uint16Array, length: number): number {
  let write = 0
  for (let read = 0; read < length;) {
    const c = buf[read] as number
    let value = -1
    let width = 1
    if (c === PERCENT) {
      value = hexAt(buf, read + 1, 2, length)
      width = 3
    } else if (c === BACKSLASH && buf[read + 1] === 120 /* x */) {
      value = hexAt(buf, read + 2, 2, length)
      width = 4
    } else if (c === BACKSLASH && buf[read + 1] === 117 /* u */) {
      value = hexAt(buf, read + 2, 4, length)
      width = 6
    }
    if (value < 0) {
      buf[write++] = c
      read++
    } else {
      buf[write++] = value
      read += width
    }
  }
  return write
}

function hasMarker(buf: Uint16Array, length: number): boolean {
  let matched = 0
  for (let i = 0; i < length; i++) {
    matched = step(matched, buf[i] as number)
    if (matched === MARKER.length) return true
  }
  return false
}

let scratch = new Uint16Array(256)
const MAX_SCRATCH = 4096

/** Characters start..end of text as codes, in the shared scratch buffer when they fit (decoding only shrinks). */
function codes(text: string, start: number, end: number): Uint16Array {
  const length = end - start
  if (length > scratch.length) {
    if (length > MAX_SCRATCH) return codesInto(new Uint16Array(length), text, start, end)
    scratch = new Uint16Array(MAX_SCRATCH)
  }
  return codesInto(scratch, text, start, end)
}

function codesInto(buf: Uint16Array, text: string, start: number, end: number): Uint16Array {
  for (let i = start; i < end; i++) buf[i - start] = text.charCodeAt(i)
  return buf
}

/** Whether text[start..end), a run holding an escape, spells `_live_` after up to MAX_DECODE_PASSES rounds of decoding. */
function decodedHasMarker(text: string, start: number, end: number): boolean {
  const buf = codes(text, start, end)
  let length = end - start
  for (let pass = 0; pass < MAX_DECODE_PASSES; pass++) {
    const decoded = decodeInPlace(buf, length)
    if (decoded === length) return false // nothing left to decode
    length = decoded
    if (hasMarker(buf, length)) return true
  }
  return false
}

/** Replaces every key-shaped run; no cutting. */
function maskKeys(text: string): string {
  let out = ''
  let copied = 0
  const n = text.length
  for (let i = 0; i < n;) {
    if (!isRunCode(text.charCodeAt(i))) {
      i++
      continue
    }
    const start = i
    let matched = 0
    let escaped = false
    for (; i < n; i++) {
      const c = text.charCodeAt(i)
      if (!isRunCode(c)) break
      if (c === PERCENT || c === BACKSLASH) escaped = true
      if (matched < MARKER.length) matched = step(matched, c)
    }
    if (matched === MARKER.length || (escaped && i - start >= MARKER.length && decodedHasMarker(text, start, i))) {
      out += text.slice(copied, start) + REDACTED_KEY
      copied = i
    }
  }
  return copied === 0 ? text : out + text.slice(copied)
}

/** The first maxLength UTF-16 units, never ending between the two halves of a surrogate pair; undefined when nothing is cut. */
function cut(text: string, maxLength: number): string | undefined {
  if (text.length <= maxLength) return undefined
  let end = Math.max(0, Math.floor(maxLength))
  const last = text.charCodeAt(end - 1)
  if (end > 0 && last >= 0xd800 && last <= 0xdbff) end--
  return text.slice(0, end)
}

/** Text for a log line: cut to maxLength (then `…`), and anything shaped like an API key masked. */
export function maskForLog(text: string, maxLength = 256): string {
  const kept = cut(text, maxLength)
  return kept === undefined ? maskKeys(text) : `${maskKeys(kept)}…`
}

/**
 * Parameter names whose values are credentials, compared after decoding
 * escapes and `+`, lower-casing, and removing `_`, `-`, spaces and a trailing
 * `[]`: `api_key`, `API-KEY`, `apiKey`, `x-api-key`, `access_token`,
 * `token[]`, `api%5Fkey`, …
 */
const CREDENTIAL_NAMES = new Set([
  'key',
  'apikey',
  'xapikey',
  'token',
  'accesstoken',
  'refreshtoken',
  'idtoken',
  'authorization',
  'auth',
  'password',
  'secret',
  'clientsecret',
])
/** No credential name is longer, even escaped three times over: bounds the work per parameter. */
const MAX_NAME_LENGTH = 64

function isCredentialName(text: string, start: number, end: number): boolean {
  if (end - start > MAX_NAME_LENGTH) return false
  const buf = codes(text, start, end)
  let length = end - start
  for (let pass = 0; pass < MAX_DECODE_PASSES; pass++) {
    const decoded = decodeInPlace(buf, length)
    if (decoded === length) break
    length = decoded
  }
  if (length >= 2 && buf[length - 2] === 91 /* [ */ && buf[length - 1] === 93 /* ] */) length -= 2
  let name = ''
  for (let i = 0; i < length; i++) {
    const c = buf[i] as number
    if (c !== UNDERSCORE && c !== 45 /* - */ && c !== 43 /* + */ && c !== 32) name += String.fromCharCode(lower(c))
  }
  return CREDENTIAL_NAMES.has(name)
}

/**
 * A query string for a log line (with or without its leading `?`): cut to
 * maxLength (then `…`), the value of every credential-named parameter
 * replaced by `[redacted]`, and anything key-shaped masked. Both `&` and `;`
 * separate parameters here, so that `a=1;token=x` is masked too.
 */
export function maskQuery(query: string, maxLength = 256): string {
  const kept = cut(query, maxLength)
  const text = kept ?? query
  let out = ''
  let copied = 0
  const n = text.length
  for (let start = text.charCodeAt(0) === 63 /* ? */ ? 1 : 0; start < n;) {
    let end = start
    let equals = -1
    for (; end < n; end++) {
      const c = text.charCodeAt(end)
      if (c === 38 /* & */ || c === 59 /* ; */) break
      if (c === 61 /* = */ && equals === -1) equals = end
    }
    if (equals !== -1 && equals + 1 < end && isCredentialName(text, start, equals)) {
      out += text.slice(copied, equals + 1) + REDACTED
      copied = end
    }
    start = end + 1
  }
  const masked = maskKeys(copied === 0 ? text : out + text.slice(copied))
  return kept === undefined ? masked : `${masked}…`
}
