/**
 * Migration 009 (a key's state version): every key starts at 1; every change
 * of what the gateways cache about it (allowlist, rate limit, expiry, roll,
 * revoke) moves it by one, made through agency-service's role; a last use
 * and a write of the version itself do not; every `changed` row of the
 * invalidation log carries the version the change made; and the gateway's
 * role reads it in the key lookup.
 */
import t from 'tap'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { createPool } from '@scoped/shared/db'
import type { Pool } from '@scoped/shared/db'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { lookupKeyByHash, recordLastUse } from '@scoped/shared/key-store'
import { hashKey } from '@scoped/shared/keys'
import { createServiceLogin } from '../helpers/database-roles.js'
import { createTestDatabase } from '../helpers/database.js'

t.test('the state version: moved by every change of the state, and by nothing else; carried by the log', async (t) => {
  const db = await createTestDatabase(t)
  const tenants = new TenantStore(db.pool)
  const agency = await tenants.createAgency('Versions')
  const sub = await tenants.createSubAccount(agency.id, 'Versions West')
  const [agencyLogin, gatewayLogin] = [await createServiceLogin(t, db, 'scoped_agency'), await createServiceLogin(t, db, 'scoped_gateway')]
  const service = createPool(agencyLogin.url, { max: 1, applicationName: 'scoped-api-test' })
  const gateway = createPool(gatewayLogin.url, { max: 1, applicationName: 'scoped-api-test' })
  t.teardown(() => Promise.all([service.end(), gateway.end()]))
  const created = await new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null)).create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'k', 'test')
  const hash = hashKey(created.key)

  const version = async (): Promise<number> =>
    Number((await db.pool.query<{ v: string }>(`SELECT state_version::text AS v FROM api_keys WHERE id = $1`, [created.id])).rows[0]!.v)
  const logged = async (): Promise<Array<[string, number | null]>> =>
    (
      await db.pool.query<{ state: string; v: string | null }>(
        `SELECT state, state_version::text AS v FROM key_invalidations WHERE key_hash = $1 ORDER BY id`,
        [hash],
      )
    ).rows.map((row) => [row.state, row.v === null ? null : Number(row.v)])
  const update = (pool: Pool, set: string) => pool.query(`UPDATE api_keys SET ${set} WHERE id = $1`, [created.id])

  t.equal(await version(), 1, 'a new key starts at 1')
  t.match(await lookupKeyByHash(gateway, hash), { status: 'active', version: 1 }, 'the gateway’s role reads it')

  await recordLastUse(gateway, new Map([[created.id, { at: new Date(), ip: '192.0.2.1' }]]))
  t.equal(await version(), 1, 'a last use (the gateway’s write) is no change of the state')
  await update(service, `state_version = 42`)
  t.equal(await version(), 1, 'a write of the version alone is undone')
  await update(service, `name = 'renamed'`).catch(() => undefined)
  t.equal(await version(), 1, 'nor does anything outside the state move it')

  const changes: Array<[string, string]> = [
    ['the allowlist', `allowed_cidrs = '{10.0.0.0/8}'`],
    ['the allowlist again, the same', `allowed_cidrs = '{10.0.0.0/8}'`],
    ['the rate limit', `rate_limit_rate = 5, rate_limit_burst = 10`],
    ['an expiry', `expires_at = now() + interval '1 day'`],
    ['a roll', `replaced_by = gen_random_uuid(), expires_at = now() + interval '1 hour'`],
    ['a revoke', `revoked_at = now(), revoked_by = 'test'`],
  ]
  let expected = 1
  for (const [what, set] of changes) {
    await update(service, set)
    if (!what.endsWith('the same')) expected++
    t.equal(await version(), expected, `${what}: version ${expected}`)
  }
  t.same(
    await logged(),
    [
      ['created', null],
      ['changed', 2],
      ['changed', 3],
      ['changed', 4],
      ['changed', 5],
      ['revoked', null],
    ],
    'the creation (migration 010), then each change with the version it made; a revoke is final without one',
  )
})
