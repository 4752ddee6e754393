/**
 * What the gate asks about a key that is not in the in-process cache: was it
 * ever issued (the filter), and, for a key the filter cannot vouch for, may
 * it be looked up now (the unknown-key budget).
 */
import type { IssuedVerdict } from './issued-keys.js'
import type { IssuedKeyCounts } from './issued-key-metrics.js'
import type { UnknownKeyBudget } from './unknown-key-budget.js'

export interface IssuedKeyCheck {
  verdict(hash: string): IssuedVerdict
  /** For an `unsure` key: a release to call when its lookup settles, or undefined when the budget is spent. */
  takeLookup(client: string): (() => void) | undefined
  /** Counts a key answered 401 from the filter alone. */
  refusedFromMemory(): void
}

export class IssuedKeyGate implements IssuedKeyCheck {
  constructor(
    private readonly issued: { verdict(hash: string): IssuedVerdict },
    private readonly budget: UnknownKeyBudget,
    private readonly counts: IssuedKeyCounts,
  ) {}

  verdict(hash: string): IssuedVerdict {
    return this.issued.verdict(hash)
  }

  takeLookup(client: string): (() => void) | undefined {
    return this.budget.take(client)
  }

  refusedFromMemory(): void {
    this.counts.refusedFromMemory++
  }
}
