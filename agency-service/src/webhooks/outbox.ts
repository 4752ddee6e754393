/**
 * The sender's side of the outbox (migration 019): claiming the messages due
 * now, one per endpoint (its oldest pending message, so an endpoint receives
 * its events in order), and recording how each attempt ended. A claim is one
 * statement: it locks the heads with FOR UPDATE SKIP LOCKED, gives each a
 * lease and a lease token, counts the attempt, and writes the attempt's row;
 * two replicas never hold the same message, and one that stops mid-delivery
 * leaves a lease that runs out, after which the message is tried again with
 * the same webhook-id (at least once). Times are the database's.
 */
import type { Pool } from '@scoped/shared/db'

export interface ClaimedMessage {
  messageId: string
  attemptId: string
  endpointId: string
  url: string
  secret: string
  payload: string
  attempts: number
  leaseToken: string
}

const CLAIM_SQL = `
WITH heads AS (
  SELECT DISTINCT ON (m.endpoint_id) m.id
    FROM webhook_messages m JOIN webhook_endpoints e ON e.id = m.endpoint_id AND e.enabled
   WHERE m.state = 'pending'
   ORDER BY m.endpoint_id, m.seq
), claimed AS (
  UPDATE webhook_messages m
     SET lease_until = now() + $1 * interval '1 millisecond', lease_token = gen_random_uuid(), attempts = m.attempts + 1
   WHERE m.id IN (SELECT id FROM webhook_messages
                   WHERE id IN (SELECT id FROM heads) AND state = 'pending' AND next_attempt_at <= now()
                     AND (lease_until IS NULL OR lease_until < now())
                   ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED)
  RETURNING m.id, m.endpoint_id, m.payload, m.attempts, m.lease_token
), abandoned AS (
  UPDATE webhook_attempts SET state = 'failed', error = 'the sender stopped before the answer was recorded'
   WHERE message_id IN (SELECT id FROM claimed) AND state = 'pending'
), attempt AS (
  INSERT INTO webhook_attempts (message_id, endpoint_id, attempt, lease_token)
  SELECT id, endpoint_id, attempts, lease_token FROM claimed
  RETURNING id, message_id
)
SELECT c.id AS message_id, a.id AS attempt_id, c.endpoint_id, e.url, e.secret, c.payload, c.attempts, c.lease_token
  FROM claimed c JOIN attempt a ON a.message_id = c.id JOIN webhook_endpoints e ON e.id = c.endpoint_id`

interface ClaimRow {
  message_id: string
  attempt_id: string
  endpoint_id: string
  url: string
  secret: string
  payload: string
  attempts: number
  lease_token: string
}

/** Claims up to `limit` messages due now, each leased for `leaseMs`. */
export async function claimDueMessages(pool: Pool, limit: number, leaseMs: number): Promise<ClaimedMessage[]> {
  const { rows } = await pool.query<ClaimRow>(CLAIM_SQL, [leaseMs, limit])
  return rows.map((row) => ({
    messageId: row.message_id,
    attemptId: row.attempt_id,
    endpointId: row.endpoint_id,
    url: row.url,
    secret: row.secret,
    payload: row.payload,
    attempts: row.attempts,
    leaseToken: row.lease_token,
  }))
}

export interface AttemptResult {
  delivered: boolean
  status: number | null
  durationMs: number
  error: string | null
  /** After a failure, how long until the next attempt; the message fails when that is past its give-up time. */
  retryInMs: number
}

/**
 * Records how an attempt ended, and moves its message on: delivered, due
 * again later, or failed (given up). Only while the lease is still this
 * attempt's: a sender whose lease ran out leaves the message to whoever holds it now.
 */
export async function recordAttempt(pool: Pool, claimed: ClaimedMessage, result: AttemptResult): Promise<void> {
  await pool.query(
    `WITH attempt AS (
       UPDATE webhook_attempts SET state = CASE WHEN $3 THEN 'delivered' ELSE 'failed' END,
              response_status = $4, duration_ms = $5, error = $6
        WHERE id = $2 AND state = 'pending'
     )
     UPDATE webhook_messages
        SET state = CASE WHEN $3 THEN 'delivered'
                         WHEN now() + $7 * interval '1 millisecond' > give_up_at THEN 'failed' ELSE 'pending' END,
            next_attempt_at = CASE WHEN $3 THEN next_attempt_at ELSE now() + $7 * interval '1 millisecond' END,
            finished_at = CASE WHEN $3 OR now() + $7 * interval '1 millisecond' > give_up_at THEN now() END,
            lease_until = NULL, lease_token = NULL
      WHERE id = $1 AND lease_token = $8`,
    [
      claimed.messageId,
      claimed.attemptId,
      result.delivered,
      result.status,
      result.durationMs,
      result.error?.slice(0, 500) ?? null,
      result.retryInMs,
      claimed.leaseToken,
    ],
  )
}

/** Writes the expiry reminders due at `at` (once each, whichever replica gets there first); how many were written. */
export async function sendKeyReminders(pool: Pool, at: Date): Promise<number> {
  const { rows } = await pool.query<{ sent: number }>(`SELECT webhook_send_key_reminders($1) AS sent`, [at])
  return rows[0]?.sent ?? 0
}
