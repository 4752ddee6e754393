/**
 * Rate limits shared by every replica, without a store round trip per
 * request. Each bucket lives in a lease store (lease-store.ts: Redis in a
 * deployment, memory in the fast tests); a replica takes its tokens in
 * leases, a batch at a time (a quarter second of the rate, at most a quarter
 * of the burst), spends them locally, asks for the next lease before the
 * current one runs out, and gives back what it has not spent once a lease is
 * a second old. Every token spent was first taken from the shared bucket, so
 * while the store answers, N replicas together admit at most the limit itself
 * (burst + rate × time): no overshoot. A lease that cannot be had in time
 * makes the request wait for the store only when the replica holds no token.
 *
 * When the store fails (an error, or no answer within 250 ms) the replica
 * falls back, for a second at a time, to a local bucket of its share: rate
 * and burst divided by the replicas seen recently (the registry in Postgres).
 * That is fail-soft, never fail-open without bound: N replicas then admit at
 * most the limit plus the tokens each still held from its last lease (N ×
 * lease size). Without Redis at all (no store), every replica uses its share
 * alone: a store in each replica's memory would give each the whole limit.
 */
import { withDeadline } from '@scoped/shared/deadline'
import type { BucketRef } from './buckets.js'
import type { Limit, LimitKind } from '@scoped/shared/route-limits'
import type { LeaseStore } from './lease-store.js'

export type LimitDecision = { allowed: true } | { allowed: false; kind: LimitKind; retryAfterSeconds: number }

interface Bucket {
  limit: Limit
  /** Tokens leased from the shared bucket and not yet spent. */
  leased: number
  /** When the current lease was granted (monotonic ms). */
  leasedAt: number
  /** What the shared bucket held after the last grant, for the RateLimit header. */
  sharedLeft: number
  fetching: Promise<void> | null
  /** The local fallback bucket. */
  tokens: number
  refilledAt: number
}

export interface RateLimiterOptions {
  /** Null without Redis: every replica keeps its share locally. */
  store: LeaseStore | null
  /** Replicas seen recently (at least 1). */
  replicas: () => number
  now?: () => number
  onStoreError?: (error: unknown) => void
  /** Buckets held in memory at most; the oldest are dropped (their unspent tokens return to the store by refill). */
  maxBuckets?: number
}

const LEASE_SECONDS = 0.25
const LEASE_MAX_AGE_MS = 1_000
const STORE_TIMEOUT_MS = 250
const FALLBACK_MS = 1_000

