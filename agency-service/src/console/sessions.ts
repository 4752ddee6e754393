/**
 * Server-side console sessions. The cookie carries a 256-bit random token;
 * Postgres keeps only its SHA-256 hash, with the user, a per-session CSRF
 * token and two deadlines: an idle timeout and an absolute lifetime. Signing
 * out, disabling the user, or a password reset deletes the row, so the cookie
 * is worthless at once.
 */
import { createHash, randomBytes } from 'node:crypto'
import type { Pool, PoolClient } from '@scoped/shared/db'

export const SESSION_IDLE_TIMEOUT_MS = 30 * 60_000
export const SESSION_LIFETIME_MS = 12 * 60 * 60_000

/** 32 random bytes, base64url: 43 characters. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/

export interface ConsoleSession {
  tokenHash: string
  userId: string
  email: string
  csrfToken: string
}

export function newToken(): string {
  return randomBytes(32).toString('base64url')
}

export function isWellFormedToken(value: unknown): value is string {
  return typeof value === 'string' && TOKEN_PATTERN.test(value)
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex')
}

/**
 * A new session for the user, inside the caller's transaction (`client`), or
 * undefined when the user is disabled. The user row is share-locked first and
 * held to the end of the transaction, so a disable either commits before
 * (and this sees it) or waits for this session to commit (and then deletes
 * it): a session never outlives a disable that raced it.
 */
export async function createSession(client: PoolClient, userId: string, now: Date): Promise<{ token: string; session: ConsoleSession } | undefined> {
  const { rows } = await client.query<{ email: string }>(`SELECT email FROM users WHERE id = $1 AND disabled_at IS NULL FOR SHARE`, [userId])
  const user = rows[0]
  if (user === undefined) return undefined
  const token = newToken()
  const tokenHash = hashToken(token)
  const csrfToken = newToken()
  const expiresAt = new Date(now.getTime() + SESSION_LIFETIME_MS)
  // Expired sessions are swept here, on the rare write, rather than by a timer.
  await client.query(`DELETE FROM console_sessions WHERE expires_at <= $1 OR last_seen_at <= $2`, [now, new Date(now.getTime() - SESSION_IDLE_TIMEOUT_MS)])
  await client.query(`INSERT INTO console_sessions (token_hash, user_id, csrf_token, created_at, last_seen_at, expires_at) VALUES ($1, $2, $3, $4, $4, $5)`, [
    tokenHash,
    userId,
    csrfToken,
    now,
    expiresAt,
  ])
  return { token, session: { tokenHash, userId, email: user.email, csrfToken } }
}

/**
 * The live session for a presented token, renewing its idle deadline;
 * undefined when unknown, expired, idle too long, or its user is disabled
 * (disabling deletes the user's sessions; this is the second line).
 */
export async function findSession(pool: Pool, token: unknown, now: Date): Promise<ConsoleSession | undefined> {
  if (!isWellFormedToken(token)) return undefined
  const { rows } = await pool.query<{ token_hash: string; user_id: string; email: string; csrf_token: string }>(
    `UPDATE console_sessions AS s SET last_seen_at = $2
     FROM users AS u
     WHERE s.token_hash = $1 AND u.id = s.user_id AND u.disabled_at IS NULL AND s.expires_at > $2 AND s.last_seen_at > $3
     RETURNING s.token_hash, s.user_id, u.email, s.csrf_token`,
    [hashToken(token), now, new Date(now.getTime() - SESSION_IDLE_TIMEOUT_MS)],
  )
  const row = rows[0]
  return row && { tokenHash: row.token_hash, userId: row.user_id, email: row.email, csrfToken: row.csrf_token }
}

export async function deleteSession(pool: Pool, token: unknown): Promise<void> {
  if (!isWellFormedToken(token)) return
  await pool.query(`DELETE FROM console_sessions WHERE token_hash = $1`, [hashToken(token)])
}
