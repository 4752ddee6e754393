/**
 * The public revocation API's allowance per client: REPORTS_PER_HOUR reports
 * per client address (an IPv6 client by its /64, which one host picks from at
 * will), then 429 with Retry-After until its window ends. The address is the
 * one the gateway signed for the request (request.ip: signed-client-address
 * in app.ts), never one a caller wrote.
 *
 * A ClientThrottle (shared/src/client-throttle.ts, the gateway's
 * failed-authentication throttle too): with REDIS_URL the count is shared by
 * every agency-service replica (`<prefix>leak-report:<SHA-256 of the
 * client>`), so N replicas admit one allowance, plus at most one report per
 * other replica, per client and hour. A report is decided from this process's
 * memory and never waits for Redis. When Redis cannot be reached each replica
 * still holds every client to the allowance on its own count (at most N
 * times it in all, never unlimited), and says so in a warning at most once a
 * minute; the reports themselves are answered as ever.
 */
import type { Logger } from 'pino'
import { ClientThrottle } from '@scoped/shared/client-throttle'
import type { ClientThrottleOptions } from '@scoped/shared/client-throttle'

/** At least the 60 an hour the contract promises a client. */
export const REPORTS_PER_HOUR = 60
export const REPORT_WINDOW_MS = 60 * 60_000
/** The least time between two warnings that Redis cannot share the count. */
const WARN_EVERY_MS = 60_000

export type ReportDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number }

export interface ReportThrottleOptions extends Partial<Omit<ClientThrottleOptions, 'name' | 'onError'>> {
  /** Where the warning goes when Redis fails; none when absent. */
  log?: Pick<Logger, 'warn'>
}

export class ReportThrottle extends ClientThrottle {
  constructor(options: ReportThrottleOptions = {}) {
    const { log, ...rest } = options
    let lastWarning = -Infinity
    let failed = 0
    super({
      ...rest,
      name: 'leak-report',
      limit: options.limit ?? REPORTS_PER_HOUR,
      windowMs: options.windowMs ?? REPORT_WINDOW_MS,
      onError: (error) => {
        failed++
        const now = Date.now()
        if (log === undefined || now - lastWarning < WARN_EVERY_MS) return
        log.warn(
          { err: error, failedUpdates: failed },
          'leaked-key reports: Redis unavailable; this replica holds each client to the allowance on its own count',
        )
        lastWarning = now
        failed = 0
      },
    })
  }

  /** Counts one report of `client` (its address) and says whether it is within the allowance. */
  take(client: string): ReportDecision {
    const check = this.check(client)
    if (check.blocked) return { allowed: false, retryAfterSeconds: check.retryAfterSeconds }
    this.count(client)
    return { allowed: true }
  }
}
