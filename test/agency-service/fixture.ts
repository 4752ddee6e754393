/**
 * agency-service started in-process on a port of its own, over a database
 * of its own; key invalidation goes through a Redis key space of its own.
 */
import { randomBytes } from 'node:crypto'
import type { KeyInvalidator } from '@scoped/shared/key-invalidation'
import { createLogger } from '@scoped/shared/logger'
import { buildAgencyApp } from '@scoped/agency-service/app'
import { createKeyInvalidator } from '@scoped/agency-service/invalidator'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { createTestDatabase } from '../helpers/database.js'
import type { TestDatabase } from '../helpers/database.js'
import { createTestRedis } from '../helpers/redis.js'
import type { TestRedis } from '../helpers/redis.js'
import { agencyTenant, listen, tenantClient } from '../helpers/signed-request.js'
import type { TenantClient } from '../helpers/signed-request.js'
import type { Teardown } from '../helpers/teardown.js'

export function newSecret(): string {
  return randomBytes(24).toString('hex')
}

export interface AgencyServiceFixture {
  baseUrl: string
  db: TestDatabase
  redis: TestRedis
  keys: KeyService
  invalidator: KeyInvalidator
  secret: string
  previousSecret: string
  /** Agency A. */
  acme: TenantClient
  /** Agency B. */
  globex: TenantClient
}

export async function startAgencyService(
  t: Teardown,
  options: { now?: () => Date; webhookPolicy?: { allowPrivateAddresses: boolean } } = {},
): Promise<AgencyServiceFixture> {
  const db = await createTestDatabase(t)
  const redis = await createTestRedis(t)
  const invalidator = createKeyInvalidator(
    db.pool,
    { redisUrl: redis.url, redisKeyPrefix: redis.prefix, keyCacheSecret: randomBytes(32) },
    'agency-service-test',
  )
  t.teardown(() => invalidator.close())
  const keys = new KeyService(db.pool, invalidator)
  const secret = newSecret()
  const previousSecret = newSecret()
  const app = await buildAgencyApp({
    pool: db.pool,
    keys,
    logger: createLogger('agency-service', 'silent'),
    signingSecrets: [secret, previousSecret],
    now: options.now,
    ...(options.webhookPolicy === undefined ? {} : { webhookPolicy: options.webhookPolicy }),
  })
  const baseUrl = await listen(t, app)
  const tenants = new TenantStore(db.pool)
  const acme = await tenants.createAgency('Acme')
  const globex = await tenants.createAgency('Globex')
  return {
    baseUrl,
    db,
    redis,
    keys,
    invalidator,
    secret,
    previousSecret,
    acme: tenantClient(baseUrl, secret, agencyTenant(acme.id)),
    globex: tenantClient(baseUrl, secret, agencyTenant(globex.id)),
  }
}
