/**
 * The one writer of RateLimit-Policy, RateLimit and Retry-After
 * (draft-ietf-httpapi-ratelimit-headers-11): its items, a route's headers from
 * its buckets (a key's own limit in place of the route's `key` limit), and the
 * failed-authentication throttle's 429, all in one form.
 */
import t from 'tap'
import { parseRouteMap } from '@scoped/gateway/route-map'
import type { ScopedRoute } from '@scoped/gateway/route-map'
import { bucketRefs, isLimited } from '@scoped/gateway/rate-limit/buckets'
import { failedAuthHeaders, policyItem, rateLimitPolicy, rateLimitState, retryAfter, stateItem } from '@scoped/gateway/rate-limit/headers'

t.test('items: non-negative integers, the window at least 1 s, seconds rounded up', async (t) => {
  const rows: Array<[string, string, string]> = [
    [policyItem('key', 100, 2), '"key";q=100;w=2', 'a bucket of 100 that fills in 2 s'],
    [policyItem('tenant', 20, 0.2), '"tenant";q=20;w=1', 'a window under a second is 1'],
    [policyItem('agency', 5, 2.5), '"agency";q=5;w=3', 'rounded up'],
    [stateItem('key', 57, 1), '"key";r=57;t=1', 'what is left and when it is whole'],
    [stateItem('failed-auth', -3, 1.2), '"failed-auth";r=0;t=2', 'never negative; rounded up'],
    [stateItem('key', 1e20, 1), '"key";r=999999999999999;t=1', 'at most 15 digits'],
    [retryAfter(0.1), '1', 'Retry-After in whole seconds, rounded up'],
    [retryAfter(42), '42', 'unchanged when whole'],
  ]
  for (const [written, expected, why] of rows) t.equal(written, expected, why)
})

t.test('a route: one item per bucket, in the order they are taken; a key with its own limit names it `key`', async (t) => {
  const map = parseRouteMap(
    `routes:
  - prefix: /v1/agents
    scope: SUB-ACCOUNT
    upstream: "http://127.0.0.1:1"
    rateLimit:
      key: { rate: 50, burst: 100 }
      tenant: { rate: 200, burst: 400 }
  - { prefix: /v1/calls, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }
`,
    'routes.yaml',
  )
  const [agents, calls] = map.routes as ScopedRoute[]
  const tenant = { scope: 'SUB-ACCOUNT' as const, agencyId: 'a', subAccountId: 's', keyId: 'k' }
  const refs = bucketRefs(agents!, { tenant })
  t.equal(rateLimitPolicy(refs), '"key";q=100;w=2, "tenant";q=400;w=2')
  t.equal(
    rateLimitState(refs, (ref) => (ref.kind === 'key' ? 57 : 400)),
    '"key";r=57;t=1, "tenant";r=400;t=0',
  )
  t.equal(
    rateLimitState(refs, () => 10_000),
    '"key";r=100;t=0, "tenant";r=400;t=0',
    'never more than the bucket holds',
  )
  t.equal(bucketRefs(agents!, { tenant }), refs, 'made once per key and route')
  t.same(
    refs.map((ref) => ref.id),
    ['/v1/agents|key|k', '/v1/agents|tenant|s'],
  )

  t.notOk(isLimited(calls!, { tenant }), 'a route without limits takes no tokens')
  const own = { tenant, rateLimit: { rate: 1, burst: 10 } }
  t.ok(isLimited(calls!, own), 'unless the key has a limit of its own')
  const ownRefs = bucketRefs(agents!, own)
  t.equal(rateLimitPolicy(ownRefs), '"key";q=10;w=10, "tenant";q=400;w=2', "the key's own limit replaces the route's key limit")
  t.equal(ownRefs[0]!.id, '/v1/agents|key|k|1/10', 'on a bucket whose id names its size')
})

t.test("the failed-authentication throttle's 429 in the same form, with Retry-After", async (t) => {
  t.same(failedAuthHeaders(20, 60, 42), {
    'ratelimit-policy': '"failed-auth";q=20;w=60',
    ratelimit: '"failed-auth";r=0;t=42',
    'retry-after': '42',
  })
})
