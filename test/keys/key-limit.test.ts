import t from 'tap'
import { ACTIVE_KEY_LIMIT, KeyService } from '@scoped/agency-service/keys/key-service'
import type { KeyOwner } from '@scoped/agency-service/keys/key-service'
import { createPool } from '@scoped/shared/db'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { createTestDatabase } from '../helpers/database.js'
import { createTestTenants } from '../helpers/tenants.js'

const LIMIT_MESSAGE = 'Active API key limit reached for this scope'

t.test('the active-key limit', async (t) => {
  const db = await createTestDatabase(t)
  const keys = new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null))

  async function fill(owner: KeyOwner, count: number): Promise<string[]> {
    const ids: string[] = []
    for (let i = 0; i < count; i++) ids.push((await keys.create(owner, `key ${i}`, 'test')).id)
    return ids
  }

  for (const scope of ['AGENCY', 'SUB-ACCOUNT'] as const) {
    t.test(`${scope}: 25 active keys, the 26th is refused with the spec's message`, async (t) => {
      const tenants = await createTestTenants(db.pool, `Limit ${scope}`)
      const owner: KeyOwner = scope === 'AGENCY' ? { scope, agencyId: tenants.agencyId } : { scope, subAccountId: tenants.subAccountId }
      const ids = await fill(owner, ACTIVE_KEY_LIMIT)
      t.equal(ACTIVE_KEY_LIMIT, 25)
      await t.rejects(keys.create(owner, 'one too many', 'test'), { message: LIMIT_MESSAGE, statusCode: 400 })

      await keys.revoke(ids[0]!, 'test')
      const replacement = await keys.create(owner, 'after a revoke', 'test')
      t.ok(replacement.key, 'a revoked key does not count')
      await t.rejects(keys.create(owner, 'full again', 'test'), { message: LIMIT_MESSAGE })

      await keys.delete(ids[1]!, 'test')
      t.ok((await keys.create(owner, 'after a delete', 'test')).key, 'a deleted key does not count')
      await t.rejects(keys.create(owner, 'full once more', 'test'), { message: LIMIT_MESSAGE })

      const listed = await keys.list(owner)
      t.equal(listed.filter((key) => key.status === 'active').length, 25)
      t.equal(listed.filter((key) => key.status === 'revoked').length, 1)
    })
  }

  t.test('agency and sub-account limits are independent, and sub-accounts are independent of each other', async (t) => {
    const tenants = await createTestTenants(db.pool, 'Independent')
    await fill({ scope: 'AGENCY', agencyId: tenants.agencyId }, 25)
    await fill({ scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }, 25)
    const other = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: tenants.otherSubAccountId }, 'other sub-account', 'test')
    t.equal(other.scope, 'SUB-ACCOUNT')
    await t.rejects(keys.create({ scope: 'AGENCY', agencyId: tenants.agencyId }, 'x', 'test'), { message: LIMIT_MESSAGE })
    await t.rejects(keys.create({ scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }, 'x', 'test'), { message: LIMIT_MESSAGE })
  })

  for (const scope of ['AGENCY', 'SUB-ACCOUNT'] as const) {
    t.test(`${scope}: 40 simultaneous creations leave exactly 25 active keys`, async (t) => {
      const tenants = await createTestTenants(db.pool, `Race ${scope}`)
      const owner: KeyOwner = scope === 'AGENCY' ? { scope, agencyId: tenants.agencyId } : { scope, subAccountId: tenants.subAccountId }
      // A wider pool than the test database's default, so the 40 creations really run at once.
      const wide = createPool(db.url, { max: 20 })
      t.teardown(() => wide.end())
      const racers = new KeyService(wide, new KeyRevocationNotifier(wide, null))
      const results = await Promise.allSettled(Array.from({ length: 40 }, (_, i) => racers.create(owner, `racer ${i}`, 'test')))
      const created = results.filter((r) => r.status === 'fulfilled')
      const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected')
      t.equal(created.length, 25)
      t.equal(refused.length, 15)
      t.ok(
        refused.every((r) => (r.reason as Error).message === LIMIT_MESSAGE),
        'every refusal is the limit error',
      )
      t.equal((await keys.list(owner)).length, 25)
    })
  }
})
