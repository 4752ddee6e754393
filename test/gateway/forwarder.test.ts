/**
 * The forwarder alone (forwarder.ts, relay.ts), in this process through
 * fastify.inject: a stand-in gate hands it the decision each test names, a
 * fake of the gateway's Verifier answers its second check, and the echo
 * upstream (test/helpers/echo-upstream.ts, here in the test's process)
 * verifies the signed tenant headers as a backend does and says what reached
 * it. What is forwarded for a key and for a console route, the second check
 * of the key (and, with the real verifier over Postgres, that it is not
 * charged to the key's address), refused bodies, and a request without a
 * decision.
 */
import t from 'tap'
import type { Test } from 'tap'
import { once } from 'node:events'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import Fastify from 'fastify'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { errorEnvelopePlugin } from '@scoped/shared/error-envelope-plugin'
import { createLogger } from '@scoped/shared/logger'
import { readAudienceSecrets } from '@scoped/shared/secrets'
import { verifiedClientAddress } from '@scoped/shared/signed-client-address'
import { AGENCY_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'
import { forwarderPlugin } from '@scoped/gateway/forwarder'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { lookupKeyByHash } from '@scoped/shared/key-store'
import { hashKey } from '@scoped/shared/keys'
import { KeyCache } from '@scoped/gateway/key-cache'
import { KeyVerifier } from '@scoped/gateway/key-verifier'
import type { KeyStore, Verifier } from '@scoped/gateway/key-verifier'
import { GatewayMetrics } from '@scoped/gateway/metrics'
import type { Refusal } from '@scoped/gateway/outcomes'
import { refusals } from '@scoped/gateway/outcomes'
import { normalizeRequestTarget } from '@scoped/gateway/request-path'
import type { GateDecision } from '@scoped/gateway/request-state'
import { decorateRequestState, KeyDecision, SessionDecision } from '@scoped/gateway/request-state'
import type { Route, RouteMap, ScopedRoute, SessionRoute } from '@scoped/gateway/route-map'
import { matchRoute, parseRouteMap } from '@scoped/gateway/route-map'
import { Upstreams } from '@scoped/gateway/upstream'
import type { ActiveKeyState, KeyState } from '@scoped/shared/key-state'
import type { Echo } from '../helpers/echo-upstream.js'
import { createEchoUpstream } from '../helpers/echo-upstream.js'
import { createTestDatabase } from '../helpers/database.js'
import { freePort } from '../helpers/processes.js'
import { createTestTenants } from '../helpers/tenants.js'
import { active, FakeVerifier, newKey, subAccountTenant } from './fake-verifier.js'

const SECRET = 'forwarder-test-signing-secret-0123456789abcdef'
const CLIENT = '203.0.113.9'

interface ForwarderHarness {
  app: FastifyInstance
  verifier: FakeVerifier
  /** The request lines that reached the echo upstream. */
  reached: string[]
  /** The decision the stand-in gate hands the next requests; null: none. */
  decide: (request: FastifyRequest) => GateDecision | null
  /** A key decision for the request, as the gate makes it: the key's state as verified, the generation then. */
  keyDecision(state?: ActiveKeyState, generation?: number, hash?: string): (request: FastifyRequest) => KeyDecision
  sessionDecision(): (request: FastifyRequest) => SessionDecision
}

async function listen(t: Test, server: Server): Promise<number> {
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return (server.address() as AddressInfo).port
}

function routeOf(routes: RouteMap, request: FastifyRequest): { route: Route; target: NonNullable<ReturnType<typeof normalizeRequestTarget>> } {
  const target = normalizeRequestTarget(request.raw.url ?? '')
  const route = target === undefined ? undefined : matchRoute(routes, target.path)
  if (target === undefined || route === undefined) throw new Error(`the test sent ${request.raw.url} to no route`)
  return { route, target }
}

/** `checker`: what answers the forwarder's second look, when not the harness's fake. */
async function forwarderHarness(t: Test, checker?: Verifier): Promise<ForwarderHarness> {
  const reached: string[] = []
  const echo = `http://127.0.0.1:${await listen(
    t,
    createEchoUpstream({ TENANT_SIGNING_SECRET: SECRET }, (line) => reached.push(line)),
  )}`
  const down = `http://127.0.0.1:${await freePort()}`
  const routes = parseRouteMap(
    `routes:
  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "${echo}" }
  - { prefix: /v1/calls, scope: SUB-ACCOUNT, upstream: "${down}" }
  - { prefix: /console, auth: session, upstream: "${echo}" }
`,
    'routes.yaml',
  )
  const audiences = new Set(routes.routes.map((route) => route.audience))
  const upstreams = new Upstreams({ connections: 2, queue: 2, timeoutMs: 5_000 })
  t.teardown(() => upstreams.close())
  const verifier = new FakeVerifier()
  const harness: ForwarderHarness = {
    app: Fastify(),
    verifier,
    reached,
    decide: () => null,
    keyDecision:
      (state = active(subAccountTenant), generation = 0, hash = newKey().hash) =>
      (request) => {
        const { route, target } = routeOf(routes, request)
        return new KeyDecision(CLIENT, target, route as ScopedRoute, hash, state, generation)
      },
    sessionDecision: () => (request) => {
      const { route, target } = routeOf(routes, request)
      return new SessionDecision(CLIENT, target, route as SessionRoute)
    },
  }
  // In the gate's place: the decision the test chose.
  const standInGate = fp(
    async (app: FastifyInstance) => {
      decorateRequestState(app)
      app.addHook('onRequest', (request, _reply, done) => {
        request.gateway = harness.decide(request)
        done()
      })
    },
    { name: 'gateway-gate' },
  )
  const { app } = harness
  await app.register(errorEnvelopePlugin)
  await app.register(standInGate)
  await app.register(forwarderPlugin, {
    upstreams,
    audienceSecrets: new Map([...audiences].map((audience) => [audience, readAudienceSecrets({ TENANT_SIGNING_SECRET: SECRET }, audience)[0]!])),
    verifier: checker ?? verifier,
    bodyLimit: 1024,
    bodyTimeoutMs: 5_000,
    metrics: new GatewayMetrics(routes),
    log: createLogger('gateway', 'silent'),
    isDraining: () => false,
  })
  t.teardown(() => app.close())
  return harness
}

function expectRefusal(t: Test, response: { statusCode: number; json(): unknown }, outcome: Refusal, why: string): void {
  t.equal(response.statusCode, refusals[outcome].status, `${why}: ${refusals[outcome].status}`)
  t.same(response.json(), { success: false, message: refusals[outcome].message }, `${why}: the envelope`)
}

t.test('a key: the path it was authorized for, without tenant fields, signed for the backend, with the gateway headers both ways', async (t) => {
  const forwarder = await forwarderHarness(t)
  let decision: KeyDecision | undefined
  forwarder.decide = (request) => {
    decision = forwarder.keyDecision()(request)
    decision.rateLimitPolicy = '"key";q=2;w=2'
    decision.rateLimitState = '"key";r=1;t=1'
    return decision
  }
  const response = await forwarder.app.inject({
    method: 'POST',
    url: '/v1/%61gents/x?Agency_ID=9&a=1&sub_account_id%5B%5D=2',
    headers: {
      authorization: `Bearer ${newKey().key}`,
      'x-tenant-agency-id': 'forged',
      cookie: 'session=1',
      'content-type': 'application/json',
      host: 'api.example',
    },
    payload: { name: 'n', agency_id: 'forged', nested: { agency_id: 'kept' } },
  })
  t.equal(response.statusCode, 200)
  const echo = response.json<Echo>()
  t.equal(echo.url, '/v1/agents/x?a=1', 'the canonical path; tenant parameters gone, others kept byte for byte')
  t.same(
    echo.tenant,
    { ...subAccountTenant, permissions: '*' },
    "the backend verified the decision's tenant in the signature, an unrestricted key's permissions (*) with it",
  )
  t.same(JSON.parse(echo.body), { name: 'n', nested: { agency_id: 'kept' } }, 'top-level tenant fields gone from the body')
  t.notOk('authorization' in echo.headers || 'cookie' in echo.headers, 'neither the key nor cookies go to an API backend')
  t.equal(echo.headers['x-tenant-agency-id'], 'agency-1', "the gateway's signed header, never the caller's")
  t.match(echo.headers, { 'x-forwarded-for': CLIENT, 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.example', 'x-request-id': /./ })
  t.match(response.headers, { 'strict-transport-security': /max-age=/, 'x-request-id': echo.headers['x-request-id'], 'x-upstream': 'echo' })
  t.same([response.headers['ratelimit-policy'], response.headers['ratelimit']], ['"key";q=2;w=2', '"key";r=1;t=1'], "the decision's rate-limit headers")
  t.equal(decision?.outcome, 'forwarded')
  t.ok(decision !== undefined && decision.upstreamAt > 0, 'the relay noted when the upstream request started')
})

t.test('a console route: body and query as they came, its cookies, no tenant headers', async (t) => {
  const forwarder = await forwarderHarness(t)
  let decision: SessionDecision | undefined
  forwarder.decide = (request) => (decision = forwarder.sessionDecision()(request))
  const response = await forwarder.app.inject({
    method: 'POST',
    url: '/console/sign-in?agency_id=1',
    headers: { cookie: 'session=1', 'content-type': 'application/json' },
    payload: '{"agency_id":"a"}',
  })
  const echo = response.json<Echo>()
  t.same([echo.url, echo.body, echo.headers['cookie'], echo.tenant], ['/console/sign-in?agency_id=1', '{"agency_id":"a"}', 'session=1', null])
  t.match(echo.headers['content-digest'], /^sha-256=:/, 'its content-digest, for the console to check')
  t.equal(echo.headers['x-tenant-client-address'], CLIENT, 'the client address, signed for agency-service')
  t.equal(
    verifiedClientAddress(
      echo.headers,
      { method: 'POST', pathWithQuery: '/console/sign-in?agency_id=1', audience: AGENCY_SERVICE_AUDIENCE },
      readAudienceSecrets({ TENANT_SIGNING_SECRET: SECRET }, AGENCY_SERVICE_AUDIENCE),
      Date.now() / 1000,
    ),
    CLIENT,
    'which verifies under agency-service’s secret',
  )
  t.equal(decision?.outcome, 'session')
})

t.test('the key checked again once the body is in, when the key cache moved or its expiry passed', async (t) => {
  const forwarder = await forwarderHarness(t)
  const verifier = forwarder.verifier
  const expired = active(subAccountTenant, { expiresAt: Date.now() - 1 })
  // now: what the stores answer a second look; state: the key's state when the gate decided (and in memory since).
  // lost: the replica lost currency while the body arrived, and the generation has not moved (nothing asked yet).
  const rows: Array<{
    name: string
    now: KeyState | { status: 'unavailable' } | undefined
    moved: boolean
    lost?: boolean
    state?: ActiveKeyState
    refused?: Refusal
  }> = [
    { name: 'nothing moved: no second look', now: undefined, moved: false },
    { name: 'moved, still active', now: active(subAccountTenant), moved: true },
    { name: 'moved, revoked meanwhile', now: { status: 'revoked' }, moved: true, refused: 'revoked' },
    {
      name: 'moved, and now allowed from elsewhere only',
      now: active(subAccountTenant, { allowedCidrs: ['10.0.0.0/8'] }),
      moved: true,
      refused: 'not-allowed-address',
    },
    { name: 'moved, the stores cannot answer', now: { status: 'unavailable' }, moved: true, refused: 'unavailable' },
    { name: 'its expiry passed while the body arrived', now: undefined, moved: false, state: expired, refused: 'expired' },
    { name: 'currency lost, generation unchanged, revoked meanwhile', now: { status: 'revoked' }, moved: false, lost: true, refused: 'revoked' },
    { name: 'currency lost, generation unchanged, still active', now: active(subAccountTenant), moved: false, lost: true },
  ]
  for (const row of rows) {
    verifier.stores.clear()
    verifier.memory.clear()
    verifier.lookups.length = 0
    let decision: KeyDecision | undefined
    forwarder.decide = (request) => {
      decision = forwarder.keyDecision(row.state, verifier.generation)(request)
      if (row.now !== undefined) verifier.stores.set(decision.hash, row.now)
      if (row.state !== undefined) verifier.memory.set(decision.hash, row.state)
      if (row.moved) verifier.generation++
      verifier.current = row.lost !== true
      return decision
    }
    const marker = `?row=${encodeURIComponent(row.name)}`
    const response = await forwarder.app.inject({ method: 'PUT', url: `/v1/agents/x${marker}`, payload: 'body' })
    const reached = forwarder.reached.some((line) => line.endsWith(marker))
    if (row.refused === undefined) {
      t.equal(response.statusCode, 200, row.name)
      t.ok(reached, `${row.name}: forwarded`)
    } else {
      expectRefusal(t, response, row.refused, row.name)
      t.notOk(reached, `${row.name}: nothing forwarded`)
      t.equal(decision?.outcome, row.refused, `${row.name}: the outcome`)
    }
    const looked = row.moved || row.lost === true
    t.equal(verifier.lookups.length, looked ? 1 : 0, `${row.name}: ${looked ? 'one lookup' : 'no lookup'}`)
  }
})

t.test('a valid key checked again is forwarded whatever other lookups its address holds (the bystander)', async (t) => {
  const db = await createTestDatabase(t)
  const tenants = await createTestTenants(db.pool)
  const created = await new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null)).create(
    { scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId },
    'k',
    'test',
  )
  const hash = hashKey(created.key)
  // Lookups of other keys (a flood of guesses from the same address) read Postgres, then wait until released.
  let release = (): void => undefined
  const held = new Promise<void>((resolve) => (release = resolve))
  t.teardown(() => release())
  const store: KeyStore = {
    lookup: async (looked) => {
      const state = await lookupKeyByHash(db.pool, looked)
      if (looked !== hash) await held
      return state
    },
  }
  // Never told it is current by a follower: every forward checks the key again.
  const cache = new KeyCache()
  const metrics = new GatewayMetrics(parseRouteMap('routes:\n  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }\n', 'test'))
  const verifier = new KeyVerifier({ store, shared: null, cache, metrics, log: createLogger('test', 'silent'), maxPendingPerClient: 2 })
  const guesses = [verifier.verify(newKey().hash, CLIENT), verifier.verify(newKey().hash, CLIENT)]
  t.same(await verifier.verify(newKey().hash, CLIENT), { status: 'unavailable' }, 'the address holds every lookup slot it may')

  const forwarder = await forwarderHarness(t, verifier)
  const state = await lookupKeyByHash(db.pool, hash)
  if (state.status !== 'active') throw new Error('the new key is not active')
  forwarder.decide = forwarder.keyDecision(state, cache.generation, hash)
  const response = await forwarder.app.inject({ url: '/v1/agents' })
  t.equal(response.statusCode, 200, 'the found key is checked again outside its address’s slots, and forwarded')
  t.equal(forwarder.reached.length, 1)
  release()
  t.same(await Promise.all(guesses), [{ status: 'unknown' }, { status: 'unknown' }], 'the guesses end as unknown keys')
})

t.test('bodies a backend never sees, and a request without a decision to forward', async (t) => {
  const forwarder = await forwarderHarness(t)
  forwarder.decide = forwarder.keyDecision()
  const json = { 'content-type': 'application/json' }
  expectRefusal(
    t,
    await forwarder.app.inject({ method: 'POST', url: '/v1/agents?bad', headers: json, payload: '{"a":' }),
    'bad-json',
    'JSON that does not parse',
  )
  const deep = `${'['.repeat(40)}${']'.repeat(40)}`
  expectRefusal(t, await forwarder.app.inject({ method: 'POST', url: '/v1/agents?deep', headers: json, payload: deep }), 'too-deep', 'JSON nested too deep')
  const large = await forwarder.app.inject({ method: 'POST', url: '/v1/agents?large', payload: 'x'.repeat(2048) })
  t.equal(large.statusCode, 413, 'a body over the limit')
  t.notOk(
    forwarder.reached.some((line) => /\?(bad|deep|large)$/.test(line)),
    'none reached the backend',
  )

  forwarder.decide = () => null
  const undecided = await forwarder.app.inject({ url: '/v1/agents?undecided' })
  t.equal(undecided.statusCode, 500, 'no decision: an error, never a pass')
  t.notOk(forwarder.reached.some((line) => line.endsWith('?undecided')))

  forwarder.decide = forwarder.keyDecision()
  const down = await forwarder.app.inject({ url: '/v1/calls' })
  expectRefusal(t, down, 'upstream-error', 'a backend that is down')
})
