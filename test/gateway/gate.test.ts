/**
 * The gate alone (gate.ts), in this process through fastify.inject, with a
 * fake of the gateway's Verifier (fake-verifier.ts), rate limits over the
 * lease store in memory on a clock the test holds, and a stand-in for the
 * forwarder that answers with the decision it was handed. Every refusal, the
 * order of the steps, and what the decision carries; the real stack's tests
 * (gateway.test.ts, rate-limits.test.ts, …) drive the same rules over HTTPS.
 */
import t from 'tap'
import type { Test } from 'tap'
import Fastify from 'fastify'
import type { FastifyInstance } from 'fastify'
import { errorEnvelopePlugin } from '@scoped/shared/error-envelope-plugin'
import { createLogger } from '@scoped/shared/logger'
import { parseTrustedProxies } from '@scoped/gateway/client-address'
import { MAX_REQUEST_TARGET } from '@scoped/gateway/config'
import { DOCUMENT_ROUTE } from '@scoped/gateway/documents'
import { FORWARDED_METHODS, gatePlugin } from '@scoped/gateway/gate'
import { GatewayMetrics } from '@scoped/gateway/metrics'
import type { Refusal } from '@scoped/gateway/outcomes'
import { refusals } from '@scoped/gateway/outcomes'
import { IssuedKeyGate } from '@scoped/gateway/issued-keys/issued-key-gate'
import { IssuedKeyCounts } from '@scoped/gateway/issued-keys/issued-key-metrics'
import { UnknownKeyBudget } from '@scoped/gateway/issued-keys/unknown-key-budget'
import { AuthFailureThrottle } from '@scoped/gateway/rate-limit/auth-failure-throttle'
import { RateLimiter } from '@scoped/gateway/rate-limit/limiter'
import { MemoryLeaseStore } from '@scoped/gateway/rate-limit/memory-store'
import type { GateDecision } from '@scoped/gateway/request-state'
import { parseRouteMap } from '@scoped/gateway/route-map'
import type { KeyState } from '@scoped/shared/key-state'
import type { PresentedKey } from './fake-verifier.js'
import { active, agencyTenant, FakeVerifier, newKey, subAccountTenant } from './fake-verifier.js'

const ROUTES = `routes:
  - { prefix: /v1/agency, scope: AGENCY, upstream: "http://127.0.0.1:1" }
  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }
  - prefix: /v1/calls
    scope: SUB-ACCOUNT
    upstream: "http://127.0.0.1:1"
    rateLimit:
      key: { rate: 1, burst: 2 }
  - { prefix: /console, auth: session, upstream: "http://127.0.0.1:1" }
`

interface GateHarness {
  app: FastifyInstance
  verifier: FakeVerifier
  /** Keys whose use was recorded: [key id, client]. */
  uses: Array<[string, string]>
  /** The decision of every request, in order, once answered. */
  decisions: GateDecision[]
  draining: boolean
  /** What the issued-key filter says of keys it does not hold: never issued (loaded and current), or unsure. */
  outsideFilter: 'never-issued' | 'unsure'
  /** Hashes of keys the stores know that the filter has not heard of yet (created while the replica was not current). */
  filterLacks: Set<string>
  /** The unknown-key budget the gate takes from for unsure keys. */
  budget: UnknownKeyBudget
  /** A key the in-process cache holds with this state (no store lookup). */
  inMemory(state: KeyState): PresentedKey
  /** A key only the stores know, in the issued-key filter (or a key never issued, when `state` is undefined). */
  inStores(state?: KeyState | { status: 'unavailable' }): PresentedKey
}

