/**
 * Refused sign-ins of a known user, coalesced into the audit trail: at most
 * one `user.sign-in-refused` event per user per minute in each of the user's
 * agencies, carrying how many refusals it stands for (`refusals`) and the
 * client address of the latest. A refusal costs one upsert of its (user,
 * minute) row in console_sign_in_refusals; once the minute has ended, a
 * flush deletes the row and writes the event in one transaction, so each
 * minute is written exactly once whichever replica flushes it (the delete's
 * row lock), and the trail grows by one row per user per minute at most
 * however fast the guesses come. Every agency-service process flushes on a
 * timer (FLUSH_EVERY_MS); the event's time is the flush's, and its minute is
 * the one it counts.
 */
import type { Pool } from '@scoped/shared/db'
import { inTransaction } from '@scoped/shared/db'
import { userActor } from '../audit/actor.js'
import { recordUserEvent } from './user-events.js'

export const REFUSAL_MINUTE_MS = 60_000
/** How often each process writes the minutes that have ended. */
export const FLUSH_EVERY_MS = 10_000
/** Minutes flushed per transaction, so one flush never holds a long one. */
const FLUSH_BATCH = 100

function minuteOf(at: Date): Date {
  return new Date(Math.floor(at.getTime() / REFUSAL_MINUTE_MS) * REFUSAL_MINUTE_MS)
}

/** Counts one refusal of `userId` from `clientAddress` at `at` (one statement; no audit row yet). */
export async function countSignInRefusal(pool: Pool, userId: string, clientAddress: string, at: Date): Promise<void> {
  await pool.query(
    `INSERT INTO console_sign_in_refusals (user_id, minute, refusals, client_address) VALUES ($1, $2, 1, $3)
     ON CONFLICT (user_id, minute) DO UPDATE SET refusals = console_sign_in_refusals.refusals + 1, client_address = EXCLUDED.client_address`,
    [userId, minuteOf(at), clientAddress],
  )
}

interface EndedMinute {
  user_id: string
  email: string | null
  minute: Date
  refusals: number
  client_address: string | null
}

/**
 * Writes one event per (user, minute) that ended before `now` into each of
 * the user's agencies' trails, and forgets the minute; answers how many
 * minutes it wrote. A user deleted meanwhile leaves no event.
 */
export async function flushSignInRefusals(pool: Pool, now: Date): Promise<number> {
  let written = 0
  for (;;) {
    const batch = await inTransaction(pool, async (client) => {
      const { rows } = await client.query<EndedMinute>(
        `DELETE FROM console_sign_in_refusals r
          WHERE (r.user_id, r.minute) IN (
                SELECT user_id, minute FROM console_sign_in_refusals WHERE minute < $1 ORDER BY minute LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING r.user_id, (SELECT email FROM users WHERE id = r.user_id) AS email, r.minute, r.refusals, host(r.client_address) AS client_address`,
        [minuteOf(now), FLUSH_BATCH],
      )
      for (const row of rows) {
        if (row.email === null) continue
        await recordUserEvent(
          client,
          'user.sign-in-refused',
          { id: row.user_id, email: row.email },
          userActor(row.user_id, row.client_address ?? undefined),
          row.refusals,
        )
      }
      return rows.length
    })
    written += batch
    if (batch < FLUSH_BATCH) return written
  }
}
