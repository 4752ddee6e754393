/**
 * Throttling of failed authentication per client address (an IPv6 client by
 * its /64, which one host can rotate through at will), so that a client
 * cannot try keys (or flood the key store with lookups) at full speed:
 * after `limit` failures within `windowMs` of its first failure, a client
 * address is refused with 429 `Too many failed authentication attempts` and
 * `Retry-After` until that window ends. Defaults: 20 failures per 60 s.
 *
 * The request path must not wait for Redis: this is a ClientThrottle
 * (shared/src/client-throttle.ts), which decides from local state and shares
 * the count between replicas through Redis in the background, so N replicas
 * together admit at most limit + N - 1 failures per window, and each replica
 * still throttles on its own count when Redis is down. The Redis key is
 * `${prefix}auth-fail:<hex SHA-256 of the address>`.
 *
 * A refusal's headers (`RateLimit-Policy: "failed-auth";q=20;w=60`,
 * `RateLimit`, `Retry-After`) are written by headers.ts, as the route limits'
 * are.
 */
import { ClientThrottle } from '@scoped/shared/client-throttle'
import type { ClientThrottleOptions } from '@scoped/shared/client-throttle'

export { DEFAULT_MAX_TRACKED } from '@scoped/shared/client-throttle'
export type { ThrottleCheck } from '@scoped/shared/client-throttle'

export const DEFAULT_LIMIT = 20
export const DEFAULT_WINDOW_MS = 60_000

export type AuthFailureThrottleOptions = Partial<Omit<ClientThrottleOptions, 'name'>>

export class AuthFailureThrottle extends ClientThrottle {
  constructor(options: AuthFailureThrottleOptions = {}) {
    super({ ...options, name: 'auth-fail', limit: options.limit ?? DEFAULT_LIMIT, windowMs: options.windowMs ?? DEFAULT_WINDOW_MS })
  }

  /** Counts one failed authentication of the client; with Redis, also updates the shared count, without waiting. */
  recordFailure(address: string): void {
    this.count(address)
  }
}