async function gateHarness(t: Test, options: { trustedProxies?: string; budget?: UnknownKeyBudget } = {}): Promise<GateHarness> {
  const routes = parseRouteMap(ROUTES, 'routes.yaml')
  const verifier = new FakeVerifier()
  const clock = (): number => 0
  const limiter = new RateLimiter({ store: new MemoryLeaseStore({ now: clock }), replicas: () => 1, now: clock })
  t.teardown(() => limiter.close())
  const harness: GateHarness = {
    app: Fastify(),
    verifier,
    uses: [],
    decisions: [],
    draining: false,
    outsideFilter: 'never-issued',
    filterLacks: new Set(),
    budget: options.budget ?? new UnknownKeyBudget({ rate: 1_000, burst: 1_000, maxInFlight: 8, maxPerClient: 2 }),
    inMemory(state) {
      const key = newKey()
      verifier.memory.set(key.hash, state)
      return key
    },
    inStores(state) {
      const key = newKey()
      if (state !== undefined) verifier.stores.set(key.hash, state)
      return key
    },
  }
  const { app } = harness
  await app.register(errorEnvelopePlugin)
  await app.register(gatePlugin, {
    routes,
    verifier,
    lastUse: { record: (keyId, _now, client) => void harness.uses.push([keyId, client ?? '']) },
    throttle: new AuthFailureThrottle({ limit: 3 }),
    trustedProxies: parseTrustedProxies(options.trustedProxies),
    metrics: new GatewayMetrics(routes),
    log: createLogger('gateway', 'silent'),
    isDraining: () => harness.draining,
    limiter,
    // The filter holds exactly the keys the stores know: a key in neither was never issued.
    issuedKeys: new IssuedKeyGate(
      {
        verdict: (hash) => ((verifier.stores.has(hash) || verifier.memory.has(hash)) && !harness.filterLacks.has(hash) ? 'issued' : harness.outsideFilter),
      },
      harness.budget,
      new IssuedKeyCounts(),
    ),
  })
  // A document route, as documents.ts has; and in the forwarder's place, an answer naming what it was handed.
  app.get('/openapi.json', { config: DOCUMENT_ROUTE }, async () => ({ document: true }))
  app.route({ method: [...FORWARDED_METHODS], url: '/*', handler: async (request) => ({ passed: request.gateway?.kind }) })
  app.addHook('onResponse', async (request) => {
    if (request.gateway !== null) harness.decisions.push(request.gateway)
  })
  t.teardown(() => app.close())
  return harness
}

function expectRefusal(t: Test, response: { statusCode: number; json(): unknown; headers: Record<string, unknown> }, outcome: Refusal): void {
  t.equal(response.statusCode, refusals[outcome].status, `${outcome}: status`)
  t.same(response.json(), { success: false, message: refusals[outcome].message }, `${outcome}: the envelope`)
  if (response.statusCode === 401) t.equal(response.headers['www-authenticate'], 'Bearer')
}

t.test('every refusal, with its status, message and outcome, and the decision it leaves', async (t) => {
  const gate = await gateHarness(t)
  const revoked = gate.inMemory({ status: 'revoked' })
  const good = newKey().key
  const badChecksum = `${good.slice(0, -1)}${good.endsWith('0') ? '1' : '0'}`
  const rows: Array<{
    name: string
    outcome: Refusal
    kind: GateDecision['kind']
    url?: string
    method?: string
    headers?: Record<string, string>
    setup?: () => void
  }> = [
    { name: 'draining', outcome: 'draining', kind: 'refused', setup: () => (gate.draining = true) },
    { name: 'a request target too long', outcome: 'uri-too-long', kind: 'refused', url: `/v1/agents/${'a'.repeat(MAX_REQUEST_TARGET)}` },
    { name: 'a path with a dot segment', outcome: 'bad-path', kind: 'refused', url: '/v1//agents' },
    { name: 'a method never forwarded', outcome: 'method-not-allowed', kind: 'refused', method: 'TRACE' },
    { name: 'no key', outcome: 'missing', kind: 'refused', headers: {} },
    { name: 'two keys', outcome: 'malformed', kind: 'refused', headers: { authorization: `Bearer ${newKey().key}`, 'x-api-key': newKey().key } },
    { name: 'a bad checksum', outcome: 'malformed', kind: 'refused', headers: { 'x-api-key': badChecksum } },
    { name: 'a key never issued (outside the filter)', outcome: 'unknown', kind: 'refused', headers: gate.inStores().headers },
    { name: 'a false positive of the filter', outcome: 'unknown', kind: 'key-refused', headers: gate.inStores({ status: 'unknown' }).headers },
    { name: 'a revoked key', outcome: 'revoked', kind: 'key-refused', headers: revoked.headers },
    { name: 'a deleted key', outcome: 'deleted', kind: 'key-refused', headers: gate.inStores({ status: 'deleted' }).headers },
    {
      name: 'an expired key',
      outcome: 'expired',
      kind: 'key-refused',
      headers: gate.inMemory(active(subAccountTenant, { expiresAt: Date.now() - 1 })).headers,
    },
    {
      name: 'a key used from outside its allowlist',
      outcome: 'not-allowed-address',
      kind: 'key-refused',
      headers: gate.inMemory(active(subAccountTenant, { allowedCidrs: ['10.0.0.0/8'] })).headers,
    },
    { name: 'no route', outcome: 'no-route', kind: 'key-refused', url: '/v1/nothing', headers: gate.inMemory(active(subAccountTenant)).headers },
    { name: 'another scope', outcome: 'scope-mismatch', kind: 'key-refused', url: '/v1/agency', headers: gate.inMemory(active(subAccountTenant)).headers },
    { name: 'the stores cannot answer', outcome: 'unavailable', kind: 'key-refused', headers: gate.inStores({ status: 'unavailable' }).headers },
  ]
  for (const [index, row] of rows.entries()) {
    gate.draining = false
    row.setup?.()
    // A client of its own per row: the failed authentications of one do not throttle the next.
    const remoteAddress = `198.51.100.${index + 1}`
    const response = await gate.app.inject({ method: row.method ?? 'GET', url: row.url ?? '/v1/agents/x', headers: row.headers ?? {}, remoteAddress })
    expectRefusal(t, response, row.outcome)
    const decision = gate.decisions.at(-1)!
    t.same([decision.kind, decision.outcome], [row.kind, row.outcome], `${row.name}: the decision`)
  }
})

