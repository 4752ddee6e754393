/**
 * resource-service started in-process on a port of its own, over a database
 * of its own, with sub-accounts of two agencies to act as.
 */
import { randomBytes } from 'node:crypto'
import { createLogger } from '@scoped/shared/logger'
import { TenantStore } from '@scoped/agency-service/tenants'
import { buildResourceApp } from '@scoped/resource-service/app'
import { createTestDatabase } from '../helpers/database.js'
import type { TestDatabase } from '../helpers/database.js'
import { listen, subAccountTenant, tenantClient } from '../helpers/signed-request.js'
import type { TenantClient } from '../helpers/signed-request.js'
import type { Teardown } from '../helpers/teardown.js'

export function newSecret(): string {
  return randomBytes(24).toString('hex')
}

export interface ResourceServiceFixture {
  baseUrl: string
  db: TestDatabase
  secret: string
  previousSecret: string
  /** A sub-account of agency A. */
  alice: TenantClient
  /** Another sub-account of agency A. */
  bob: TenantClient
  /** A sub-account of agency B. */
  carol: TenantClient
}

export async function startResourceService(t: Teardown, options: { now?: () => Date } = {}): Promise<ResourceServiceFixture> {
  const db = await createTestDatabase(t)
  const secret = newSecret()
  const previousSecret = newSecret()
  const app = await buildResourceApp({
    pool: db.pool,
    logger: createLogger('resource-service', 'silent'),
    signingSecrets: [secret, previousSecret],
    now: options.now,
  })
  const baseUrl = await listen(t, app)
  const tenants = new TenantStore(db.pool)
  const agencyA = await tenants.createAgency('Agency A')
  const agencyB = await tenants.createAgency('Agency B')
  const a1 = await tenants.createSubAccount(agencyA.id, 'A one')
  const a2 = await tenants.createSubAccount(agencyA.id, 'A two')
  const b1 = await tenants.createSubAccount(agencyB.id, 'B one')
  return {
    baseUrl,
    db,
    secret,
    previousSecret,
    alice: tenantClient(baseUrl, secret, subAccountTenant(agencyA.id, a1.id)),
    bob: tenantClient(baseUrl, secret, subAccountTenant(agencyA.id, a2.id)),
    carol: tenantClient(baseUrl, secret, subAccountTenant(agencyB.id, b1.id)),
  }
}
