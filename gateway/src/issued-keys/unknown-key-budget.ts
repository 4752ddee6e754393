/**
 * The global budget for store lookups of keys the issued-key filter cannot
 * vouch for (before it is loaded, or while this replica is not current with
 * the invalidation log): a token bucket of lookups per second, a bound on
 * those in flight, and a smaller bound per client (an IPv6 client by its
 * /64). Beyond it such a key is answered 503 (it cannot be checked now), never
 * 401, since it may be a key created while this replica was cut off.
 *
 * Keys in the filter never take from this budget, so however many unknown
 * keys arrive, an issued key never waits behind them.
 */
import { clientGroup } from '@scoped/shared/ip-address'

export interface UnknownKeyBudgetOptions {
  /** Lookups per second, and the most at once after a quiet spell. */
  rate: number
  burst: number
  /** Lookups in flight at once, all clients together. */
  maxInFlight: number
  /** Of those, how many one client may hold. */
  maxPerClient: number
  /** Monotonic milliseconds. */
  now?: () => number
}

export const DEFAULT_UNKNOWN_KEY_BUDGET: UnknownKeyBudgetOptions = Object.freeze({ rate: 50, burst: 100, maxInFlight: 32, maxPerClient: 4 })

export class UnknownKeyBudget {
  private tokens: number
  private refilledAt: number
  private inFlight = 0
  private readonly byClient = new Map<string, number>()
  private readonly now: () => number
  /** Lookups refused because the budget was spent, and lookups taken from it, for the metrics. */
  refused = 0
  taken = 0

  constructor(private readonly options: UnknownKeyBudgetOptions = DEFAULT_UNKNOWN_KEY_BUDGET) {
    this.now = options.now ?? (() => performance.now())
    this.tokens = options.burst
    this.refilledAt = this.now()
  }

  /** A release to call when the lookup settles, or undefined when the budget is spent (answer 503). */
  take(client: string): (() => void) | undefined {
    const group = clientGroup(client)
    const held = this.byClient.get(group) ?? 0
    this.refill()
    if (this.inFlight >= this.options.maxInFlight || held >= this.options.maxPerClient || this.tokens < 1) {
      this.refused++
      return undefined
    }
    this.tokens -= 1
    this.taken++
    this.inFlight++
    this.byClient.set(group, held + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      this.inFlight--
      const left = (this.byClient.get(group) ?? 1) - 1
      if (left <= 0) this.byClient.delete(group)
      else this.byClient.set(group, left)
    }
  }

  private refill(): void {
    const now = this.now()
    this.tokens = Math.min(this.options.burst, this.tokens + ((now - this.refilledAt) / 1000) * this.options.rate)
    this.refilledAt = now
  }
}
