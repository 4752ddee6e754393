/** Agencies and sub-accounts for tests, made through the same functions the CLI uses. */
import type { Pool } from '@scoped/shared/db'
import { createAgency, createSubAccount } from '@scoped/agency-service/tenants'

export interface TestTenants {
  agencyId: string
  subAccountId: string
  otherSubAccountId: string
}

export async function createTestTenants(pool: Pool, name = 'Acme'): Promise<TestTenants> {
  const agency = await createAgency(pool, name)
  const sub = await createSubAccount(pool, agency.id, `${name} West`)
  const other = await createSubAccount(pool, agency.id, `${name} East`)
  return { agencyId: agency.id, subAccountId: sub.id, otherSubAccountId: other.id }
}
