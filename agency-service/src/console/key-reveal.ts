/**
 * Showing a new key's plaintext exactly once, on a page reached by the
 * redirect that follows the creating POST (so a reload never creates a
 * second key), without the server keeping the plaintext anywhere.
 *
 * The plaintext is encrypted (AES-256-GCM) under a fresh random key. The
 * ciphertext goes to the browser in a short-lived cookie scoped to the one
 * page that shows it; the random key goes to Postgres, bound to the session
 * and the key id. Showing the page deletes the random key in the same
 * statement that reads it, so the ciphertext is useless from then on: the
 * plaintext can be shown once, to the session that created it, and never again.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import type { Pool } from '@scoped/shared/db'

export const REVEAL_LIFETIME_MS = 5 * 60_000

const IV_LENGTH = 12
const TAG_LENGTH = 16

export async function storeReveal(pool: Pool, sessionTokenHash: string, keyId: string, plaintext: string, now: Date): Promise<string> {
  const secret = randomBytes(32)
  const iv = randomBytes(IV_LENGTH)
  const cipher = createCipheriv('aes-256-gcm', secret, iv)
  cipher.setAAD(Buffer.from(keyId))
  const sealed = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
  await pool.query(`DELETE FROM console_key_reveals WHERE expires_at <= $1`, [now])
  await pool.query(`INSERT INTO console_key_reveals (key_id, session_token_hash, secret, expires_at) VALUES ($1, $2, $3, $4)`, [
    keyId,
    sessionTokenHash,
    secret,
    new Date(now.getTime() + REVEAL_LIFETIME_MS),
  ])
  return Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64url')
}

/** The plaintext, the first time only; undefined when already shown, expired, of another session, or tampered with. */
export async function takeReveal(pool: Pool, sessionTokenHash: string, keyId: string, sealed: unknown, now: Date): Promise<string | undefined> {
  const { rows } = await pool.query<{ secret: Buffer; expires_at: Date }>(
    `DELETE FROM console_key_reveals WHERE key_id = $1 AND session_token_hash = $2 RETURNING secret, expires_at`,
    [keyId, sessionTokenHash],
  )
  const row = rows[0]
  if (row === undefined || row.expires_at <= now || typeof sealed !== 'string') return undefined
  const bytes = Buffer.from(sealed, 'base64url')
  if (bytes.length <= IV_LENGTH + TAG_LENGTH) return undefined
  try {
    const decipher = createDecipheriv('aes-256-gcm', row.secret, bytes.subarray(0, IV_LENGTH))
    decipher.setAAD(Buffer.from(keyId))
    decipher.setAuthTag(bytes.subarray(IV_LENGTH, IV_LENGTH + TAG_LENGTH))
    return Buffer.concat([decipher.update(bytes.subarray(IV_LENGTH + TAG_LENGTH)), decipher.final()]).toString('utf8')
  } catch {
    return undefined
  }
}
