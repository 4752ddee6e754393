/**
 * agency-service as the process operators run: configuration checked once
 * at start, a "ready" line, key invalidation over Redis, exit 0 on SIGTERM.
 */
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { hashKey } from '@scoped/shared/keys'
import { lookupKeyByHash } from '@scoped/shared/key-store'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { createTestDatabase } from '../helpers/database.js'
import { createTestRedis } from '../helpers/redis.js'
import { standInReplica } from '../helpers/invalidation.js'
import { freePort, runToExit, startProcess } from '../helpers/processes.js'
import type { ProcessEnv } from '../helpers/processes.js'
import { deriveSecret, readAudienceSecrets, readKeyCacheSecret } from '@scoped/shared/secrets'
import { AGENCY_SERVICE_AUDIENCE, contentDigest, RESOURCE_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { agencyTenant, newNonce, request, tenantClient } from '../helpers/signed-request.js'
import type { SigningOptions } from '../helpers/signed-request.js'

const entry = 'agency-service/src/main.ts'
/** TENANT_SIGNING_SECRET, as the gateway and the backends are given it. */
const secret = randomBytes(24).toString('hex')
/** What agency-service derives from it for its own audience: what the gateway signs its requests with. */
const agencySecret = readAudienceSecrets({ TENANT_SIGNING_SECRET: secret }, AGENCY_SERVICE_AUDIENCE)[0]!
/** What resource-service derives from the same master: it must not open agency-service. */
const resourceSecret = readAudienceSecrets({ TENANT_SIGNING_SECRET: secret }, RESOURCE_SERVICE_AUDIENCE)[0]!
const refused = { success: false, message: 'Request was not signed by the gateway' }

t.test('a bad configuration stops the process with one line naming the variable', async (t) => {
  const base = { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', TENANT_SIGNING_SECRET: secret, AGENCY_SERVICE_PORT: '0' }
  const cases: Array<[string, ProcessEnv, RegExp]> = [
    [
      'no signing secret',
      { ...base, TENANT_SIGNING_SECRET: undefined },
      /^agency-service: invalid configuration: TENANT_SIGNING_SECRET: is required \(or AGENCY_SERVICE_SIGNING_SECRET\)\n$/,
    ],
    [
      'a short own signing secret',
      { ...base, AGENCY_SERVICE_SIGNING_SECRET: 'short' },
      /^agency-service: invalid configuration: AGENCY_SERVICE_SIGNING_SECRET: is too short/,
    ],
    [
      'the previous secret equal to the current one',
      { ...base, TENANT_SIGNING_SECRET_PREVIOUS: secret },
      /^agency-service: invalid configuration: TENANT_SIGNING_SECRET_PREVIOUS: must differ/,
    ],
    ['a bad Redis URL', { ...base, REDIS_URL: 'http://127.0.0.1:6379' }, /^agency-service: invalid configuration: REDIS_URL: must use redis/],
  ]
  for (const [name, env, expected] of cases) {
    const result = await runToExit(entry, env)
    t.equal(result.status, 1, name)
    t.match(result.stderr, expected, name)
    t.notMatch(result.stderr, secret, `${name}: the secret is never printed`)
  }
})

t.test('serves signed requests, invalidates over Redis, and exits 0 on SIGTERM', async (t) => {
  const db = await createTestDatabase(t)
  const redis = await createTestRedis(t)
  const tenants = new TenantStore(db.pool)
  const agency = await tenants.createAgency('Acme')
  const sub = await tenants.createSubAccount(agency.id, 'West')
  const key = await new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null)).create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'crm', 'test')

  // A stand-in gateway replica on this run's Redis prefix.
  const replica = await standInReplica(t, { secret: readKeyCacheSecret({ TENANT_SIGNING_SECRET: secret })!, redis })

  const port = await freePort()
  const service = await startProcess(
    t,
    entry,
    { DATABASE_URL: db.url, REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix, TENANT_SIGNING_SECRET: secret, AGENCY_SERVICE_PORT: String(port) },
    /agency-service ready/,
  )
  t.match(service.output(), /"address":"http:\/\/127\.0\.0\.1:/, 'listens on 127.0.0.1 by default')
  const acme = tenantClient(`http://127.0.0.1:${port}`, agencySecret, agencyTenant(agency.id))
  t.match((await acme.get('/v1/agency')).item, { id: agency.id, name: 'Acme' })
  t.equal((await acme.delete(`/v1/agency/sub-accounts/${sub.id}`)).status, 204)
  t.same(replica.droppedByMessage, [hashKey(key.key)], 'the gateway replica dropped the key before the DELETE answered')
  t.same(await lookupKeyByHash(db.pool, hashKey(key.key)), { status: 'deleted' })

  t.equal(await service.stop('SIGTERM'), 0, 'exit status 0')
  t.match(service.output(), /agency-service stopping/)
})

interface RunningService {
  baseUrl: string
  tenant: Tenant
  db: Awaited<ReturnType<typeof createTestDatabase>>
}

/** agency-service as a process over a database of its own (no Redis), with one agency to act as. */
async function startService(t: Parameters<typeof createTestDatabase>[0], env: ProcessEnv): Promise<RunningService> {
  const db = await createTestDatabase(t)
  const agency = await new TenantStore(db.pool).createAgency('Acme')
  const port = await freePort()
  await startProcess(t, entry, { DATABASE_URL: db.url, AGENCY_SERVICE_PORT: String(port), ...env }, /agency-service ready/)
  return { baseUrl: `http://127.0.0.1:${port}`, tenant: agencyTenant(agency.id), db }
}

