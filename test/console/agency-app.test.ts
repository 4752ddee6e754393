import t from 'tap'
import { randomUUID } from 'node:crypto'
import pino from 'pino'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { AGENCY_SERVICE_AUDIENCE, contentDigest, signTenantHeaders } from '@scoped/shared/tenant-signature'
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

t.test('behind the gateway, the sign-in throttle counts the client the gateway saw (x-forwarded-for), not the gateway', async (t) => {
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
  for (let i = 0; i < MAX_FAILURES_PER_CLIENT; i++) await new ConsoleClient(app, '198.51.100.20').signIn(`nobody-${i}@example.test`, 'wrong password')
  t.equal((await new ConsoleClient(app, '198.51.100.20').signIn(world.owner.email)).statusCode, 429, 'that client is throttled')
  t.equal((await new ConsoleClient(app, '198.51.100.21').signIn(world.owner.email)).statusCode, 303, 'another client behind the same gateway is not')
})

t.test('agency-service trusts exactly one proxy hop, the gateway: request.ip is the address the gateway set', async (t) => {
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
  const ipOf = async (headers: Record<string, string>): Promise<string | undefined> => {
    await app.inject({ method: 'GET', url: '/healthz', headers, remoteAddress: '10.0.0.5' })
    return seen.at(-1)
  }
  t.equal(await ipOf({ 'x-forwarded-for': '198.51.100.7' }), '198.51.100.7', 'the address the gateway forwarded')
  t.equal(
    await ipOf({ 'x-forwarded-for': '203.0.113.66, 198.51.100.7' }),
    '198.51.100.7',
    'a chain: only its last address (the hop the gateway added), never one further left',
  )
  t.equal(await ipOf({ 'x-forwarded-for': '203.0.113.66, 198.51.100.9, 198.51.100.7' }), '198.51.100.7')
  t.equal(await ipOf({}), '10.0.0.5', 'without the header: the peer')
})
