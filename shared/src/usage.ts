/**
 * Usage counting's vocabulary, shared by the gateway (which counts) and
 * agency-service and ctl (which read): the outcomes the contract names, the
 * status classes, and the fixed log-scale latency histogram. Bucket i counts
 * the answers that took at most LATENCY_BASE_MS × 2^(i/2) ms; the last bucket
 * counts everything slower. Histograms of the same shape add element by
 * element, so a percentile over any range of buckets and replicas is merged
 * exactly, never averaged; it is read as the upper bound of the bucket that
 * holds it (within a factor √2 of the true value).
 */

/** The contract's outcomes, in the order answers show them. */
export const usageOutcomes = [
  'served',
  'revoked',
  'expired',
  'address-refused',
  'scope-refused',
  'permission-refused',
  'rate-limited',
  'bad-request',
  'timeout',
] as const
export type UsageOutcome = (typeof usageOutcomes)[number]

export function isUsageOutcome(value: unknown): value is UsageOutcome {
  return typeof value === 'string' && (usageOutcomes as readonly string[]).includes(value)
}

export const statusClasses = ['2xx', '3xx', '4xx', '5xx'] as const
export type StatusClass = (typeof statusClasses)[number]

/** The first 0.5 ms, then buckets √2 apart, up to about 92 s, then one for anything slower. */
export const LATENCY_BASE_MS = 0.5
export const LATENCY_BUCKETS = 36

/** The bucket of an answer that took `ms` milliseconds. */
export function latencyBucket(ms: number): number {
  if (!(ms > LATENCY_BASE_MS)) return 0
  const index = Math.ceil(2 * Math.log2(ms / LATENCY_BASE_MS))
  return index < LATENCY_BUCKETS - 1 ? index : LATENCY_BUCKETS - 1
}

/** The upper bound of bucket `index`, in milliseconds (the last bucket is open: its lower bound is said). */
export function latencyBucketBound(index: number): number {
  const bounded = Math.min(index, LATENCY_BUCKETS - 2)
  return Math.round(LATENCY_BASE_MS * 2 ** (bounded / 2) * 1000) / 1000
}

/** The `q` quantile (0 < q ≤ 1) of a histogram, in milliseconds; null when it holds nothing. */
export function latencyQuantile(histogram: ArrayLike<number>, q: number): number | null {
  let total = 0
  for (let i = 0; i < histogram.length; i++) total += histogram[i]!
  if (total === 0) return null
  const rank = Math.max(1, Math.ceil(q * total))
  let seen = 0
  for (let i = 0; i < histogram.length; i++) {
    seen += histogram[i]!
    if (seen >= rank) return latencyBucketBound(i)
  }
  return latencyBucketBound(histogram.length - 1)
}

/** The contract's status class of a status code; 1xx answers are counted in `requests` but have no class of their own. */
export function statusClassOf(status: number): StatusClass | null {
  const index = Math.floor(status / 100) - 2
  return statusClasses[index] ?? null
}
