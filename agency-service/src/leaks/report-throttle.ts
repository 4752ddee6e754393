/**
 * The public revocation API's allowance per client: REPORTS_PER_HOUR reports
 * per client address (an IPv6 client by its /64, which one host picks from at
 * will), then 429 with Retry-After until its window ends. The address is the
 * one the gateway signed for the request (request.ip: signed-client-address
 * in app.ts), never one a caller wrote. Counted in this process's memory, a
 * bounded map (the oldest window is dropped first): with N agency-service
 * replicas a client may send up to N times the allowance, which still keeps
 * one client from turning the endpoint into a revocation flood, and needs no
 * store in front of a request that anyone may send.
 */
import { clientGroup } from '@scoped/shared/ip-address'

/** At least the 60 an hour the contract promises a client. */
export const REPORTS_PER_HOUR = 60
export const REPORT_WINDOW_MS = 60 * 60_000
const MAX_TRACKED = 100_000
/** How many expired windows one call may drop from the front of the map: amortized constant work. */
const SWEEP = 8

export type ReportDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number }

export class ReportThrottle {
  /** By client group, in the order their windows started (so the oldest is first). */
  private readonly windows = new Map<string, { count: number; endsAt: number }>()

  constructor(
    readonly limit = REPORTS_PER_HOUR,
    private readonly now: () => number = Date.now,
    private readonly windowMs = REPORT_WINDOW_MS,
  ) {}

  /** Counts one report of `client` (its address) and says whether it is within the allowance. */
  take(client: string): ReportDecision {
    const now = this.now()
    this.sweep(now)
    const group = clientGroup(client)
    let window = this.windows.get(group)
    if (window === undefined || window.endsAt <= now) {
      this.windows.delete(group)
      if (this.windows.size >= MAX_TRACKED) this.windows.delete(this.windows.keys().next().value!)
      window = { count: 0, endsAt: now + this.windowMs }
      this.windows.set(group, window)
    }
    if (window.count >= this.limit) return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((window.endsAt - now) / 1000)) }
    window.count++
    return { allowed: true }
  }

  private sweep(now: number): void {
    let dropped = 0
    for (const [group, window] of this.windows) {
      if (window.endsAt > now || dropped === SWEEP) return
      this.windows.delete(group)
      dropped++
    }
  }
}
