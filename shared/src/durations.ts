/**
 * Durations on the command line (the contract): an integer and a unit, `s`,
 * `m`, `h` or `d` (`5s`, `24h`, `90d`). Nothing else: no fractions, no
 * spaces, no combined units, no leading zeros.
 */
import type { InputField } from './errors.js'
import { invalidField } from './errors.js'

const UNIT_SECONDS = { s: 1, m: 60, h: 3_600, d: 86_400 } as const

const DURATION = /^(0|[1-9][0-9]{0,9})([smhd])$/

/** The number of seconds `text` means, or undefined when it is not a duration. */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text)
  if (match === null) return undefined
  return Number(match[1]) * UNIT_SECONDS[match[2] as keyof typeof UNIT_SECONDS]
}

/** A duration given as input, in seconds, from `minSeconds` to `maxSeconds`; anything else is a 400 naming `field`. */
export function requireDuration(text: unknown, field: InputField, minSeconds: number, maxSeconds: number): number {
  const seconds = typeof text === 'string' ? parseDuration(text) : undefined
  if (seconds === undefined) throw invalidField(field, 'must be an integer and a unit (s, m, h or d), such as 30s, 24h or 90d')
  if (seconds < minSeconds || seconds > maxSeconds) {
    throw invalidField(field, `must be from ${describeSeconds(minSeconds)} to ${describeSeconds(maxSeconds)}`)
  }
  return seconds
}

/** Seconds in the largest unit that divides them exactly: 86400 is `1d`, 90 is `90s`. */
export function describeSeconds(seconds: number): string {
  for (const unit of ['d', 'h', 'm'] as const) {
    if (seconds !== 0 && seconds % UNIT_SECONDS[unit] === 0) return `${seconds / UNIT_SECONDS[unit]}${unit}`
  }
  return `${seconds}s`
}