t.test('the order of the steps: the earlier step refuses, whatever else is wrong', async (t) => {
  const gate = await gateHarness(t)
  const expiredKey = gate.inMemory(active(subAccountTenant, { expiresAt: Date.now() - 1 }))
  const elsewhere = gate.inMemory(active(subAccountTenant, { allowedCidrs: ['10.0.0.0/8'] }))
  const subKey = gate.inMemory(active(subAccountTenant))
  const rows: Array<{ name: string; expected: Refusal; url: string; method?: string; headers?: Record<string, string>; draining?: boolean }> = [
    { name: 'draining before the path', expected: 'draining', url: '/v1//x', draining: true },
    { name: 'the target size before the path', expected: 'uri-too-long', url: `/v1//${'a'.repeat(MAX_REQUEST_TARGET)}` },
    { name: 'the path before the method', expected: 'bad-path', url: '/v1//x', method: 'TRACE' },
    { name: 'the method before the key', expected: 'method-not-allowed', url: '/v1/agents', method: 'TRACE' },
    { name: 'the key before the route: no key, no route', expected: 'missing', url: '/v1/nothing' },
    { name: 'the key before the route: an unknown key, no route', expected: 'unknown', url: '/v1/nothing', headers: gate.inStores().headers },
    { name: 'the key before the route: a document path with another method', expected: 'missing', url: '/openapi.json', method: 'POST' },
    { name: "the key's state before the scope", expected: 'revoked', url: '/v1/agency', headers: gate.inMemory({ status: 'revoked' }).headers },
    { name: "the key's expiry before the route", expected: 'expired', url: '/v1/nothing', headers: expiredKey.headers },
    { name: "the key's allowlist before the scope", expected: 'not-allowed-address', url: '/v1/agency', headers: elsewhere.headers },
    { name: 'the route before the scope', expected: 'no-route', url: '/v1/agencyx', headers: subKey.headers },
  ]
  for (const [index, row] of rows.entries()) {
    gate.draining = row.draining ?? false
    const remoteAddress = `198.51.100.${index + 1}`
    const response = await gate.app.inject({ method: row.method ?? 'GET', url: row.url, headers: row.headers ?? {}, remoteAddress })
    t.equal(gate.decisions.at(-1)!.outcome, row.expected, row.name)
    t.equal(response.statusCode, refusals[row.expected].status, `${row.name}: ${refusals[row.expected].status}`)
  }
})

