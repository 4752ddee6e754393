/** Small statistics helpers shared by the benchmark's steps. */

/** The value at quantile `q` (0..1) of an ascending array: nearest rank. */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return 0
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[rank]!
}

export function median(values: readonly number[]): number {
  return quantile(
    [...values].sort((a, b) => a - b),
    0.5,
  )
}

export interface Latency {
  p50Ms: number
  p99Ms: number
  p999Ms: number
  maxMs: number
}

/** Percentiles of latencies in milliseconds (the array is sorted in place). */
export function latency(samples: Float64Array | number[]): Latency {
  const sorted = samples instanceof Float64Array ? samples.sort() : samples.sort((a, b) => a - b)
  return { p50Ms: quantile(sorted, 0.5), p99Ms: quantile(sorted, 0.99), p999Ms: quantile(sorted, 0.999), maxMs: quantile(sorted, 1) }
}
