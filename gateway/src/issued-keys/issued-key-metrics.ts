/**
 * The issued-key filter's metrics, read at each scrape from plain numbers
 * (the request path only adds to a field).
 */
import { Counter, Gauge } from 'prom-client'
import type { Registry } from 'prom-client'
import type { IssuedKeys } from './issued-keys.js'
import type { UnknownKeyBudget } from './unknown-key-budget.js'

export class IssuedKeyCounts {
  /** Keys outside a loaded, current filter: answered 401 from memory, no store lookup. */
  refusedFromMemory = 0
}

export function registerIssuedKeyMetrics(registry: Registry, issued: IssuedKeys, budget: UnknownKeyBudget, counts: IssuedKeyCounts): void {
  new Gauge({
    name: 'gateway_issued_keys',
    help: 'Key hashes in the issued-key filter (loaded at start, then added as keys are created); 0 until it is loaded.',
    registers: [registry],
    collect() {
      this.set(issued.loaded ? issued.count : 0)
    },
  })
  new Gauge({
    name: 'gateway_issued_key_filter_bytes',
    help: 'Memory taken by the issued-key filter’s bit arrays.',
    registers: [registry],
    collect() {
      this.set(issued.bytes)
    },
  })
  new Counter({
    name: 'gateway_unknown_keys_refused_from_memory_total',
    help: 'Keys answered 401 from the issued-key filter alone (never issued), without a store lookup.',
    registers: [registry],
    collect() {
      this.reset()
      this.inc(counts.refusedFromMemory)
    },
  })
  new Counter({
    name: 'gateway_unknown_key_lookups_total',
    help: 'Store lookups of keys the issued-key filter could not vouch for (not loaded, or this replica not current with the invalidation log), taken from the unknown-key budget.',
    registers: [registry],
    collect() {
      this.reset()
      this.inc(budget.taken)
    },
  })
  new Counter({
    name: 'gateway_unknown_key_lookups_refused_total',
    help: 'Lookups of keys the filter could not vouch for (not loaded, or not current) refused 503 because their global budget was spent.',
    registers: [registry],
    collect() {
      this.reset()
      this.inc(budget.refused)
    },
  })
}
