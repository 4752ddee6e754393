/**
 * What a rate-limited route tells its callers, in the structured-field form
 * of draft-ietf-httpapi-ratelimit-headers-11 (the revision helper
 * auth-failure-throttle.ts follows too): `RateLimit-Policy` names each limit
 * of the route as a quota `q` (the bucket size) over a window `w` (seconds a
 * bucket takes to fill), and `RateLimit` gives what is left `r` and the
 * seconds `t` until the bucket is full again, as this replica knows it.
 * Policy strings are made once per route, bucket references once per key and
 * route (bounded), so the per-request cost is one short string.
 */
import type { Tenant } from '@scoped/shared/tenant-signature'
import type { LimitKind } from './rate-limit-config.js'
import { limitKinds } from './rate-limit-config.js'
import type { BucketRef } from './rate-limiter.js'
import type { ScopedRoute } from './route-map.js'

const policies = new WeakMap<ScopedRoute, string>()

function windowSeconds(rate: number, burst: number): number {
  return Math.max(1, Math.ceil(burst / rate))
}

export function rateLimitPolicy(route: ScopedRoute): string {
  let policy = policies.get(route)
  if (policy === undefined) {
    policy = limitKinds
      .filter((kind) => route.rateLimits[kind] !== undefined)
      .map((kind) => {
        const { rate, burst } = route.rateLimits[kind]!
        return `"${kind}";q=${burst};w=${windowSeconds(rate, burst)}`
      })
      .join(', ')
    policies.set(route, policy)
  }
  return policy
}

export function rateLimitState(refs: readonly BucketRef[], remaining: (ref: BucketRef) => number): string {
  let state = ''
  for (const ref of refs) {
    const left = Math.min(ref.limit.burst, remaining(ref))
    const full = Math.ceil((ref.limit.burst - left) / ref.limit.rate)
    state += `${state === '' ? '' : ', '}"${ref.kind}";r=${left};t=${full}`
  }
  return state
}

function subject(kind: LimitKind, tenant: Tenant): string {
  if (kind === 'key') return tenant.keyId
  if (kind === 'tenant') return tenant.subAccountId ?? tenant.agencyId
  return tenant.agencyId
}

const MAX_CACHED = 100_000
const cachedRefs = new Map<string, readonly BucketRef[]>()

/** The buckets a request of this key on this route takes a token from. */
export function bucketRefs(route: ScopedRoute, tenant: Tenant): readonly BucketRef[] {
  const id = `${route.index}|${tenant.keyId}`
  let refs = cachedRefs.get(id)
  if (refs === undefined) {
    refs = limitKinds
      .filter((kind) => route.rateLimits[kind] !== undefined)
      .map((kind) => ({ id: `${route.prefix}|${kind}|${subject(kind, tenant)}`, kind, limit: route.rateLimits[kind]! }))
    if (cachedRefs.size >= MAX_CACHED) cachedRefs.delete(cachedRefs.keys().next().value!)
    cachedRefs.set(id, refs)
  }
  return refs
}
