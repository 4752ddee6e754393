/**
 * What a rate-limited route tells its callers, in the structured-field form
 * of draft-ietf-httpapi-ratelimit-headers-11 (the revision helper
 * auth-failure-throttle.ts follows too): `RateLimit-Policy` names each limit
 * of the request as a quota `q` (the bucket size) over a window `w` (seconds a
 * bucket takes to fill), and `RateLimit` gives what is left `r` and the
 * seconds `t` until the bucket is full again, as this replica knows it.
 * Bucket references are made once per key, route and key limit (bounded),
 * and the policy string once per such set, so the per-request cost is one
 * short string.
 *
 * A key's own rate limit (ActiveKeyState.rateLimit, set with `ctl key update
 * --rate --burst` or in the console) replaces the route's `key` limit on every
 * route of its scope, limited or not; the tenant and agency limits stay the
 * route's. Its bucket's id names the limit (`…|key|<key id>|<rate>/<burst>`):
 * a bucket never changes size under its id, so when the limit changes the
 * key starts on a new bucket of the new size at its next request, and a lease
 * this replica (or another) took from the old one is never spent again; its
 * unspent tokens go back to the old bucket within a second (the limiter's
 * sweep) and the old bucket expires in Redis once full. A key without its own
 * limit keeps the route's bucket id, exactly as before.
 */
import type { RateLimit } from '@scoped/shared/rate-limit'
import type { Tenant } from '@scoped/shared/tenant-signature'
import type { Limit, LimitKind } from './rate-limit-config.js'
import { hasLimits, limitKinds } from './rate-limit-config.js'
import type { BucketRef } from './rate-limiter.js'
import type { ScopedRoute } from './route-map.js'

/** The key as the buckets see it: its tenant, and its own rate limit when it has one. */
export interface LimitedKey {
  readonly tenant: Tenant
  readonly rateLimit?: RateLimit | undefined
}

const policies = new WeakMap<readonly BucketRef[], string>()

function windowSeconds(rate: number, burst: number): number {
  return Math.max(1, Math.ceil(burst / rate))
}

/** Whether a request of this key on this route takes tokens at all: the route has limits, or the key has its own. */
export function isLimited(route: ScopedRoute, key: LimitedKey): boolean {
  return key.rateLimit !== undefined || hasLimits(route.rateLimits)
}

/** The RateLimit-Policy of a request: each of its buckets' limits, in the order they are taken. */
export function rateLimitPolicy(refs: readonly BucketRef[]): string {
  let policy = policies.get(refs)
  if (policy === undefined) {
    policy = refs.map(({ kind, limit }) => `"${kind}";q=${limit.burst};w=${windowSeconds(limit.rate, limit.burst)}`).join(', ')
    policies.set(refs, policy)
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

/** The key's own limit in a bucket id or cache key: `|<rate>/<burst>`, or nothing without one. */
function limitSuffix(limit: RateLimit | undefined): string {
  return limit === undefined ? '' : `|${limit.rate}/${limit.burst}`
}

/** The buckets a request of this key on this route takes a token from. */
export function bucketRefs(route: ScopedRoute, key: LimitedKey): readonly BucketRef[] {
  const own = key.rateLimit
  const suffix = limitSuffix(own)
  const id = `${route.index}|${key.tenant.keyId}${suffix}`
  let refs = cachedRefs.get(id)
  if (refs === undefined) {
    const limitOf = (kind: LimitKind): Limit | undefined => (kind === 'key' && own !== undefined ? own : route.rateLimits[kind])
    refs = limitKinds
      .filter((kind) => limitOf(kind) !== undefined)
      .map((kind) => ({
        id: `${route.prefix}|${kind}|${subject(kind, key.tenant)}${kind === 'key' ? suffix : ''}`,
        kind,
        limit: limitOf(kind)!,
      }))
    if (cachedRefs.size >= MAX_CACHED) cachedRefs.delete(cachedRefs.keys().next().value!)
    cachedRefs.set(id, refs)
  }
  return refs
}
