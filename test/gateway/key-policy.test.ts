/**
 * The gateway's decision with a key's own limits, as a pure function: an
 * expired key is refused like a revoked one (401) from its instant, a key
 * used from outside its allowlist gets 403, and both come before the route
 * is matched (so a caller with such a key learns nothing about the map) and
 * before the scope.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { errorCatalog } from '@scoped/shared/errors'
import type { ActiveKeyState } from '@scoped/shared/key-state'
import { authorize } from '@scoped/gateway/gate'
import { isExpired, keyPolicyRefusal } from '@scoped/gateway/key-policy'
import { AUTH_FAILURES, refusals } from '@scoped/gateway/outcomes'
import type { ScopedRoute } from '@scoped/gateway/route-map'

const tenant = { scope: 'SUB-ACCOUNT' as const, agencyId: randomUUID(), subAccountId: randomUUID(), keyId: randomUUID() }
const agentsRoute = { prefix: '/v1/agents', scope: 'SUB-ACCOUNT', auth: 'key' } as unknown as ScopedRoute
const agencyRoute = { prefix: '/v1/agency', scope: 'AGENCY', auth: 'key' } as unknown as ScopedRoute
const now = Date.parse('2030-06-01T12:00:00Z')

t.test('expiry: refused from its instant, like a revoked key', async (t) => {
  const state: ActiveKeyState = { status: 'active', tenant, expiresAt: now }
  t.equal(authorize(agentsRoute, state, now - 1, '10.0.0.1', 'GET'), 'valid', 'one millisecond before: valid')
  t.equal(authorize(agentsRoute, state, now, '10.0.0.1', 'GET'), 'expired', 'at the instant: expired')
  t.equal(authorize(agentsRoute, state, now + 86_400_000, '10.0.0.1', 'GET'), 'expired', 'and after')
  t.equal(authorize(undefined, state, now, '10.0.0.1', 'GET'), 'expired', 'before the route: no 404 for an expired key')
  t.equal(authorize(agencyRoute, state, now, '10.0.0.1', 'GET'), 'expired', 'before the scope')
  t.same(refusals.expired, errorCatalog.revokedKey, '401 Invalid or revoked API key')
  t.equal(refusals.expired.message, 'Invalid or revoked API key')
  t.notOk(AUTH_FAILURES.has('expired'), 'a known key, like a revoked one: no failed authentication for the throttle')
  t.equal(isExpired(null, now), false)
  t.equal(isExpired(undefined, now), false)
})

t.test('allowlist: IPv4 and IPv6 clients, 403 before the route and the scope', async (t) => {
  const state: ActiveKeyState = { status: 'active', tenant, allowedCidrs: ['10.0.0.0/8', '2001:db8::/32'] }
  const rows: Array<[string, ScopedRoute | undefined, string]> = [
    ['10.1.2.3', agentsRoute, 'valid'],
    ['2001:db8::7', agentsRoute, 'valid'],
    ['192.0.2.1', agentsRoute, 'not-allowed-address'],
    ['2001:db9::7', agentsRoute, 'not-allowed-address'],
    ['0.0.0.0', agentsRoute, 'not-allowed-address'],
    ['192.0.2.1', undefined, 'not-allowed-address'],
    ['192.0.2.1', agencyRoute, 'not-allowed-address'],
    ['10.1.2.3', undefined, 'no-route'],
    ['10.1.2.3', agencyRoute, 'scope-mismatch'],
  ]
  for (const [client, route, outcome] of rows)
    t.equal(authorize(route, state, now, client, 'GET'), outcome, `${client} on ${route?.prefix ?? 'no route'}: ${outcome}`)
  t.same(refusals['not-allowed-address'], { status: 403, message: 'This API key cannot be used from this address' })
  t.notOk(AUTH_FAILURES.has('not-allowed-address'), 'a genuine key at the wrong address is not a guess at keys')
})

t.test('no limits: any address, any time; an empty allowlist is any address', async (t) => {
  for (const state of [
    { status: 'active', tenant },
    { status: 'active', tenant, expiresAt: null, allowedCidrs: [] },
  ] as ActiveKeyState[]) {
    t.equal(keyPolicyRefusal(state, now, '198.51.100.1'), undefined)
    t.equal(keyPolicyRefusal(state, now, '2001:db8::1'), undefined)
  }
})

t.test('both limits: the expiry is decided first', async (t) => {
  const state: ActiveKeyState = { status: 'active', tenant, expiresAt: now, allowedCidrs: ['10.0.0.0/8'] }
  t.equal(keyPolicyRefusal(state, now, '192.0.2.1'), 'expired')
  t.equal(keyPolicyRefusal(state, now - 1, '192.0.2.1'), 'not-allowed-address')
  t.equal(keyPolicyRefusal(state, now - 1, '10.9.9.9'), undefined)
})

t.test('ended and unknown keys are decided as before', async (t) => {
  t.equal(authorize(agentsRoute, { status: 'revoked' }, now, '10.0.0.1', 'GET'), 'revoked')
  t.equal(authorize(agentsRoute, { status: 'deleted' }, now, '10.0.0.1', 'GET'), 'deleted')
  t.equal(authorize(agentsRoute, { status: 'unknown' }, now, '10.0.0.1', 'GET'), 'unknown')
  t.equal(authorize(agentsRoute, { status: 'unavailable' }, now, '10.0.0.1', 'GET'), 'unavailable')
})

t.test('one allowlist answers the same for every request after the first', async (t) => {
  // The parsed matcher is kept per cached state (its speed is the benchmark's business, not a test's).
  const cidrs = ['10.0.0.0/8']
  const state: ActiveKeyState = { status: 'active', tenant, allowedCidrs: cidrs }
  const answers = new Set<string>()
  for (let i = 0; i < 1_000; i++) answers.add(`${i % 2}:${keyPolicyRefusal(state, now, i % 2 === 0 ? '10.0.0.1' : '192.0.2.1') ?? 'allowed'}`)
  t.same([...answers].sort(), ['0:allowed', '1:not-allowed-address'])
})
