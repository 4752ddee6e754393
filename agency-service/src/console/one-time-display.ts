/**
 * Showing a secret exactly once (a new key's plaintext, a new invitation's
 * link, a webhook endpoint's new signing secret), on a page reached by the redirect that follows the creating POST (so
 * a reload never creates a second one).
 *
 * The secret is sealed (AES-256-GCM, the id of what it belongs to as
 * associated data) under a key derived (HKDF-SHA256, one label per kind of
 * secret) from the form's one-time token, and the sealed bytes wait in the
 * form's submission row (form-once.ts; its key_id and sealed_key columns hold
 * the id and the bytes whatever the kind). The token itself is stored nowhere
 * on the server: the browser has it (it posted it) and gets it back in a
 * short-lived cookie scoped to the one page that shows the secret. So a
 * repeated submission of the same form (a double click) can send the browser
 * to the same page with the same secret, and the page opens the sealed bytes
 * once: showing it removes them, in the statement that reads them, so a
 * reload, Back, or a later repeat of the form says it cannot be shown again.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'
import type { Pool } from '@scoped/shared/db'
import { hashToken, isWellFormedToken } from './sessions.js'

/** How long a new secret waits to be shown; after that it cannot be. */
export const REVEAL_LIFETIME_MS = 5 * 60_000

/** What is shown once: a new key's plaintext, a new invitation's token, or a webhook endpoint's signing secret. */
export type SecretKind = 'key' | 'invitation' | 'webhook-secret'

/** A secret to show once, and the id of the key, invitation or webhook endpoint it belongs to. */
export interface Reveal {
  kind: SecretKind
  id: string
  secret: string
}

const IV_LENGTH = 12
const TAG_LENGTH = 16

function sealingKey(kind: SecretKind, formToken: string): Buffer {
  // A sealed key never opens as an invitation's link, nor the other way round.
  return Buffer.from(hkdfSync('sha256', Buffer.from(formToken, 'base64url'), Buffer.alloc(0), `scoped console: new ${kind} display`, 32))
}

export function sealSecret(formToken: string, reveal: Reveal): Buffer {
  const iv = randomBytes(IV_LENGTH)
  const cipher = createCipheriv('aes-256-gcm', sealingKey(reveal.kind, formToken), iv)
  cipher.setAAD(Buffer.from(reveal.id))
  const sealed = Buffer.concat([cipher.update(reveal.secret, 'utf8'), cipher.final()])
  return Buffer.concat([iv, cipher.getAuthTag(), sealed])
}

function openSecret(kind: SecretKind, formToken: string, id: string, bytes: Buffer): string | undefined {
  if (bytes.length <= IV_LENGTH + TAG_LENGTH) return undefined
  try {
    const decipher = createDecipheriv('aes-256-gcm', sealingKey(kind, formToken), bytes.subarray(0, IV_LENGTH))
    decipher.setAAD(Buffer.from(id))
    decipher.setAuthTag(bytes.subarray(IV_LENGTH, IV_LENGTH + TAG_LENGTH))
    return Buffer.concat([decipher.update(bytes.subarray(IV_LENGTH + TAG_LENGTH)), decipher.final()]).toString('utf8')
  } catch {
    return undefined
  }
}

/**
 * The secret of the key or invitation `id`, the first time only; undefined
 * when already shown, too late, of another session, or with a cookie that is
 * not the form's token.
 */
export async function takeReveal(
  pool: Pool,
  kind: SecretKind,
  sessionTokenHash: string,
  id: string,
  formToken: unknown,
  now: Date,
): Promise<string | undefined> {
  if (!isWellFormedToken(formToken)) return undefined
  const { rows } = await pool.query<{ sealed: Buffer; reveal_until: Date }>(
    `UPDATE console_form_submissions AS s SET sealed_key = NULL
       FROM (SELECT session_token_hash, token_hash, sealed_key, reveal_until FROM console_form_submissions
              WHERE session_token_hash = $1 AND token_hash = $2 AND key_id = $3 AND sealed_key IS NOT NULL FOR UPDATE) AS old
      WHERE s.session_token_hash = old.session_token_hash AND s.token_hash = old.token_hash
      RETURNING old.sealed_key AS sealed, old.reveal_until`,
    [sessionTokenHash, hashToken(formToken), id],
  )
  const row = rows[0]
  if (row === undefined || row.reveal_until <= now) return undefined
  return openSecret(kind, formToken, id, row.sealed)
}
