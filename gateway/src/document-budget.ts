/**
 * The budget of requests that pass without a key: the documents
 * (/openapi.json, /docs and its assets) cost the gateway more than a refused
 * API call, so each client (an IPv4 address, or the /64 of an IPv6 one) gets
 * `limit` of them per window, then 429 with Retry-After until its window
 * ends. Counted in this replica's memory: N replicas admit at most N × limit
 * per client, which is enough to keep one client from taking a replica's
 * CPU or bandwidth, and needs no store on the way to a public document.
 *
 * Memory is bounded: at most `maxTracked` clients (the oldest window is
 * dropped first), and expired windows are dropped as they are met.
 */
import { clientGroup } from '@scoped/shared/ip-address'

export const DOCUMENT_WINDOW_MS = 60_000
export const DEFAULT_MAX_TRACKED = 100_000
/** How many expired windows one call may drop from the front of the map: amortized constant work. */
const SWEEP = 8

export type BudgetDecision = { allowed: true; remaining: number; resetSeconds: number } | { allowed: false; retryAfterSeconds: number }

interface Window {
  count: number
  endsAt: number
}

export class DocumentBudget {
  /** By client group, in the order their windows started (so the oldest is first). */
  private readonly windows = new Map<string, Window>()

  constructor(
    readonly limit: number,
    readonly windowMs = DOCUMENT_WINDOW_MS,
    private readonly maxTracked = DEFAULT_MAX_TRACKED,
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts one request of `client` (its address), and says whether it is within the budget. */
  take(client: string): BudgetDecision {
    const now = this.now()
    this.sweep(now)
    const group = clientGroup(client)
    let window = this.windows.get(group)
    if (window === undefined || window.endsAt <= now) {
      this.windows.delete(group)
      if (this.windows.size >= this.maxTracked) this.windows.delete(this.windows.keys().next().value!)
      window = { count: 0, endsAt: now + this.windowMs }
      this.windows.set(group, window)
    }
    const resetSeconds = Math.max(1, Math.ceil((window.endsAt - now) / 1000))
    if (window.count >= this.limit) return { allowed: false, retryAfterSeconds: resetSeconds }
    window.count++
    return { allowed: true, remaining: this.limit - window.count, resetSeconds }
  }

  /** Clients tracked now (for tests of the bound). */
  get size(): number {
    return this.windows.size
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
