/**
 * When a failed delivery is tried again: after 5 s, 30 s, 2 min, 10 min and
 * 1 h, then every 6 h, until 72 h after the event (the message's give_up_at),
 * when the message is marked failed. The schedule is a parameter of the
 * sender so tests can run it in milliseconds.
 */
export interface RetrySchedule {
  /** The waits after the first failures, in order. */
  delaysMs: readonly number[]
  /** The wait after every later failure. */
  thenEveryMs: number
}

const SECOND = 1000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE

export const CONTRACT_RETRY_SCHEDULE: RetrySchedule = Object.freeze({
  delaysMs: Object.freeze([5 * SECOND, 30 * SECOND, 2 * MINUTE, 10 * MINUTE, HOUR]),
  thenEveryMs: 6 * HOUR,
})

/** How long to wait after the `attempts`-th attempt failed (1 for the first). */
export function retryDelayMs(attempts: number, schedule: RetrySchedule): number {
  return schedule.delaysMs[attempts - 1] ?? schedule.thenEveryMs
}

/** The next attempt's time, or null when it would fall after give-up time (the message has failed). */
export function nextAttemptAt(attempts: number, failedAt: Date, giveUpAt: Date, schedule: RetrySchedule): Date | null {
  const next = new Date(failedAt.getTime() + retryDelayMs(attempts, schedule))
  return next.getTime() > giveUpAt.getTime() ? null : next
}
