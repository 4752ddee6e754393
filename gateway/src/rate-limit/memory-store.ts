/**
 * The token buckets in this process's memory, with the arithmetic of the
 * Redis script (redis-store.ts): what the fast tests run the limiter over,
 * with a clock they move by hand. A bucket is forgotten once it would be full
 * again (as the Redis key expires), and at most `maxBuckets` are held: past
 * that the one leased from longest ago is dropped, and starts full if it
 * comes back.
 */
import type { Lease, LeaseStore } from './lease-store.js'

interface Bucket {
  tokens: number
  /** When it was last leased from (ms of the store's clock). */
  at: number
  /** When it would be full again: from then on it is forgotten. */
  fullAt: number
}

export interface MemoryLeaseStoreOptions {
  /** Milliseconds, monotonic: performance.now() by default. */
  now?: () => number
  maxBuckets?: number
}

export class MemoryLeaseStore implements LeaseStore {
  private readonly buckets = new Map<string, Bucket>()
  private readonly now: () => number
  private readonly maxBuckets: number

  constructor(options: MemoryLeaseStoreOptions = {}) {
    this.now = options.now ?? (() => performance.now())
    this.maxBuckets = options.maxBuckets ?? 100_000
  }

  lease(bucket: string, rate: number, burst: number, want: number, giveBack = 0): Promise<Lease> {
    return Promise.resolve(this.leaseNow(bucket, rate, burst, want, giveBack))
  }

  /** How many buckets are held. */
  get size(): number {
    return this.buckets.size
  }

  private leaseNow(id: string, rate: number, burst: number, want: number, giveBack: number): Lease {
    const now = this.now()
    const held = this.buckets.get(id)
    const known = held !== undefined && now < held.fullAt
    let tokens = known ? held.tokens : burst
    tokens = Math.min(burst, tokens + (known ? (Math.max(0, now - held.at) / 1000) * rate : 0) + giveBack)
    const granted = Math.min(want, Math.floor(tokens))
    tokens -= granted
    // Deleted and set again, so the Map's order is the order of the last lease: the first is the one to drop.
    this.buckets.delete(id)
    this.buckets.set(id, { tokens, at: now, fullAt: now + Math.ceil(((burst - tokens) / rate) * 1000) + 1000 })
    this.forgetOldest(now)
    return { granted, left: tokens }
  }

  /** Drops the first buckets that are full again (a few at a time: constant work per lease), and the first one past the bound. */
  private forgetOldest(now: number): void {
    for (let dropped = 0; dropped < 4; dropped++) {
      const first = this.buckets.entries().next()
      if (first.done === true || (first.value[1].fullAt > now && this.buckets.size <= this.maxBuckets)) return
      this.buckets.delete(first.value[0])
    }
  }
}