t.test('what passes, and the decision it hands the forwarder', async (t) => {
  const gate = await gateHarness(t)
  const document = await gate.app.inject({ url: '/openapi.json' })
  t.same([document.statusCode, document.json(), gate.decisions.at(-1)!.kind], [200, { document: true }, 'document'], 'the API description needs no key')

  const console = await gate.app.inject({ method: 'POST', url: '/console/sign-in?agency_id=1' })
  const session = gate.decisions.at(-1)!
  t.same(console.json(), { passed: 'session' }, 'a console route needs no key')
  t.match(session, { kind: 'session', route: { prefix: '/console' }, target: { path: '/console/sign-in', query: 'agency_id=1' }, tenant: null })

  const key = gate.inMemory(active(subAccountTenant))
  gate.verifier.generation = 7
  const response = await gate.app.inject({ url: '/v1/%61gents/x?agency_id=9&a=1', headers: key.headers, remoteAddress: '192.0.2.4' })
  t.same(response.json(), { passed: 'key' })
  t.match(gate.decisions.at(-1), {
    kind: 'key',
    outcome: null,
    client: '192.0.2.4',
    target: { path: '/v1/agents/x', query: 'agency_id=9&a=1' },
    route: { prefix: '/v1/agents' },
    tenant: subAccountTenant,
    hash: key.hash,
    generation: 7,
    rateLimitPolicy: null,
  })
  t.same(gate.verifier.lookups, [], 'a key in memory is never looked up: the hook stays synchronous')
  t.same(gate.uses.at(-1), ['key-sub', '192.0.2.4'], 'its use is recorded')

  const fromStores = gate.inStores(active(agencyTenant))
  t.same((await gate.app.inject({ url: '/v1/agency/sub-accounts', headers: fromStores.headers })).json(), { passed: 'key' })
  t.same(gate.verifier.lookups, [fromStores.hash], 'a key not in memory is looked up once')
})

t.test('a use is recorded for a key within its own limits, whatever follows; never for one outside them', async (t) => {
  const gate = await gateHarness(t)
  const rows: Array<[string, string, KeyState, boolean]> = [
    ['on its route', '/v1/agents', active(subAccountTenant), true],
    ['on no route', '/v1/nothing', active(subAccountTenant), true],
    ['on a route of another scope', '/v1/agency', active(subAccountTenant), true],
    ['expired', '/v1/agents', active(subAccountTenant, { expiresAt: 1 }), false],
    ['outside its allowlist', '/v1/agents', active(subAccountTenant, { allowedCidrs: ['10.0.0.0/8'] }), false],
    ['revoked', '/v1/agents', { status: 'revoked' }, false],
  ]
  for (const [name, url, state, recorded] of rows) {
    const before = gate.uses.length
    await gate.app.inject({ url, headers: gate.inMemory(state).headers })
    t.equal(gate.uses.length - before, recorded ? 1 : 0, name)
  }
})

t.test('the client address: the peer, or X-Forwarded-For only from a trusted proxy', async (t) => {
  const gate = await gateHarness(t, { trustedProxies: '127.0.0.1' })
  const key = gate.inMemory(active(subAccountTenant))
  await gate.app.inject({ url: '/v1/agents', headers: { ...key.headers, 'x-forwarded-for': '198.51.100.7' } })
  t.equal(gate.decisions.at(-1)!.client, '198.51.100.7', 'from the trusted proxy')
  await gate.app.inject({ url: '/v1/agents', headers: { ...key.headers, 'x-forwarded-for': '198.51.100.7' }, remoteAddress: '203.0.113.1' })
  t.equal(gate.decisions.at(-1)!.client, '203.0.113.1', 'from anyone else, the peer')
})