export function leaseSize(limit: Limit): number {
  return Math.max(1, Math.min(Math.floor(limit.rate * LEASE_SECONDS), Math.floor(limit.burst / 4)))
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>()
  private readonly now: () => number
  private readonly maxBuckets: number
  private storeDownUntil = -Infinity
  private readonly sweeper: NodeJS.Timeout

  constructor(private readonly options: RateLimiterOptions) {
    this.now = options.now ?? (() => performance.now())
    this.maxBuckets = options.maxBuckets ?? 100_000
    this.sweeper = setInterval(() => this.returnStaleLeases(), LEASE_MAX_AGE_MS)
    this.sweeper.unref()
  }

  /** Takes one token from every bucket, or none: synchronous unless a lease must be fetched first. */
  take(refs: readonly BucketRef[]): LimitDecision | Promise<LimitDecision> {
    const taken: Bucket[] = []
    for (let i = 0; i < refs.length; i++) {
      const ref = refs[i]!
      const bucket = this.bucket(ref)
      const result = this.takeOne(ref, bucket)
      if (result === true) {
        taken.push(bucket)
        continue
      }
      if (result === false) return this.deny(ref, bucket, taken)
      // A lease is on its way: finish asynchronously from here.
      return this.takeRest(refs, i, bucket, result, taken)
    }
    return { allowed: true }
  }

  /** What is left of each bucket, as this replica knows it (for the RateLimit header). */
  remaining(ref: BucketRef): number {
    const bucket = this.buckets.get(ref.id)
    if (bucket === undefined) return ref.limit.burst
    return Math.max(0, Math.floor(this.usingStore() ? bucket.sharedLeft + bucket.leased : bucket.tokens))
  }

  /** Gives every unspent token back to the store (at shutdown). */
  async close(): Promise<void> {
    clearInterval(this.sweeper)
    await this.returnStaleLeases(true)
  }

  private async takeRest(refs: readonly BucketRef[], from: number, bucket: Bucket, fetching: Promise<void>, taken: Bucket[]): Promise<LimitDecision> {
    await fetching
    for (let i = from; i < refs.length; i++) {
      const ref = refs[i]!
      const current = i === from ? bucket : this.bucket(ref)
      let result = this.takeOne(ref, current)
      // Another request may have spent the lease this one waited for: ask again, a few times at most.
      for (let attempts = 0; result !== true && result !== false; attempts++) {
        await result
        result = this.takeOne(ref, current, attempts < 3)
      }
      if (result === false) return this.deny(ref, current, taken)
      taken.push(current)
    }
    return { allowed: true }
  }

  /**
   * true: taken; false: refused; a promise: a lease is being fetched, ask
   * again when it settles (`mayFetch` false: refuse rather than fetch again).
   */
  private takeOne(ref: BucketRef, bucket: Bucket, mayFetch = true): boolean | Promise<void> {
    if (!this.usingStore()) return this.takeLocal(bucket, ref.limit)
    if (bucket.leased >= 1) {
      bucket.leased--
      if (bucket.leased < leaseSize(ref.limit) / 4 && bucket.fetching === null) void this.fetch(ref, bucket)
      return true
    }
    if (bucket.fetching !== null) return bucket.fetching
    // The shared bucket was empty at the last grant and cannot have refilled a token since: refuse without asking.
    if (!mayFetch || (bucket.sharedLeft < 1 && this.now() - bucket.leasedAt < 1000 / ref.limit.rate)) return false
    return this.fetch(ref, bucket)
  }

  private takeLocal(bucket: Bucket, limit: Limit): boolean {
    const share = Math.max(1, this.options.replicas())
    const rate = limit.rate / share
    const burst = Math.max(1, limit.burst / share)
    const now = this.now()
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.refilledAt) / 1000) * rate)
    bucket.refilledAt = now
    if (bucket.tokens < 1) return false
    bucket.tokens--
    return true
  }

  private fetch(ref: BucketRef, bucket: Bucket): Promise<void> {
    const store = this.options.store!
    const fetching = withDeadline(store.lease(ref.id, ref.limit.rate, ref.limit.burst, leaseSize(ref.limit)), STORE_TIMEOUT_MS, 'rate limit store').then(
      (lease) => {
        bucket.leased += lease.granted
        bucket.sharedLeft = lease.left
        if (lease.granted > 0) bucket.leasedAt = this.now()
      },
      (error: unknown) => {
        this.storeDownUntil = this.now() + FALLBACK_MS
        this.options.onStoreError?.(error)
      },
    )
    bucket.fetching = fetching.finally(() => (bucket.fetching = null))
    return bucket.fetching
  }

  private deny(ref: BucketRef, bucket: Bucket, taken: Bucket[]): LimitDecision {
    // The tokens taken from the earlier buckets of this request were not spent.
    const local = !this.usingStore()
    for (const other of taken) {
      if (local) other.tokens++
      else other.leased++
    }
    const missing = local ? 1 - bucket.tokens : 1 - bucket.sharedLeft
    const rate = local ? ref.limit.rate / Math.max(1, this.options.replicas()) : ref.limit.rate
    return { allowed: false, kind: ref.kind, retryAfterSeconds: Math.max(1, Math.ceil(missing / rate)) }
  }

  private usingStore(): boolean {
    return this.options.store !== null && this.now() >= this.storeDownUntil
  }

  private bucket(ref: BucketRef): Bucket {
    let bucket = this.buckets.get(ref.id)
    if (bucket === undefined) {
      if (this.buckets.size >= this.maxBuckets) {
        const oldest = this.buckets.keys().next()
        if (oldest.done !== true) this.buckets.delete(oldest.value)
      }
      const share = Math.max(1, this.options.replicas())
      bucket = {
        limit: ref.limit,
        leased: 0,
        leasedAt: 0,
        sharedLeft: ref.limit.burst,
        fetching: null,
        tokens: Math.max(1, ref.limit.burst / share),
        refilledAt: this.now(),
      }
      this.buckets.set(ref.id, bucket)
    }
    return bucket
  }

  /** Leases older than a second give their unspent tokens back, so an idle replica does not hold them. */
  private async returnStaleLeases(all = false): Promise<void> {
    const store = this.options.store
    if (store === null || !this.usingStore()) return
    const now = this.now()
    const returns: Array<Promise<unknown>> = []
    for (const [id, bucket] of this.buckets) {
      if (bucket.leased < 1 || bucket.fetching !== null || (!all && now - bucket.leasedAt < LEASE_MAX_AGE_MS)) continue
      const giveBack = Math.floor(bucket.leased)
      bucket.leased -= giveBack
      returns.push(store.lease(id, bucket.limit.rate, bucket.limit.burst, 0, giveBack).catch((error: unknown) => this.options.onStoreError?.(error)))
    }
    await Promise.all(returns)
  }
}
