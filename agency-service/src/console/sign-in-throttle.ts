/**
 * Throttling of failed console sign-ins, per email and per client, stored in
 * Postgres so it holds across processes and replicas.
 *
 * An attempt first records itself as a (pending) failure and then counts the
 * failures of its subjects within the window, its own included. Whatever the
 * concurrency, the attempt that would exceed a limit sees it and is refused,
 * so at most `limit` passwords per subject are ever checked in a window. A
 * refused attempt removes its row (only real failures count); a successful
 * one removes its row and the email's earlier failures.
 *
 * Limits: 5 failures per email in 15 minutes stops guessing one account's
 * password; 20 per client in 15 minutes stops one client spraying many
 * accounts, while several people behind one address (an office) who mistype
 * do not lock each other out at once.
 */
import { createHash } from 'node:crypto'
import type { Pool } from '@scoped/shared/db'

export const SIGN_IN_WINDOW_MS = 15 * 60_000
export const MAX_FAILURES_PER_EMAIL = 5
export const MAX_FAILURES_PER_CLIENT = 20

interface Subject {
  hash: string
  limit: number
}

function subject(kind: 'email' | 'client', value: string, limit: number): Subject {
  return { hash: createHash('sha256').update(`${kind}:${value}`).digest('hex'), limit }
}

export type SignInAttempt = { allowed: false } | { allowed: true; rowIds: string[]; emailHash: string }

export async function beginSignInAttempt(pool: Pool, email: string, client: string, now: Date): Promise<SignInAttempt> {
  const byEmail = subject('email', email, MAX_FAILURES_PER_EMAIL)
  const byClient = subject('client', client, MAX_FAILURES_PER_CLIENT)
  const since = new Date(now.getTime() - SIGN_IN_WINDOW_MS)
  await pool.query(`DELETE FROM console_sign_in_failures WHERE failed_at <= $1`, [since])
  const inserted = await pool.query<{ id: string }>(
    `INSERT INTO console_sign_in_failures (subject, failed_at) SELECT unnest($1::text[]), $2 RETURNING id`,
    [[byEmail.hash, byClient.hash], now],
  )
  const rowIds = inserted.rows.map((row) => row.id)
  const { rows } = await pool.query<{ subject: string; failures: number }>(
    `SELECT subject, count(*)::int AS failures FROM console_sign_in_failures
     WHERE subject = ANY($1::text[]) AND failed_at > $2 GROUP BY subject`,
    [[byEmail.hash, byClient.hash], since],
  )
  const failures = new Map(rows.map((row) => [row.subject, row.failures]))
  const exceeded = [byEmail, byClient].some((s) => (failures.get(s.hash) ?? 0) > s.limit)
  if (exceeded) {
    await pool.query(`DELETE FROM console_sign_in_failures WHERE id = ANY($1::bigint[])`, [rowIds])
    return { allowed: false }
  }
  return { allowed: true, rowIds, emailHash: byEmail.hash }
}

/** The password was right: this attempt was no failure, and the account's earlier failures are forgiven. */
export async function signInSucceeded(pool: Pool, attempt: Extract<SignInAttempt, { allowed: true }>): Promise<void> {
  await pool.query(`DELETE FROM console_sign_in_failures WHERE id = ANY($1::bigint[]) OR subject = $2`, [attempt.rowIds, attempt.emailHash])
}