t.test('failed authentications: only keys never issued count and are throttled; an issued key never is', async (t) => {
  const gate = await gateHarness(t)
  const attacker = { remoteAddress: '198.51.100.66' }
  const revoked = gate.inStores({ status: 'revoked' })
  for (let i = 0; i < 5; i++) expectRefusal(t, await gate.app.inject({ url: '/v1/agents', headers: revoked.headers, ...attacker }), 'revoked')
  const expired = gate.inStores(active(subAccountTenant, { expiresAt: Date.now() - 1 }))
  for (let i = 0; i < 5; i++) expectRefusal(t, await gate.app.inject({ url: '/v1/agents', headers: expired.headers, ...attacker }), 'expired')
  const fresh = await gate.app.inject({ url: '/v1/agents', headers: gate.inStores(active(subAccountTenant)).headers, ...attacker })
  t.equal(fresh.statusCode, 200, 'revoked and expired keys are known keys: they count for nothing')

  const lookupsBefore = gate.verifier.lookups.length
  for (let i = 0; i < 3; i++) expectRefusal(t, await gate.app.inject({ url: '/v1/agents', headers: gate.inStores().headers, ...attacker }), 'unknown')
  t.equal(gate.verifier.lookups.length, lookupsBefore, 'a key outside the filter is answered from memory, without a lookup')
  const throttled = await gate.app.inject({ url: '/v1/agents', headers: gate.inStores().headers, ...attacker })
  expectRefusal(t, throttled, 'throttled')
  t.equal(throttled.headers['ratelimit-policy'], '"failed-auth";q=3;w=60')
  t.match(throttled.headers['ratelimit'], /^"failed-auth";r=0;t=\d+$/)
  t.equal(throttled.headers['retry-after'], (throttled.headers['ratelimit'] as string).split('t=')[1], 'Retry-After is the window left')

  const issued = await gate.app.inject({ url: '/v1/agents', headers: gate.inStores(active(subAccountTenant)).headers, ...attacker })
  t.equal(issued.statusCode, 200, 'a throttled client’s issued key, on its first use, is looked up and passes')
  const known = gate.inMemory(active(subAccountTenant))
  t.equal((await gate.app.inject({ url: '/v1/agents', headers: known.headers, ...attacker })).statusCode, 200, 'a key verified in memory keeps working')
  const bystander = await gate.app.inject({ url: '/v1/agents', headers: gate.inStores().headers, remoteAddress: '198.51.100.67' })
  expectRefusal(t, bystander, 'unknown')
})

t.test("a revoked key's refusal carries its owner, for its usage; a deleted key's none", async (t) => {
  const gate = await gateHarness(t)
  const refusedTenant = async (headers: Record<string, string>): Promise<unknown> => {
    expectRefusal(t, await gate.app.inject({ url: '/v1/agents', headers }), 'revoked')
    const decision = gate.decisions.at(-1)!
    t.equal(decision.kind, 'key-refused')
    return decision.tenant
  }
  const lookups = (): number => gate.verifier.lookups.length

  const owned = gate.inMemory({ status: 'revoked', tenant: subAccountTenant })
  let before = lookups()
  t.same(await refusedTenant(owned.headers), subAccountTenant, 'held with its owner: refused from memory for that owner')
  t.equal(lookups(), before, 'without a lookup')

  // Revoked by a message that did not say whose (the log had not yet): refused all the same, its owner asked of the stores.
  const told = gate.inMemory({ status: 'revoked' })
  gate.verifier.stores.set(told.hash, { status: 'revoked', tenant: agencyTenant })
  before = lookups()
  t.same(await refusedTenant(told.headers), agencyTenant, 'the owner the stores name')
  t.equal(lookups(), before + 1, 'one lookup')

  // What the verifier answers of such a key is tested with the real one (key-verifier.test.ts); here, one that fails.
  const broken = gate.inMemory({ status: 'revoked' })
  gate.verifier.failing = true
  t.equal(await refusedTenant(broken.headers), null, 'the owner lookup fails: refused all the same, owned by no one')
  gate.verifier.failing = false

  const deleted = gate.inMemory({ status: 'deleted' })
  const response = await gate.app.inject({ url: '/v1/agents', headers: deleted.headers })
  expectRefusal(t, response, 'deleted')
  t.equal(gate.decisions.at(-1)!.tenant, null, 'a deleted key: owned by no one')
})

t.test('an IPv6 client is one client per /64: rotating addresses within it changes nothing', async (t) => {
  const gate = await gateHarness(t)
  for (let i = 1; i <= 3; i++) {
    expectRefusal(
      t,
      await gate.app.inject({ url: '/v1/agents', headers: gate.inStores().headers, remoteAddress: `2001:db8:7:7::${i.toString(16)}` }),
      'unknown',
    )
  }
  const rotated = await gate.app.inject({ url: '/v1/agents', headers: gate.inStores().headers, remoteAddress: '2001:db8:7:7:ffff:1:2:3' })
  expectRefusal(t, rotated, 'throttled')
  const neighbour = await gate.app.inject({ url: '/v1/agents', headers: gate.inStores().headers, remoteAddress: '2001:db8:7:8::1' })
  expectRefusal(t, neighbour, 'unknown')
})

