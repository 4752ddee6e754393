/**
 * A signed request captured on the network between the gateway and the
 * backends, replayed to another replica of the same backend: two replicas
 * each of resource-service and agency-service as processes, sharing one
 * Postgres and one Redis (a private redis-server), as a deployment runs them.
 * The second replica refuses the replay (401) because the first one wrote its
 * nonce to Redis; with Redis gone, every signed request is refused with 503
 * and Retry-After (nothing is written), and served again once Redis is back.
 */
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { TenantStore } from '@scoped/agency-service/tenants'
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from '@scoped/shared/errors'
import { readAudienceSecrets } from '@scoped/shared/secrets'
import { AGENCY_SERVICE_AUDIENCE, RESOURCE_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'
import { createTestDatabase } from '../helpers/database.js'
import { freePort, startProcess } from '../helpers/processes.js'
import { startRedisServer } from '../helpers/redis-server.js'
import { agencyTenant, newNonce, request, subAccountTenant } from '../helpers/signed-request.js'
import type { SigningOptions, TestResponse } from '../helpers/signed-request.js'
import { waitFor } from '../helpers/wait-for.js'

const secret = randomBytes(32).toString('hex')
const resourceSecret = readAudienceSecrets({ TENANT_SIGNING_SECRET: secret }, RESOURCE_SERVICE_AUDIENCE)[0]!
const agencySecret = readAudienceSecrets({ TENANT_SIGNING_SECRET: secret }, AGENCY_SERVICE_AUDIENCE)[0]!
const notSigned = { success: false, message: 'Request was not signed by the gateway' }
const unavailable = { success: false, message: 'Service temporarily unavailable' }

t.test('a signed request replayed to another replica of the same backend is refused; with Redis gone, nothing is accepted unchecked', async (t) => {
  const db = await createTestDatabase(t)
  const redis = await startRedisServer(t)
  const env = { DATABASE_URL: db.url, REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'sak-replay:', TENANT_SIGNING_SECRET: secret, LOG_LEVEL: 'info' }
  const start = async (service: 'resource-service' | 'agency-service'): Promise<string> => {
    const port = await freePort()
    const variable = service === 'resource-service' ? 'RESOURCE_SERVICE_PORT' : 'AGENCY_SERVICE_PORT'
    await startProcess(t, `${service}/src/main.ts`, { ...env, [variable]: String(port) }, new RegExp(`${service} ready`), 60_000)
    return `http://127.0.0.1:${port}`
  }
  const [resourceOne, resourceTwo, agencyOne, agencyTwo] = await Promise.all([
    start('resource-service'),
    start('resource-service'),
    start('agency-service'),
    start('agency-service'),
  ])
  const tenants = new TenantStore(db.pool)
  const agency = await tenants.createAgency('Replayed')
  const sub = await tenants.createSubAccount(agency.id, 'Replayed West')
  const asSub: Omit<SigningOptions, 'nonce' | 'timestamp'> = { secret: resourceSecret, tenant: subAccountTenant(agency.id, sub.id) }
  const asAgency: Omit<SigningOptions, 'nonce' | 'timestamp'> = { secret: agencySecret, tenant: agencyTenant(agency.id) }
  const agents = async (): Promise<number> => (await db.pool.query('SELECT 1 FROM agents WHERE sub_account_id = $1', [sub.id])).rowCount ?? 0

  await t.test('resource-service: a write accepted by one replica is refused by the other, and written once', async (t) => {
    // What a capture holds: the signed headers (nonce and timestamp fixed) and the body.
    const captured: SigningOptions = { ...asSub, nonce: newNonce(), timestamp: Date.now() / 1000 }
    const send = (baseUrl: string) => request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Captured' }, signing: captured })
    t.equal((await send(resourceOne)).status, 201, 'the original, at the first replica')
    const replayed = await send(resourceTwo)
    t.equal(replayed.status, 401, 'the replay, at the second replica')
    t.same(replayed.json, notSigned)
    t.equal((await send(resourceOne)).status, 401, 'and at the first')
    t.equal(await agents(), 1, 'one agent written')
  })

  await t.test('agency-service: the same', async (t) => {
    const captured: SigningOptions = { ...asAgency, nonce: newNonce(), timestamp: Date.now() / 1000 }
    const send = (baseUrl: string) => request(baseUrl, 'GET', '/v1/agency', { signing: captured })
    t.equal((await send(agencyTwo)).status, 200, 'the original, at the second replica')
    const replayed = await send(agencyOne)
    t.equal(replayed.status, 401, 'the replay, at the first replica')
    t.same(replayed.json, notSigned)
  })

  await t.test('Redis down: every signed request is refused with 503 and Retry-After, and served again once it is back', async (t) => {
    await redis.stop()
    const expectUnavailable = (response: TestResponse, what: string): void => {
      t.equal(response.status, 503, `${what}: 503`)
      t.same(response.json, unavailable, `${what}: in the envelope`)
      t.equal(response.headers.get('retry-after'), String(UNAVAILABLE_RETRY_AFTER_SECONDS), `${what}: Retry-After`)
    }
    for (const baseUrl of [resourceOne, resourceTwo]) {
      expectUnavailable(await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Unchecked' }, signing: asSub }), `${baseUrl}: a write`)
    }
    for (const baseUrl of [agencyOne, agencyTwo]) expectUnavailable(await request(baseUrl, 'GET', '/v1/agency', { signing: asAgency }), `${baseUrl}: a read`)
    t.equal(await agents(), 1, 'nothing written')
    const health = await fetch(`${resourceOne}/healthz`)
    t.equal(health.status, 200, 'the unsigned probes still answer')

    await redis.start()
    for (const baseUrl of [resourceOne, resourceTwo]) {
      await waitFor(async () => (await request(baseUrl, 'GET', '/v1/agents', { signing: asSub })).status === 200, `${baseUrl} to reach Redis again`)
    }
    await waitFor(async () => (await request(agencyOne, 'GET', '/v1/agency', { signing: asAgency })).status === 200, 'agency-service to reach Redis again')
    const captured: SigningOptions = { ...asSub, nonce: newNonce(), timestamp: Date.now() / 1000 }
    t.equal((await request(resourceTwo, 'GET', '/v1/agents', { signing: captured })).status, 200, 'Redis back (empty): served')
    t.equal((await request(resourceOne, 'GET', '/v1/agents', { signing: captured })).status, 401, 'and replays are refused again')
  })
})
