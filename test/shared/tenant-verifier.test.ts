import t from 'tap'
import Fastify from 'fastify'
import type { FastifyInstance } from 'fastify'
import { ConfigError } from '@scoped/shared/config'
import { errorEnvelopePlugin } from '@scoped/shared/error-envelope-plugin'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { signTenantHeaders } from '@scoped/shared/tenant-signature'
import { readTenantSigningSecrets, requireTenantScope, tenantSubAccountId, tenantVerifier } from '@scoped/shared/tenant-verifier'

const secret = 's'.repeat(40)
const previous = 'p'.repeat(40)
const subAccount: Tenant = { scope: 'SUB-ACCOUNT', agencyId: 'agency-1', subAccountId: 'sub-1', keyId: 'key-1' }
const agency: Tenant = { scope: 'AGENCY', agencyId: 'agency-1', subAccountId: null, keyId: 'key-2' }
const refused = { success: false, message: 'Request was not signed by the gateway' }

async function build(clock: { now: number }, windowSeconds?: number): Promise<FastifyInstance> {
  const app = Fastify()
  await app.register(errorEnvelopePlugin)
  await app.register(tenantVerifier, { secrets: [secret, previous], now: () => clock.now, windowSeconds, unsignedRoutes: ['/healthz', '/console'] })
  app.get('/healthz', async () => ({ ok: true }))
  app.get('/healthz/deep', async () => ({ ok: true }))
  app.get('/console/page', async () => ({ page: true }))
  app.get('/console/leak', async (request) => ({ tenant: request.tenant }))
  app.get('/consolex', async () => ({ unsigned: 'must not be' }))
  app.get('/v1/tenant', async (request) => ({ tenant: request.tenant }))
  await app.register(
    async (scoped) => {
      scoped.addHook('onRequest', requireTenantScope('SUB-ACCOUNT'))
      scoped.get('/things', async (request) => ({ subAccountId: tenantSubAccountId(request) }))
    },
    { prefix: '/v1/sub' },
  )
  return app
}

function signed(tenant: Tenant, method: string, url: string, now: number, key = secret): Record<string, string> {
  return signTenantHeaders(key, method, url, tenant, now)
}

t.test('which routes are unsigned is decided on the matched route, by whole segments', async (t) => {
  const clock = { now: 1_700_000_000 }
  const app = await build(clock)
  t.teardown(() => app.close())
  const rows: Array<[string, number]> = [
    ['/healthz', 200],
    ['/healthz/deep', 200],
    ['/console/page', 200],
    ['/console/no-such-page', 404],
    ['/console', 404],
    ['/consolex', 401],
    ['/consolex/no-such-page', 401],
    ['/v1/tenant', 401],
    ['/v1/no-such-route', 401],
    ['/healthzx', 401],
    ['/v1/tenant?x=/console', 401],
  ]
  for (const [url, status] of rows) {
    const response = await app.inject({ method: 'GET', url })
    t.equal(response.statusCode, status, url)
    if (status === 401) t.same(response.json(), refused, url)
  }
})

t.test('a route that was left unsigned cannot read a tenant: it fails closed', async (t) => {
  const app = await build({ now: 1_700_000_000 })
  t.teardown(() => app.close())
  const response = await app.inject({ method: 'GET', url: '/console/leak', headers: signed(subAccount, 'GET', '/console/leak', 1_700_000_000) })
  t.equal(response.statusCode, 401)
  t.same(response.json(), refused)
})

t.test('the verified tenant is handed to the route, and nothing else', async (t) => {
  const clock = { now: 1_700_000_000 }
  const app = await build(clock)
  t.teardown(() => app.close())
  for (const [tenant, key] of [
    [subAccount, secret],
    [agency, secret],
    [subAccount, previous],
  ] as const) {
    const response = await app.inject({ method: 'GET', url: '/v1/tenant?sub_account_id=evil', headers: signed(tenant, 'GET', '/v1/tenant?sub_account_id=evil', clock.now, key) })
    t.equal(response.statusCode, 200)
    t.same(response.json(), { tenant })
  }
})

t.test('the replay window holds either way, with the clock as a parameter', async (t) => {
  const clock = { now: 1_700_000_000 }
  const app = await build(clock, 10)
  t.teardown(() => app.close())
  const rows: Array<[number, number]> = [
    [0, 200],
    [-10, 200],
    [10, 200],
    [-11, 401],
    [11, 401],
    [-86_400, 401],
  ]
  for (const [offset, status] of rows) {
    const response = await app.inject({ method: 'GET', url: '/v1/tenant', headers: signed(subAccount, 'GET', '/v1/tenant', clock.now + offset) })
    t.equal(response.statusCode, status, `signed ${offset} s from now`)
  }
  const headers = signed(subAccount, 'GET', '/v1/tenant', clock.now)
  clock.now += 11
  t.equal((await app.inject({ method: 'GET', url: '/v1/tenant', headers })).statusCode, 401, 'the same request, replayed later')
})

t.test('a route group can require a scope: another scope gets 403', async (t) => {
  const clock = { now: 1_700_000_000 }
  const app = await build(clock)
  t.teardown(() => app.close())
  const ok = await app.inject({ method: 'GET', url: '/v1/sub/things', headers: signed(subAccount, 'GET', '/v1/sub/things', clock.now) })
  t.same(ok.json(), { subAccountId: 'sub-1' })
  const mismatch = await app.inject({ method: 'GET', url: '/v1/sub/things', headers: signed(agency, 'GET', '/v1/sub/things', clock.now) })
  t.equal(mismatch.statusCode, 403)
  t.same(mismatch.json(), { success: false, message: 'This API key does not have access to this resource' })
})

t.test('the signing secrets are read from the environment, once', async (t) => {
  t.same(readTenantSigningSecrets({ TENANT_SIGNING_SECRET: secret }), [secret])
  t.same(readTenantSigningSecrets({ TENANT_SIGNING_SECRET: secret, TENANT_SIGNING_SECRET_PREVIOUS: previous }), [secret, previous])
  const rows: Array<[Record<string, string>, RegExp]> = [
    [{}, /^TENANT_SIGNING_SECRET: is required$/],
    [{ TENANT_SIGNING_SECRET: 'short' }, /^TENANT_SIGNING_SECRET: is too short/],
    [{ TENANT_SIGNING_SECRET: secret, TENANT_SIGNING_SECRET_PREVIOUS: 'short' }, /^TENANT_SIGNING_SECRET_PREVIOUS: is too short/],
    [{ TENANT_SIGNING_SECRET: secret, TENANT_SIGNING_SECRET_PREVIOUS: secret }, /^TENANT_SIGNING_SECRET_PREVIOUS: must differ/],
  ]
  for (const [env, message] of rows) {
    t.throws(() => readTenantSigningSecrets(env), ConfigError)
    t.throws(() => readTenantSigningSecrets(env), { message })
  }
})

t.test('the verifier refuses to start without a secret', async (t) => {
  const app = Fastify()
  await app.register(errorEnvelopePlugin)
  app.register(tenantVerifier, { secrets: [] })
  await t.rejects(async () => {
    await app.ready()
  }, /at least one secret/)
})