t.test('a key the filter cannot vouch for is looked up under the unknown-key budget; issued keys never wait behind it', async (t) => {
  const gate = await gateHarness(t)
  // A throttled client's key created while the replica was not current: looked up, never throttled.
  for (let i = 0; i < 4; i++) await gate.app.inject({ url: '/v1/agents', headers: gate.inStores().headers, remoteAddress: '198.51.100.69' })
  gate.outsideFilter = 'unsure'
  const created = gate.inStores(active(subAccountTenant))
  gate.filterLacks.add(created.hash)
  const missed = await gate.app.inject({ url: '/v1/agents', headers: created.headers, remoteAddress: '198.51.100.69' })
  t.equal(missed.statusCode, 200, 'a key the filter has not heard of yet, from a throttled client: looked up, 200')
  gate.verifier.lookups.length = 0
  const looked = await gate.app.inject({ url: '/v1/agents', headers: gate.inStores().headers, remoteAddress: '198.51.100.70' })
  expectRefusal(t, looked, 'unknown')
  t.equal(gate.verifier.lookups.length, 1, 'unsure: looked up')
  // The budget spent (one lookup, no refill to speak of): 503, since it may be a key created meanwhile; never 401.
  const spent = await gateHarness(t, { budget: new UnknownKeyBudget({ rate: 0.001, burst: 1, maxInFlight: 8, maxPerClient: 2 }) })
  spent.outsideFilter = 'unsure'
  expectRefusal(t, await spent.app.inject({ url: '/v1/agents', headers: spent.inStores().headers, remoteAddress: '198.51.100.71' }), 'unknown')
  expectRefusal(t, await spent.app.inject({ url: '/v1/agents', headers: spent.inStores().headers, remoteAddress: '198.51.100.72' }), 'unavailable')
  const issued = await spent.app.inject({ url: '/v1/agents', headers: spent.inStores(active(subAccountTenant)).headers, remoteAddress: '198.51.100.72' })
  t.equal(issued.statusCode, 200, 'an issued key takes nothing from the spent budget')
})

t.test("rate limits: the key's bucket, the headers on every answer, 429 past it; a refused request takes no token", async (t) => {
  const gate = await gateHarness(t)
  const key = gate.inMemory(active(subAccountTenant, { allowedCidrs: ['192.0.2.0/24'] }))
  for (let i = 0; i < 3; i++) expectRefusal(t, await gate.app.inject({ url: '/v1/calls', headers: key.headers }), 'not-allowed-address')
  for (let i = 1; i <= 2; i++) {
    const ok = await gate.app.inject({ url: '/v1/calls', headers: key.headers, remoteAddress: '192.0.2.1' })
    t.equal(ok.statusCode, 200, `request ${i}: within the burst, the refusals took nothing`)
    t.equal(ok.headers['ratelimit-policy'], '"key";q=2;w=2')
    t.match(gate.decisions.at(-1), { kind: 'key', rateLimitPolicy: '"key";q=2;w=2', rateLimitState: /^"key";r=\d;t=\d$/ }, 'and on the decision, for the relay')
  }
  const limited = await gate.app.inject({ url: '/v1/calls', headers: key.headers, remoteAddress: '192.0.2.1' })
  expectRefusal(t, limited, 'rate-limited')
  t.match(limited.headers['retry-after'], /^[1-9]\d*$/)
  t.equal(limited.headers['ratelimit'], '"key";r=0;t=2')
  t.match(gate.decisions.at(-1), { kind: 'key', outcome: 'rate-limited', limit: 'key' })
  const other = gate.inMemory(active({ ...subAccountTenant, keyId: 'key-other' }))
  t.equal((await gate.app.inject({ url: '/v1/calls', headers: other.headers })).statusCode, 200, 'another key has its own bucket')
  t.equal(
    (await gate.app.inject({ url: '/v1/agents', headers: key.headers, remoteAddress: '192.0.2.1' })).headers['ratelimit-policy'],
    undefined,
    'an unlimited route has no headers',
  )
})

t.test('a verifier that fails is 503, never a pass, and the next request is looked up again', async (t) => {
  const gate = await gateHarness(t)
  gate.verifier.failing = true
  const key = gate.inStores(active(subAccountTenant))
  expectRefusal(t, await gate.app.inject({ url: '/v1/agents', headers: key.headers }), 'unavailable')
  t.same([gate.decisions.at(-1)!.kind, gate.decisions.at(-1)!.outcome], ['refused', 'unavailable'])
  gate.verifier.failing = false
  t.equal((await gate.app.inject({ url: '/v1/agents', headers: key.headers })).statusCode, 200)
})
