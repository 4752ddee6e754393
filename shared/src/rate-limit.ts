/**
 * A token-bucket limit: `rate` tokens added per second, `burst` tokens at
 * most. The routes file sets them per route (route-limits.ts);
 * a key may carry its own, which replaces the route's `key` limit for that key
 * (api_keys.rate_limit_rate and rate_limit_burst, migration 007). One set of
 * bounds for both, held by the routes file validator, the key service and the
 * database's CHECK constraints alike.
 */
import type { InputField } from './errors.js'
import { invalidField } from './errors.js'

export interface RateLimit {
  /** Tokens added per second: above 0, at most MAX_RATE (fractions allowed: 0.5 is one every 2 s). */
  readonly rate: number
  /** The most tokens the bucket holds: a whole number from 1 to MAX_BURST. */
  readonly burst: number
}

export const MAX_RATE = 1_000_000
export const MAX_BURST = 10_000_000

export const RATE_RULE = `a number of tokens per second above 0 and at most ${MAX_RATE}`
export const BURST_RULE = `a whole number of tokens from 1 to ${MAX_BURST}`

export function isRate(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 && value <= MAX_RATE
}

export function isBurst(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= MAX_BURST
}

/** A decimal number as typed on a command line or in a form (`50`, `0.5`); NaN for anything else (`1e3`, `0x10`, ` 5`, ``). */
export function parseDecimal(text: string): number {
  return /^(0|[1-9][0-9]{0,15})(\.[0-9]{1,15})?$/.test(text) ? Number(text) : Number.NaN
}

/**
 * A key's own limit given as input, checked; a 400 naming `fields.rate` or
 * `fields.burst` (`--rate`, `body.rateLimit.rate`, …) when out of bounds.
 */
export function requireRateLimit(rate: unknown, burst: unknown, fields: { rate: InputField; burst: InputField } = { rate: 'rate', burst: 'burst' }): RateLimit {
  if (!isRate(rate)) throw invalidField(fields.rate, `must be ${RATE_RULE}`)
  if (!isBurst(burst)) throw invalidField(fields.burst, `must be ${BURST_RULE}`)
  return Object.freeze({ rate, burst })
}

export function sameRateLimit(a: RateLimit | null | undefined, b: RateLimit | null | undefined): boolean {
  if (a === null || a === undefined || b === null || b === undefined) return (a ?? null) === (b ?? null)
  return a.rate === b.rate && a.burst === b.burst
}
