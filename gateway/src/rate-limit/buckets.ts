/**
 * Which buckets a request takes a token from: one per limit kind of its
 * route, per subject (the key, its tenant, its agency), per route prefix.
 * The references are made once per key, route and key limit (a bounded
 * cache), so a request costs one Map lookup here.
 *
 * A key's own rate limit (ActiveKeyState.rateLimit, set with `ctl key update
 * --rate --burst` or in the console) replaces the route's `key` limit on every
 * route of its scope, limited or not; the tenant and agency limits stay the
 * route's. Its bucket's id names the limit (`…|key|<key id>|<rate>/<burst>`):
 * a bucket never changes size under its id, so when the limit changes the
 * key starts on a new bucket of the new size at its next request, and a lease
 * this replica (or another) took from the old one is never spent again; its
 * unspent tokens go back to the old bucket within a second (the limiter's
 * sweep) and the old bucket expires in the store once full. A key without its
 * own limit keeps the route's bucket id, exactly as before.
 */
import type { RateLimit } from '@scoped/shared/rate-limit'
import type { Tenant } from '@scoped/shared/tenant-signature'
import type { ScopedRoute } from '../route-map.js'
import type { Limit, LimitKind } from '@scoped/shared/route-limits'
import { hasLimits, limitKinds } from '@scoped/shared/route-limits'

export interface BucketRef {
  /**
   * Unique per route, kind and subject (the key, the tenant, the agency), and
   * never given another limit: a bucket is sized once (in the limiter and in
   * the store), so a key whose own limit changes gets a new id.
   */
  id: string
  kind: LimitKind
  limit: Limit
}

/** The key as the buckets see it: its tenant, and its own rate limit when it has one. */
export interface LimitedKey {
  readonly tenant: Tenant
  readonly rateLimit?: RateLimit | undefined
}

/** Whether a request of this key on this route takes tokens at all: the route has limits, or the key has its own. */
export function isLimited(route: ScopedRoute, key: LimitedKey): boolean {
  return key.rateLimit !== undefined || hasLimits(route.rateLimits)
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

function makeRefs(route: ScopedRoute, key: LimitedKey, suffix: string): readonly BucketRef[] {
  const own = key.rateLimit
  const refs: BucketRef[] = []
  for (const kind of limitKinds) {
    const limit = kind === 'key' && own !== undefined ? own : route.rateLimits[kind]
    if (limit === undefined) continue
    refs.push({ id: `${route.prefix}|${kind}|${subject(kind, key.tenant)}${kind === 'key' ? suffix : ''}`, kind, limit })
  }
  return refs
}

/** The buckets a request of this key on this route takes a token from, in the order they are taken. */
export function bucketRefs(route: ScopedRoute, key: LimitedKey): readonly BucketRef[] {
  const suffix = limitSuffix(key.rateLimit)
  const id = `${route.index}|${key.tenant.keyId}${suffix}`
  let refs = cachedRefs.get(id)
  if (refs === undefined) {
    refs = makeRefs(route, key, suffix)
    if (cachedRefs.size >= MAX_CACHED) cachedRefs.delete(cachedRefs.keys().next().value!)
    cachedRefs.set(id, refs)
  }
  return refs
}
