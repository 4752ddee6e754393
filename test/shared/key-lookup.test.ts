/**
 * The gateway's key lookup (lookupKeyByHash) is a prepared statement: planned
 * once per connection, and still answered right after a migration changed
 * what it returns (Postgres refuses the stale plan; that lookup goes unprepared,
 * and the connection that replaces the failed one prepares it afresh).
 */
import t from 'tap'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { createPool } from '@scoped/shared/db'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { lookupKeyByHash } from '@scoped/shared/key-store'
import { hashKey } from '@scoped/shared/keys'
import { createTestDatabase } from '../helpers/database.js'

t.test('prepared once per connection; a migration that changes its result does not break it', async (t) => {
  const db = await createTestDatabase(t)
  const tenants = new TenantStore(db.pool)
  const agency = await tenants.createAgency('Lookup')
  const sub = await tenants.createSubAccount(agency.id, 'Lookup West')
  const keys = new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null))
  const created = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'k', 'test', { rateLimit: { rate: 5, burst: 7 } })
  // One connection, so every lookup and the checks below run on the same one.
  const pool = createPool(db.url, { max: 1 })
  t.teardown(() => pool.end())

  const expected = {
    status: 'active',
    tenant: { scope: 'SUB-ACCOUNT', agencyId: agency.id, subAccountId: sub.id, keyId: created.id },
    rateLimit: { rate: 5, burst: 7 },
    version: 1,
  }
  t.same(await lookupKeyByHash(pool, hashKey(created.key)), expected)
  t.same(await lookupKeyByHash(pool, '0'.repeat(64)), { status: 'unknown' })
  const prepared = await pool.query<{ name: string }>(`SELECT name FROM pg_prepared_statements`)
  t.same(
    prepared.rows.map((row) => row.name),
    ['lookup-key-by-hash'],
    'one prepared statement on the connection, reused',
  )

  // The prepared plan's result type changes (int4 → int2): Postgres refuses to run it as it was.
  await db.pool.query(`ALTER TABLE api_keys ALTER COLUMN rate_limit_burst TYPE smallint`)
  t.same(await lookupKeyByHash(pool, hashKey(created.key)), expected, 'answered, unprepared')
  t.same(await lookupKeyByHash(pool, hashKey(created.key)), expected, 'and again')
  const afresh = await pool.query<{ name: string }>(`SELECT name FROM pg_prepared_statements`)
  t.same(
    afresh.rows.map((row) => row.name),
    ['lookup-key-by-hash'],
    'prepared afresh: the pool replaced the connection whose prepared lookup had gone stale',
  )
})
