import t from 'tap'
import { randomUUID } from 'node:crypto'
import pino from 'pino'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { AGENCY_SERVICE_AUDIENCE, contentDigest, signTenantHeaders } from '@scoped/shared/tenant-signature'
import { appendClientAddress } from '@scoped/shared/signed-client-address'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { buildAgencyApp } from '@scoped/agency-service/app'
import { createTestDatabase } from '../helpers/database.js'
import { ConsoleClient, createWorld, signedIn } from './console-harness.js'
import { MAX_FAILURES_PER_CLIENT } from '@scoped/agency-service/console/sign-in-throttle'

const SECRET = 's'.repeat(40)

/** The tenant headers the gateway would send agency-service for this request. */
function signedFor(tenant: Tenant, method: string, url: string, body?: string): Record<string, string> {
  const request = { method, pathWithQuery: url, audience: AGENCY_SERVICE_AUDIENCE, contentDigest: contentDigest(body), nonce: randomUUID() }
  return signTenantHeaders(SECRET, request, tenant, Date.now() / 1000)
}

t.test('agency-service serves the console under /console, unsigned, and keeps /v1 signed and free of the console', async (t) => {
  const db = await createTestDatabase(t)
  const app = await buildAgencyApp({
    pool: db.pool,
    keys: new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null)),
    logger: pino({ level: 'silent' }),
    signingSecrets: [SECRET],
  })
  t.teardown(() => app.close())
  const world = await createWorld(db.pool)

  const signIn = await app.inject({ method: 'GET', url: '/console/sign-in' })
  t.equal(signIn.statusCode, 200, 'the console needs no gateway signature')
  t.match(signIn.headers['content-type'], /^text\/html/)
  t.equal((await app.inject({ method: 'GET', url: '/console/assets/console.css' })).statusCode, 200)
  const owner = await signedIn(app, world.owner.email)
  t.equal((await owner.get(`/console/agencies/${world.agencyId}/keys`)).statusCode, 200, 'a whole sign-in works inside the real app')

  const unsigned = await app.inject({ method: 'GET', url: '/v1/agency' })
  t.equal(unsigned.statusCode, 401, '/v1 still needs the signature')
  t.same(unsigned.json(), { success: false, message: 'Request was not signed by the gateway' })

  // A signed /v1 request gets none of the console's response headers or form parsing.
  const tenant = { scope: 'AGENCY' as const, agencyId: world.agencyId, subAccountId: null, keyId: randomUUID() }
  const signedGet = await app.inject({ method: 'GET', url: '/v1/agency', headers: signedFor(tenant, 'GET', '/v1/agency') })
  t.equal(signedGet.statusCode, 200)
  t.notOk(signedGet.headers['content-security-policy'], 'console headers stay in the console')
  const form = await app.inject({
    method: 'POST',
    url: '/v1/agency/sub-accounts',
    headers: { ...signedFor(tenant, 'POST', '/v1/agency/sub-accounts', 'name=x'), 'content-type': 'application/x-www-form-urlencoded' },
    payload: 'name=x',
  })
  t.equal(form.statusCode, 415, 'the API takes no form bodies: the console parser is not registered there')
})

t.test('behind the gateway, the sign-in throttle counts the client the gateway saw (the address it signed), not the gateway', async (t) => {
  const db = await createTestDatabase(t)
  const app = await buildAgencyApp({
    pool: db.pool,
    keys: new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null)),
    logger: pino({ level: 'silent' }),
    signingSecrets: [SECRET],
  })
  t.teardown(() => app.close())
  const world = await createWorld(db.pool)
  // Spread over many emails so that only the per-client limit can bite.
  for (let i = 0; i < MAX_FAILURES_PER_CLIENT; i++) await new ConsoleClient(app, '198.51.100.20', SECRET).signIn(`nobody-${i}@example.test`, 'wrong password')
  t.equal((await new ConsoleClient(app, '198.51.100.20', SECRET).signIn(world.owner.email)).statusCode, 429, 'that client is throttled')
  t.equal((await new ConsoleClient(app, '198.51.100.21', SECRET).signIn(world.owner.email)).statusCode, 303, 'another client behind the same gateway is not')
})

t.test("agency-service takes the client address only from the gateway's signature; a direct request gets nothing from X-Forwarded-For", async (t) => {
  const db = await createTestDatabase(t)
  const app = await buildAgencyApp({
    pool: db.pool,
    keys: new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null)),
    logger: pino({ level: 'silent' }),
    signingSecrets: [SECRET],
  })
  t.teardown(() => app.close())
  const seen: string[] = []
  app.addHook('onRequest', async (request) => {
    seen.push(request.ip)
  })
  const ipOf = async (headers: Record<string, string>, url = '/console/sign-in'): Promise<string | undefined> => {
    await app.inject({ method: 'GET', url, headers, remoteAddress: '10.0.0.5' })
    return seen.at(-1)
  }
  const signed = (address: string, request: { method?: string; pathWithQuery?: string; audience?: string } = {}, secret = SECRET, at = Date.now() / 1000) => {
    const list: string[] = []
    const target = { method: 'GET', pathWithQuery: '/console/sign-in', audience: AGENCY_SERVICE_AUDIENCE, ...request }
    appendClientAddress(list, secret, target, address, at)
    return { [list[0]!]: list[1]!, [list[2]!]: list[3]! }
  }
  t.equal(await ipOf(signed('198.51.100.7')), '198.51.100.7', 'the address the gateway signed')
  t.equal(await ipOf({ ...signed('198.51.100.7'), 'x-forwarded-for': '203.0.113.66' }), '198.51.100.7', 'whatever X-Forwarded-For says beside it')
  for (const [what, headers] of [
    ['X-Forwarded-For alone', { 'x-forwarded-for': '198.51.100.7' }],
    ['a chain', { 'x-forwarded-for': '203.0.113.66, 198.51.100.7' }],
    ['nothing', {}],
    ['an address signed with another secret', signed('198.51.100.7', {}, 't'.repeat(40))],
    ['an address signed for another path', signed('198.51.100.7', { pathWithQuery: '/console' })],
    ['an address signed for another method', signed('198.51.100.7', { method: 'POST' })],
    ['an address signed for another backend', signed('198.51.100.7', { audience: 'resource-service' })],
    ['an address signed too long ago', signed('198.51.100.7', {}, SECRET, Date.now() / 1000 - 120)],
    ['a signed address changed on the way', { ...signed('198.51.100.7'), 'x-tenant-client-address': '198.51.100.8' }],
  ] as const) {
    t.equal(await ipOf({ ...headers }), '10.0.0.5', `${what}: the TCP peer`)
  }
  t.equal(await ipOf({ 'x-forwarded-for': '198.51.100.7' }, '/healthz'), '10.0.0.5', 'on every route')
})