t.test('a replayed signed request is refused', async (t) => {
  const { baseUrl, tenant } = await startService(t, { TENANT_SIGNING_SECRET: secret })
  const signing: SigningOptions = { secret: agencySecret, tenant, nonce: newNonce(), timestamp: Math.floor(Date.now() / 1000) }
  const created = await request(baseUrl, 'POST', '/v1/agency/sub-accounts', { body: { name: 'West' }, signing })
  t.equal(created.status, 201)
  const replayed = await request(baseUrl, 'POST', '/v1/agency/sub-accounts', { body: { name: 'West' }, signing })
  t.equal(replayed.status, 401, 'the very same request, sent again')
  t.same(replayed.json, refused)
  const list = await request(baseUrl, 'GET', '/v1/agency/sub-accounts', { signing: { secret: agencySecret, tenant } })
  t.same(list.items, [created.item], 'one sub-account was created, not two')
})

t.test('a re-bodied signed POST/PATCH is refused (the change is not applied: read the row back)', async (t) => {
  const { baseUrl, tenant, db } = await startService(t, { TENANT_SIGNING_SECRET: secret })
  const created = await request(baseUrl, 'POST', '/v1/agency/sub-accounts', { body: { name: 'West' }, signing: { secret: agencySecret, tenant } })
  t.equal(created.status, 201)
  const id = created.item['id']!
  const signedFor = (body: unknown): SigningOptions => ({ secret: agencySecret, tenant, contentDigest: contentDigest(JSON.stringify(body)) })

  const patch = await request(baseUrl, 'PATCH', `/v1/agency/sub-accounts/${id}`, { body: { name: 'Mallory' }, signing: signedFor({ name: 'West Coast' }) })
  t.equal(patch.status, 401, 'a PATCH whose body is not the signed one')
  t.same(patch.json, refused)
  const post = await request(baseUrl, 'POST', '/v1/agency/sub-accounts', { body: { name: 'Mallory' }, signing: signedFor({ name: 'East' }) })
  t.equal(post.status, 401, 'a POST whose body is not the signed one')

  const { rows } = await db.pool.query<{ id: string; name: string }>('SELECT id, name FROM sub_accounts WHERE agency_id = $1', [tenant.agencyId])
  t.same(rows, [{ id, name: 'West' }], 'the row is unchanged and nothing was created')
  const read = await request(baseUrl, 'GET', `/v1/agency/sub-accounts/${id}`, { signing: { secret: agencySecret, tenant } })
  t.equal(read.item['name'], 'West', 'and the service reads it back unchanged')
})

t.test("a request signed for the other backend's audience is refused", async (t) => {
  const { baseUrl, tenant } = await startService(t, { TENANT_SIGNING_SECRET: secret })
  const cases: Array<[string, SigningOptions]> = [
    ["resource-service's audience and secret", { secret: resourceSecret, tenant, audience: RESOURCE_SERVICE_AUDIENCE }],
    ["resource-service's audience, this backend's secret", { secret: agencySecret, tenant, audience: RESOURCE_SERVICE_AUDIENCE }],
    ["this audience, resource-service's secret", { secret: resourceSecret, tenant, audience: AGENCY_SERVICE_AUDIENCE }],
    ['this audience, the master secret itself', { secret, tenant, audience: AGENCY_SERVICE_AUDIENCE }],
  ]
  for (const [name, signing] of cases) {
    const response = await request(baseUrl, 'POST', '/v1/agency/sub-accounts', { body: { name: 'Mallory' }, signing })
    t.equal(response.status, 401, name)
    t.same(response.json, refused, name)
  }
  const list = await request(baseUrl, 'GET', '/v1/agency/sub-accounts', { signing: { secret: agencySecret, tenant } })
  t.equal(list.status, 200, 'signed for this backend, with its secret: accepted')
  t.same(list.items, [], 'nothing was created')
})

t.test("a backend given only its own AGENCY_SERVICE_SIGNING_SECRET (no TENANT_SIGNING_SECRET) works and refuses the other backend's secret", async (t) => {
  const own = randomBytes(24).toString('hex')
  const othersOwn = randomBytes(24).toString('hex')
  const { baseUrl, tenant } = await startService(t, { AGENCY_SERVICE_SIGNING_SECRET: own })
  const created = await request(baseUrl, 'POST', '/v1/agency/sub-accounts', { body: { name: 'West' }, signing: { secret: own, tenant } })
  t.equal(created.status, 201, 'signed with its own secret')
  const cases: Array<[string, SigningOptions]> = [
    [
      "the other backend's own secret (RESOURCE_SERVICE_SIGNING_SECRET), for the other audience",
      { secret: othersOwn, tenant, audience: RESOURCE_SERVICE_AUDIENCE },
    ],
    ["the other backend's own secret, for this audience", { secret: othersOwn, tenant, audience: AGENCY_SERVICE_AUDIENCE }],
    ['a secret derived from some TENANT_SIGNING_SECRET', { secret: deriveSecret(secret, `tenant-signing:${AGENCY_SERVICE_AUDIENCE}`), tenant }],
  ]
  for (const [name, signing] of cases) {
    const response = await request(baseUrl, 'POST', '/v1/agency/sub-accounts', { body: { name: 'Mallory' }, signing })
    t.equal(response.status, 401, name)
  }
  const list = await request(baseUrl, 'GET', '/v1/agency/sub-accounts', { signing: { secret: own, tenant } })
  t.same(list.items, [created.item], 'only the request signed with its own secret was applied')
})
