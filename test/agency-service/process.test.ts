/**
 * agency-service as the process operators run: configuration checked once
 * at start, a "ready" line, key invalidation over Redis, exit 0 on SIGTERM.
 */
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { hashKey } from '@scoped/shared/keys'
import { lookupKeyByHash } from '@scoped/shared/key-lookup'
import { localOnlyInvalidator } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { createAgency, createSubAccount } from '@scoped/agency-service/tenants'
import { createTestDatabase } from '../helpers/database.js'
import { createTestRedis } from '../helpers/redis.js'
import { standInReplica } from '../helpers/invalidation.js'
import { freePort, runToExit, startProcess } from '../helpers/processes.js'
import type { ProcessEnv } from '../helpers/processes.js'
import { agencyTenant, tenantClient } from '../helpers/signed-request.js'

const entry = 'agency-service/src/main.ts'
const secret = randomBytes(24).toString('hex')

t.test('a bad configuration stops the process with one line naming the variable', async (t) => {
  const base = { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', TENANT_SIGNING_SECRET: secret, AGENCY_SERVICE_PORT: '0' }
  const cases: Array<[string, ProcessEnv, RegExp]> = [
    ['no signing secret', { ...base, TENANT_SIGNING_SECRET: undefined }, /^agency-service: invalid configuration: TENANT_SIGNING_SECRET: is required\n$/],
    ['the previous secret equal to the current one', { ...base, TENANT_SIGNING_SECRET_PREVIOUS: secret }, /^agency-service: invalid configuration: TENANT_SIGNING_SECRET_PREVIOUS: must differ/],
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
  const agency = await createAgency(db.pool, 'Acme')
  const sub = await createSubAccount(db.pool, agency.id, 'West')
  const key = await new KeyService(db.pool, localOnlyInvalidator).create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'crm', 'test')

  // A stand-in gateway replica on this run's Redis prefix.
  const dropped = await standInReplica(t, redis.url, redis.prefix)

  const port = await freePort()
  const service = await startProcess(
    t,
    entry,
    { DATABASE_URL: db.url, REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix, TENANT_SIGNING_SECRET: secret, AGENCY_SERVICE_PORT: String(port) },
    /agency-service ready/,
  )
  t.match(service.output(), /"address":"http:\/\/127\.0\.0\.1:/, 'listens on 127.0.0.1 by default')
  const acme = tenantClient(`http://127.0.0.1:${port}`, secret, agencyTenant(agency.id))
  t.match((await acme.get('/v1/agency')).item, { id: agency.id, name: 'Acme' })
  t.equal((await acme.delete(`/v1/agency/sub-accounts/${sub.id}`)).status, 204)
  t.same(dropped, [hashKey(key.key)], 'the gateway replica dropped the key before the DELETE answered')
  t.same(await lookupKeyByHash(db.pool, hashKey(key.key)), { status: 'deleted' })

  t.equal(await service.stop('SIGTERM'), 0, 'exit status 0')
  t.match(service.output(), /agency-service stopping/)
})
