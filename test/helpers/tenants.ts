/** Agencies and sub-accounts for tests, made through the same functions the CLI uses. */
import type { Pool } from '@scoped/shared/db'
import { TenantStore } from '@scoped/agency-service/tenants'

export interface TestTenants {
  agencyId: string
  subAccountId: string
  otherSubAccountId: string
}

export async function createTestTenants(pool: Pool, name = 'Acme'): Promise<TestTenants> {
  const tenants = new TenantStore(pool)
  const agency = await tenants.createAgency(name)
  const sub = await tenants.createSubAccount(agency.id, `${name} West`)
  const other = await tenants.createSubAccount(agency.id, `${name} East`)
  return { agencyId: agency.id, subAccountId: sub.id, otherSubAccountId: other.id }
}
