/**
 * GitHub's secret-scanning signatures: GitHub signs each alert it sends with
 * one of its public keys (ECDSA P-256, SHA-256, over the raw body; the
 * signature in `Github-Public-Key-Signature` is base64 DER) and names the key
 * in `Github-Public-Key-Identifier`. The keys come from
 * SECRET_SCANNING_KEYS_FILE, GitHub's own document
 * (https://api.github.com/meta/public_keys/secret_scanning):
 * `{"public_keys":[{"key_identifier","key","is_current"}]}`, read and checked
 * once at start. Keys that are no longer current are still accepted, as GitHub
 * may sign with them during its own rotation.
 */
import type { KeyObject } from 'node:crypto'
import { createPublicKey, verify } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { ConfigError } from '@scoped/shared/config'

export const KEYS_FILE_VARIABLE = 'SECRET_SCANNING_KEYS_FILE'
export const KEY_IDENTIFIER_HEADER = 'github-public-key-identifier'
export const SIGNATURE_HEADER = 'github-public-key-signature'

/** Bounds on what a header may hold before anything is decoded (a DER P-256 signature is at most 72 bytes). */
const MAX_IDENTIFIER_LENGTH = 256
const MAX_SIGNATURE_LENGTH = 256
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/

export class GithubPublicKeys {
  constructor(private readonly keys: ReadonlyMap<string, KeyObject>) {}

  get size(): number {
    return this.keys.size
  }

  /** Whether `signature` (base64 DER) is the named key's ECDSA P-256 SHA-256 signature over exactly these bytes. */
  verify(body: Buffer, identifier: unknown, signature: unknown): boolean {
    if (typeof identifier !== 'string' || typeof signature !== 'string') return false
    if (identifier.length > MAX_IDENTIFIER_LENGTH || signature.length > MAX_SIGNATURE_LENGTH || !BASE64.test(signature)) return false
    const key = this.keys.get(identifier)
    if (key === undefined) return false
    try {
      return verify('sha256', body, { key, dsaEncoding: 'der' }, Buffer.from(signature, 'base64'))
    } catch {
      return false
    }
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Parses GitHub's public-keys document; throws an Error naming what is wrong. */
export function parseGithubPublicKeys(text: string): GithubPublicKeys {
  let document: unknown
  try {
    document = JSON.parse(text)
  } catch {
    throw new Error('is not JSON')
  }
  const entries = isObject(document) ? document['public_keys'] : undefined
  if (!Array.isArray(entries) || entries.length === 0) throw new Error('must be GitHub\'s {"public_keys":[…]} document with at least one key')
  const keys = new Map<string, KeyObject>()
  entries.forEach((entry, index) => {
    const identifier = isObject(entry) ? entry['key_identifier'] : undefined
    const pem = isObject(entry) ? entry['key'] : undefined
    if (typeof identifier !== 'string' || identifier === '' || identifier.length > MAX_IDENTIFIER_LENGTH)
      throw new Error(`public_keys[${index}].key_identifier must be a non-empty string`)
    if (typeof pem !== 'string') throw new Error(`public_keys[${index}].key must be a PEM public key`)
    let key: KeyObject
    try {
      key = createPublicKey(pem)
    } catch {
      throw new Error(`public_keys[${index}].key is not a PEM public key`)
    }
    if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1')
      throw new Error(`public_keys[${index}].key is not an ECDSA P-256 key`)
    keys.set(identifier, key)
  })
  return new GithubPublicKeys(keys)
}

/** SECRET_SCANNING_KEYS_FILE, read and checked; undefined when unset (the GitHub endpoint then refuses every alert with 401). */
export function readGithubPublicKeys(file: string | undefined): GithubPublicKeys | undefined {
  if (file === undefined) return undefined
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    throw new ConfigError(KEYS_FILE_VARIABLE, `cannot be read (${error instanceof Error ? error.message : String(error)})`)
  }
  try {
    return parseGithubPublicKeys(text)
  } catch (error) {
    throw new ConfigError(KEYS_FILE_VARIABLE, `${file} ${error instanceof Error ? error.message : String(error)}`)
  }
}
