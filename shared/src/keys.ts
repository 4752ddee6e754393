/**
 * API key format: `sak_live_<secret><checksum>`.
 *
 * - `sak_live_` is the one fixed literal prefix (spec §2: it ends in `_live_`);
 *   it lets secret scanners recognise a leaked key.
 * - the secret is 43 base62 characters drawn from the CSPRNG: 62^43 > 2^256.
 * - the checksum is CRC32 of prefix and secret in 6 base62 characters (as
 *   GitHub's token format does), so a mistyped or made-up key is refused
 *   before any cache or database lookup.
 *
 * Keys are stored only as a SHA-256 hash. A slow password hash (scrypt,
 * argon2) exists to make guessing low-entropy human passwords expensive; a
 * 256-bit random secret cannot be guessed at any speed, so a slow hash would
 * only add latency to every request without adding security, and a fast
 * deterministic hash lets the gateway look the key up by its hash directly.
 */
import { hash, randomBytes } from 'node:crypto'
import { crc32 } from 'node:zlib'

export const KEY_PREFIX = 'sak_live_'
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const SECRET_LENGTH = 43
const CHECKSUM_LENGTH = 6
export const KEY_LENGTH = KEY_PREFIX.length + SECRET_LENGTH + CHECKSUM_LENGTH
const BODY_PATTERN = /^[0-9A-Za-z]+$/

/** A presented string that has the shape and checksum of a key; not yet known to exist. */
export type ParsedKey = { ok: true; key: string } | { ok: false }

function randomBase62(length: number): string {
  let out = ''
  while (out.length < length) {
    // Rejection sampling: only bytes below 248 (= 4 × 62) keep the draw uniform.
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62]
      if (out.length === length) break
    }
  }
  return out
}

function checksum(prefixAndSecret: string): string {
  let value = crc32(prefixAndSecret)
  let out = ''
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[value % 62] + out
    value = Math.floor(value / 62)
  }
  return out
}

export function generateKey(): string {
  const body = KEY_PREFIX + randomBase62(SECRET_LENGTH)
  return body + checksum(body)
}

/** Whether `presented` has the shape of a key: the prefix, the length, base62 after the prefix. Says nothing of its checksum. */
export function hasKeyShape(presented: string): boolean {
  return presented.length === KEY_LENGTH && presented.startsWith(KEY_PREFIX) && BODY_PATTERN.test(presented.slice(KEY_PREFIX.length))
}

/** Whether a string of the shape of a key (hasKeyShape) ends in the checksum of the rest. */
export function hasValidChecksum(key: string): boolean {
  return checksum(key.slice(0, KEY_LENGTH - CHECKSUM_LENGTH)) === key.slice(KEY_LENGTH - CHECKSUM_LENGTH)
}

export function parseKey(presented: string): ParsedKey {
  return hasKeyShape(presented) && hasValidChecksum(presented) ? { ok: true, key: presented } : { ok: false }
}

/** The stored and looked-up form of a key: hex SHA-256 of the whole key (one-shot crypto.hash: the gateway hashes on every request). */
export function hashKey(key: string): string {
  return hash('sha256', key, 'hex')
}

/**
 * What a person sees in lists to tell keys apart: the prefix and the last four
 * characters, which are checksum characters and so reveal nothing of the secret.
 */
export function keyHint(key: string): string {
  return `${KEY_PREFIX}…${key.slice(-4)}`
}
