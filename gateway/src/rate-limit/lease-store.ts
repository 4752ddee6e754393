/**
 * Where the token buckets live, as the limiter (limiter.ts) sees them: it
 * takes tokens from a store in leases, a batch at a time, and gives back the
 * ones it did not spend. Two stores keep this contract, and one test runs the
 * same cases against both (test/gateway/lease-store.test.ts): Redis
 * (redis-store.ts), which every replica shares, and memory (memory-store.ts),
 * one process's own.
 */

export interface Lease {
  /** Tokens granted now. */
  granted: number
  /** Tokens left in the bucket after the grant (a fraction while it refills). */
  left: number
}

export interface LeaseStore {
  /**
   * Refills the bucket (`rate` tokens per second, `burst` at most) by the
   * time elapsed since its last lease, takes back `giveBack` unspent tokens,
   * then grants up to `want` whole tokens. A bucket never seen starts full. A
   * bucket is always asked with the same rate and burst: its id names its
   * size (buckets.ts).
   */
  lease(bucket: string, rate: number, burst: number, want: number, giveBack?: number): Promise<Lease>
}
