/**
 * Rate limits in the route map: a token bucket (`rate` tokens per second,
 * `burst` tokens at most) per limit kind, checked after the key, the route and
 * the scope, before anything is forwarded.
 *
 *   key     each key on its own
 *   tenant  all keys of the key's tenant together (its sub-account, or its agency for an agency key)
 *   agency  all keys of the key's agency together, sub-accounts' keys included (a cap on their sum)
 *
 * A route's `rateLimit` sets any of the three; a top-level `rateLimits`
 * gives defaults per scope, which a route's own settings replace kind by
 * kind. Buckets are per route prefix. Checked once at start: a bad value
 * stops the gateway with a line that names it. A key may carry a `key` limit
 * of its own, with the same bounds (rate-limit.ts), which replaces the
 * route's for that key (gateway/src/rate-limit/buckets.ts). Shared, as
 * agency-service reads the same file to show the console these numbers.
 */
import type { RateLimit } from './rate-limit.js'
import { BURST_RULE, isBurst, isRate, RATE_RULE } from './rate-limit.js'
import type { Scope } from './scope.js'
import { isScope, scopes } from './scope.js'

export const limitKinds = ['key', 'tenant', 'agency'] as const
export type LimitKind = (typeof limitKinds)[number]

/** Tokens added per second (`rate`) and the most the bucket holds (`burst`): the same bounds as a key's own limit. */
export type Limit = RateLimit

export type RouteLimits = Readonly<Partial<Record<LimitKind, Limit>>>

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function checkLimit(value: unknown, where: string): Limit {
  if (!isObject(value)) throw new Error(`${where} must be a mapping { rate, burst }`)
  const extra = Object.keys(value).find((field) => field !== 'rate' && field !== 'burst')
  if (extra !== undefined) throw new Error(`${where}: unknown field ${JSON.stringify(extra)} (allowed: rate, burst)`)
  const { rate, burst } = value
  if (!isRate(rate)) throw new Error(`${where}.rate must be ${RATE_RULE}`)
  if (!isBurst(burst)) throw new Error(`${where}.burst must be ${BURST_RULE}`)
  return Object.freeze({ rate, burst })
}

/** A `rateLimit` mapping (of a route, or a scope's default); undefined stays undefined. */
export function parseLimits(value: unknown, where: string): RouteLimits | undefined {
  if (value === undefined) return undefined
  if (!isObject(value)) throw new Error(`${where} must be a mapping of ${limitKinds.join(', ')}`)
  const limits: Partial<Record<LimitKind, Limit>> = {}
  for (const [kind, limit] of Object.entries(value)) {
    if (!(limitKinds as readonly string[]).includes(kind))
      throw new Error(`${where}: unknown limit ${JSON.stringify(kind)} (allowed: ${limitKinds.join(', ')})`)
    limits[kind as LimitKind] = checkLimit(limit, `${where}.${kind}`)
  }
  return Object.freeze(limits)
}

/** The top-level `rateLimits`: defaults per scope. */
export function parseScopeDefaults(value: unknown): Readonly<Partial<Record<Scope, RouteLimits>>> {
  if (value === undefined) return {}
  if (!isObject(value)) throw new Error(`rateLimits must be a mapping of ${scopes.join(', ')}`)
  const defaults: Partial<Record<Scope, RouteLimits>> = {}
  for (const [scope, limits] of Object.entries(value)) {
    if (!isScope(scope)) throw new Error(`rateLimits: unknown scope ${JSON.stringify(scope)} (expected ${scopes.join(' or ')})`)
    defaults[scope] = parseLimits(limits, `rateLimits.${scope}`)!
  }
  return Object.freeze(defaults)
}

/** A route's limits: its scope's defaults, with the route's own settings replacing them kind by kind; empty means unlimited. */
export function effectiveLimits(own: RouteLimits | undefined, defaults: RouteLimits | undefined): RouteLimits {
  return Object.freeze({ ...defaults, ...own })
}

export function hasLimits(limits: RouteLimits): boolean {
  return limits.key !== undefined || limits.tenant !== undefined || limits.agency !== undefined
}
