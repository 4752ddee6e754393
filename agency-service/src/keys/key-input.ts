/**
 * The checks of what a caller asks of a key (an expiry, an allowlist, a rate
 * limit, a grace period), the same for the CLI, the console and the API. A
 * refusal is a 400 whose `field` is the service's name for the input
 * (`expiresAt`, `allowedCidrs`, `rateLimit.rate`, …) and whose message names
 * it as the caller's input does (KeyFieldNames: `--expires-at`, `The expiry`).
 */
import type { InputField } from '@scoped/shared/errors'
import { invalidField } from '@scoped/shared/errors'
import { requireCidrList } from '@scoped/shared/ip-address'
import type { RateLimit } from '@scoped/shared/rate-limit'
import { requireRateLimit } from '@scoped/shared/rate-limit'
import { MAX_GRACE_SECONDS } from './key-status.js'

/** A rate limit as given by a caller: checked by the service (requireRateLimit), so any value may come in. */
export interface RateLimitInput {
  rate: unknown
  burst: unknown
}

/** How the caller's input names the fields, for messages (`body.expiresAt`, `--allow-cidr`, `--rate`). */
export interface KeyFieldNames {
  expiresAt?: string
  allowedCidrs?: string
  rate?: string
  burst?: string
  permissions?: string
  name?: string
}

/** The service's names of a key's input fields: what ApiError.field says. */
export type KeyField = 'name' | 'expiresAt' | 'allowedCidrs' | 'rateLimit.rate' | 'rateLimit.burst' | 'graceSeconds'

function labelled(name: KeyField, label: string | undefined): InputField {
  return { name, label: label ?? name }
}

/** An expiry must be in the future (`nowMs`, the service's clock); null: never. */
export function checkedExpiry(expiresAt: Date | null | undefined, nowMs: number, fields: KeyFieldNames | undefined): Date | null {
  if (expiresAt === undefined || expiresAt === null) return null
  if (!(expiresAt.getTime() > nowMs)) throw invalidField(labelled('expiresAt', fields?.expiresAt), 'must be in the future')
  return expiresAt
}

/** An allowlist in its one spelling; undefined or null: any address (empty). */
export function checkedCidrs(allowedCidrs: unknown, fields: KeyFieldNames | undefined): string[] {
  if (allowedCidrs === undefined || allowedCidrs === null) return []
  return requireCidrList(allowedCidrs, labelled('allowedCidrs', fields?.allowedCidrs))
}

/** A key's own rate limit; undefined or null: none (the routes file's). */
export function checkedRateLimit(input: RateLimitInput | null | undefined, fields: KeyFieldNames | undefined): RateLimit | null {
  if (input === undefined || input === null) return null
  return requireRateLimit(input.rate, input.burst, {
    rate: labelled('rateLimit.rate', fields?.rate),
    burst: labelled('rateLimit.burst', fields?.burst),
  })
}

/** A roll's grace period in whole seconds, 0 to 30 days; anything else is a 400. */
export function requireGraceSeconds(value: unknown, field = 'graceSeconds'): number {
  if (value === undefined || value === null) return 0
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_GRACE_SECONDS) {
    throw invalidField(labelled('graceSeconds', field), `must be a whole number of seconds from 0 to ${MAX_GRACE_SECONDS} (30 days)`)
  }
  return value
}
